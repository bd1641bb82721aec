"""Issue 14, "Data and answers": bad inputs that used to cost a run (each test reproduces the probe).

10 a lone surrogate in an answer; (a) a key echoed in a 200 answer; 11 non-UTF-8 data files (and a BOM);
12 MVEI duplicate ids; 14 MultiEmo impossible votes; 15 huge images; (b) one image-path policy for the three
benchmarks; (c) the MVEI strict parser's final "Answer:"; (d) ER-Wild's per-category label merges.
(13, MultiEmo's all-"none" images, is pinned in test_multiemo_scoring.py.)
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import env_without_secrets
from PIL import Image

from emo_tasks import images
from emo_tasks.common import DataError, iter_jsonl, load_json, read_text
from emo_tasks.mme_emotion import hooks as mme_hooks
from emo_tasks.mme_emotion import scoring as mme_scoring
from emo_tasks.mme_emotion.data import load_task_docs
from emo_tasks.mme_emotion.protocol import spec_for
from emo_tasks.multiemo.data import load_images
from emo_tasks.mvei.data import load_docs
from emo_tasks.mvei.scoring import CORRECT, GIVE_UP, INCORRECT, parse_official, parse_strict
from emo_tasks.settings import CommonSettings, SettingsError
from judges.audit import json_text, redact, write_audit_jsonl

KEY = "sk-test-0123456789abcdef"
LATIN1 = "Statement: caf\u00e9 \u2014 it feels calm".encode("cp1252")  # \xe9 and \x97: not UTF-8


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ------------------------------------------------------------------------------------------------ 10 + (a)
def test_audit_writer_survives_a_lone_surrogate(tmp_path: Path) -> None:
    # the probe: a model answered "\ud800"; the writer raised UnicodeEncodeError after the judge phase
    rows = [{"answer": "ok \ud800 end", "steps": ["\udfff"]}, {"answer": "plain caf\u00e9"}]
    path = write_audit_jsonl(tmp_path / "log.jsonl", rows)
    back = _lines(path)  # valid UTF-8 and valid JSON, line by line
    assert back == rows  # \u escapes read back to the same strings
    assert "caf\u00e9" in path.read_text(encoding="utf-8")  # readable text where UTF-8 can hold it
    write_audit_jsonl(path, [{"answer": "\ud800"}], append=True)
    assert _lines(path)[-1] == {"answer": "\ud800"}


def test_mme_judge_logs_survive_a_lone_surrogate_and_redact_the_key(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    row = {"answer": "\ud800", "judge_text": f"200 OK, echoing your key {KEY}", "step_text": f"Bearer {KEY}"}
    summary = {"metrics": {"rec_s": 1.0}, "judge_failures": {f"auth {KEY}": 1}, "note": "\udc80"}
    mme_hooks._write_logs(SimpleNamespace(output_path=str(tmp_path)), ["ER-Lab"], "sample", summary, [row])
    files = sorted((tmp_path / "emo_tasks_judge").iterdir())
    assert [f.name.rsplit("_", 1)[-1] for f in files] == ["judge.jsonl", "summary.json"]
    for f in files:
        text = f.read_text(encoding="utf-8")
        assert KEY not in text and "***" in text
    (logged,) = _lines(files[0])
    assert logged["answer"] == "\ud800" and logged["judge_text"] == "200 OK, echoing your key ***"
    assert json.loads(files[1].read_text(encoding="utf-8"))["note"] == "\udc80"


def test_redaction_reaches_every_string(monkeypatch) -> None:
    monkeypatch.setenv("AZURE_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    record = {"raw_answer": KEY, "nested": [{"x": f"a{KEY}b"}], KEY: 1, "n": 3}
    assert redact(record) == {"raw_answer": "***", "nested": [{"x": "a***b"}], "***": 1, "n": 3}
    assert KEY not in json_text(record)
    assert redact("abc", ["ab"]) == "abc"  # too short to be a key: never redacts ordinary text


# ------------------------------------------------------------------------------------------------ 11
def _mvei_row(image: str = "a.png", statement: str = "It feels calm.") -> dict[str, Any]:
    return {"image": image, "statement": statement, "label": "correct", "dimension": "scene context"}


def _png(path: Path, size: tuple[int, int] = (8, 6)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, (200, 30, 40)).save(path)
    return path


def test_shared_reader_names_file_offset_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b'{"a": 1,\n "b": "' + LATIN1 + b'"}')
    with pytest.raises(DataError) as info:
        read_text(path)
    msg = str(info.value)
    offset = path.read_bytes().index(b"\xe9")
    assert str(path) in msg and f"byte {offset}" in msg and "line 2" in msg and "UTF-8" in msg
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps({"a": "caf\u00e9"}).encode())
    assert load_json(bom) == {"a": "caf\u00e9"}


def test_mvei_json_not_utf8(tmp_path: Path) -> None:
    _png(tmp_path / "a.png")
    path = tmp_path / "mvei.json"
    row = {"image_path": "a.png", "prompt": "PROMPT", "ground_truth": "correct"}
    row["other_info"] = {"statement_meta": {"class": "scene context"}}
    path.write_bytes(json.dumps({"1": row}).encode().replace(b"PROMPT", LATIN1))
    with pytest.raises(DataError) as info:
        load_docs(path)
    assert str(path) in str(info.value) and "byte" in str(info.value)
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"1": row}).encode())  # a BOM is simply accepted
    assert [d["statement"] for d in load_docs(path)] == ["PROMPT"]


def test_mvei_jsonl_and_multiemo_not_utf8(tmp_path: Path) -> None:
    _png(tmp_path / "a.png")
    mvei = tmp_path / "mvei.jsonl"
    mvei.write_bytes(json.dumps(_mvei_row()).encode() + b"\n" + LATIN1 + b"\n")
    with pytest.raises(DataError, match=r"mvei\.jsonl: not UTF-8 text \(byte \d+ .*line 2"):
        load_docs(mvei)
    multi = tmp_path / "multiemo.jsonl"
    multi.write_bytes(b"\xef\xbb\xbf" + json.dumps(_multiemo_row()).encode() + b"\n")
    assert [r["image_id"] for r in load_images(multi)] == ["m1"]  # BOM accepted
    multi.write_bytes(json.dumps(_multiemo_row()).encode() + b"\n" + LATIN1)
    with pytest.raises(DataError, match=r"multiemo\.jsonl: not UTF-8 text \(byte"):
        load_images(multi)
    with pytest.raises(DataError, match="not UTF-8"):
        list(iter_jsonl(multi))


def test_mme_question_file_not_utf8(tmp_path: Path) -> None:
    spec = spec_for("ER-Lab")
    qpath = tmp_path / spec.question_relpath
    qpath.parent.mkdir(parents=True)
    rows = [{"video_id": "IEMOCAP/video/a.mp4", "label": "Anger", "label_set": ["Anger", "Sadness"]}]
    qpath.write_bytes(json.dumps(rows).encode()[:-1] + b', "' + LATIN1 + b'"]')
    with pytest.raises(DataError) as info:
        load_task_docs("ER-Lab", tmp_path, need_clues=False)
    assert str(qpath) in str(info.value) and "not UTF-8" in str(info.value) and "byte" in str(info.value)
    qpath.write_bytes(b"\xef\xbb\xbf" + json.dumps(rows).encode())
    assert [d["video_id"] for d in load_task_docs("ER-Lab", tmp_path, need_clues=False)] == ["IEMOCAP/video/a.mp4"]


# ------------------------------------------------------------------------------------------------ 12
def test_mvei_duplicate_ids_are_rejected_with_both_rows(tmp_path: Path) -> None:
    _png(tmp_path / "a.png")

    def row(statement: str) -> str:
        return json.dumps(
            {
                "image_path": "a.png",
                "prompt": statement,
                "ground_truth": "correct",
                "other_info": {"statement_meta": {"class": "scene context"}},
            }
        )

    path = tmp_path / "mvei.json"
    path.write_text('{"7": ' + row("First one.") + ', "8": ' + row("Other.") + ', "7": ' + row("Second one.") + "}")
    with pytest.raises(DataError) as info:
        load_docs(path)
    msg = str(info.value)
    assert str(path) in msg and "'7'" in msg and "entries 1 and 3" in msg
    assert "First one." in msg and "Second one." in msg


# ------------------------------------------------------------------------------------------------ 14
def _multiemo_row(**change: Any) -> dict[str, Any]:
    votes = {"amusement": 3, "anger": 0, "awe": 12, "contentment": 9, "disgust": 0, "excitement": 4, "fear": 0}
    row = {
        "id": "m1",
        "image": "a.png",
        "votes": {**votes, "sadness": 0, "none": 1},
        "n_annotators": 20,
        "original_label": "awe",
        "source": "EmoSet",
    }
    return {**row, **change}


def _write_multiemo(folder: Path, rows: list[dict[str, Any]]) -> Path:
    _png(folder / "a.png")
    path = folder / "multiemo.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_multiemo_votes_must_cover_every_annotator(tmp_path: Path) -> None:
    zero = dict.fromkeys(_multiemo_row()["votes"], 0)
    bad = _multiemo_row(id="m2", votes={**zero, "awe": 3})  # 3 votes from 20 annotators: impossible
    path = _write_multiemo(tmp_path, [_multiemo_row(), bad])
    with pytest.raises(DataError) as info:
        load_images(path)
    assert f"{path} line 2" in str(info.value) and "add up to 3" in str(info.value)
    # all "none" is possible (20 annotators, 20 "none" votes); so are multi-selections summing above n
    ok = _multiemo_row(id="m3", votes={**zero, "none": 20})
    assert len(load_images(_write_multiemo(tmp_path, [_multiemo_row(), ok]))) == 2


# ------------------------------------------------------------------------------------------------ 15
def _png_header_only(path: Path, width: int, height: int) -> Path:
    """A PNG whose header claims width x height (its data is one tiny row): Image.open sees the size only."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b"")
    path.write_bytes(raw)
    return path


def test_huge_image_is_a_per_file_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("EMO_MAX_IMAGE_PIXELS", raising=False)
    bomb = _png_header_only(tmp_path / "bomb.png", 20000, 20000)  # Pillow: DecompressionBombError, no file name
    with pytest.raises(DataError) as info:
        images.load_image(bomb, "MVEI")
    assert str(bomb) in str(info.value) and "EMO_MAX_IMAGE_PIXELS" in str(info.value)
    big = _png_header_only(tmp_path / "big.png", 12000, 9000)
    monkeypatch.setenv("EMO_MAX_IMAGE_PIXELS", "100000000")
    with pytest.raises(DataError, match=r"big\.png is 12000x9000 = 108,000,000 pixels, above EMO_MAX_IMAGE_PIXELS"):
        images.load_image(big, "MultiEmo-Bench")


def test_bad_pixel_limit_fails_with_the_settings() -> None:
    with pytest.raises(SettingsError, match="EMO_MAX_IMAGE_PIXELS"):
        CommonSettings.from_env({"EMO_MAX_IMAGE_PIXELS": "lots"})
    assert CommonSettings.from_env({"EMO_MAX_IMAGE_PIXELS": "5000"}).max_image_pixels == 5000


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_large_images_are_downscaled_before_they_are_held(tmp_path: Path, monkeypatch, fmt: str) -> None:
    monkeypatch.setattr(images, "HOLD_PIXELS", 100 * 75)
    path = tmp_path / f"wide.{fmt.lower()}"
    Image.new("RGB", (800, 600), (10, 120, 230)).save(path, format=fmt)
    img = images.load_image(path, "MVEI")
    assert img.mode == "RGB" and img.size[0] * img.size[1] <= 100 * 75
    assert abs(img.size[0] / img.size[1] - 4 / 3) < 0.05


def test_normal_images_are_unchanged(tmp_path: Path) -> None:
    path = _png(tmp_path / "n.png", (640, 480))
    Image.effect_noise((640, 480), 40).convert("RGB").save(path)
    with Image.open(path) as ref:
        expected = ref.convert("RGB")
    got = images.load_image(path, "MVEI")
    assert got.size == expected.size and got.tobytes() == expected.tobytes()


# ------------------------------------------------------------------------------------------------ (b)
@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink"])
def test_one_path_policy_for_the_three_benchmarks(tmp_path: Path, kind: str) -> None:
    outside = _png(tmp_path / "outside" / "x.png")
    data = tmp_path / "data"
    data.mkdir()
    if kind == "dotdot":
        listed = "../outside/x.png"
    elif kind == "absolute":
        listed = str(outside)
    else:
        listed = "link.png"
        os.symlink(outside, data / "link.png")
    mvei = data / "mvei.jsonl"
    mvei.write_text(json.dumps(_mvei_row(image=listed)) + "\n")
    with pytest.raises(DataError, match=r"mvei\.jsonl line 1: image"):
        load_docs(mvei)
    multi = data / "multiemo.jsonl"
    multi.write_text(json.dumps(_multiemo_row(image=listed)) + "\n")
    with pytest.raises(DataError, match=r"multiemo\.jsonl line 1: image"):
        load_images(multi)
    # MME-Emotion's videos follow the same rule (it refused ".." and absolute paths already; now symlinks too)
    spec = spec_for("ER-Lab")
    qpath = data / spec.question_relpath
    qpath.parent.mkdir(parents=True)
    video = listed if kind != "symlink" else "v.mp4"
    if kind == "symlink":
        os.symlink(outside, data / "v.mp4")
    qpath.write_text(json.dumps([{"video_id": video, "label": "Anger", "label_set": ["Anger", "Sadness"]}]))
    with pytest.raises(DataError, match=r"row 0: video"):
        load_task_docs("ER-Lab", data, need_clues=False)


def test_paths_inside_the_folder_still_load(tmp_path: Path) -> None:
    _png(tmp_path / "img" / "a.png")
    os.symlink(tmp_path / "img" / "a.png", tmp_path / "inside_link.png")  # a symlink inside the folder is fine
    rows = [_mvei_row(image="./img/../img/a.png"), _mvei_row(image="inside_link.png", statement="Other.")]
    path = tmp_path / "mvei.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [d["image_name"] for d in load_docs(path)] == ["img/a.png", "inside_link.png"]


# ------------------------------------------------------------------------------------------------ (c)
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Correctly identified emotion: joy. Answer: Incorrect", INCORRECT),
        ("The statement is incorrect at first sight. Final answer: Correct", CORRECT),
        ("**Answer:** Incorrect", INCORRECT),
        ("Answer: Correct. It is not correct to say otherwise.", CORRECT),
        ("The statement is correct. Answer:", CORRECT),  # no verdict after the label: the whole text decides
        ("Answer: maybe correct", GIVE_UP),  # a hedge after the label stays a give-up
    ],
)
def test_strict_parser_final_answer_wins(text: str, expected: str) -> None:
    assert parse_strict(text) == expected


def test_official_parser_is_untouched_by_the_answer_label() -> None:
    # the authors' rule stays as it is ("incorrect" anywhere wins): parity with their evaluator
    assert parse_official("Correctly identified emotion: joy. Answer: Incorrect") == INCORRECT
    assert parse_official("Answer: Correct") == CORRECT


# ------------------------------------------------------------------------------------------------ (d)
def _er_wild_item(label: str) -> dict[str, Any]:
    labels = ["anger", "angry", "happy", "happiness", "sad", "neutral"]
    return {"label": label, "labels": [label], "label_set": labels, "answer": f"The answer: {label}"}


def test_er_wild_per_category_merges_label_variants_like_the_official_script() -> None:
    spec = spec_for("ER-Wild")
    samples = [mme_scoring.score_sample(spec, _er_wild_item(x)) for x in ("angry", "anger", "happy", "sad", "neutral")]
    samples = [mme_scoring.SampleResult(s.label, "scored", 1.0, 0.5, 3, 1.0, (), s.category) for s in samples]
    settings = SimpleNamespace(judge_mode="api", alpha=0.5)
    out = mme_scoring.category_breakdown(samples, settings)
    assert sorted(out) == ["anger", "happiness", "neutral", "sadness"]
    assert out["anger"]["n_scored"] == 2
    # labels stay as written (the per-sample logs, the metrics): only the breakdown's keys are merged
    assert [s.label for s in samples] == ["angry", "anger", "happy", "sad", "neutral"]
    # the other tasks keep the ground-truth string as written (official: no merges there)
    er_lab = mme_scoring.score_sample(spec_for("ER-Lab"), _er_wild_item("angry"))
    assert er_lab.category == "" and mme_scoring.category_of(spec_for("ER-Lab"), "angry") == "angry"


def test_many_rows_resolve_their_folders_once_and_still_refuse_every_way_out(tmp_path: Path) -> None:
    """MME-Emotion's loader resolves the root and each video folder once per file (`contained_path`'s memo); a
    folder symlink or a file symlink leading out is refused on any row, an inside one still loads."""
    outside = tmp_path / "outside"
    (outside / "clips").mkdir(parents=True)
    (outside / "clips" / "far.mp4").write_bytes(b"x")
    data = tmp_path / "data"
    (data / "vids").mkdir(parents=True)
    for name in ("a.mp4", "b.mp4"):
        (data / "vids" / name).write_bytes(b"v")
    os.symlink(data / "vids" / "a.mp4", data / "vids" / "inside.mp4")
    spec = spec_for("ER-Lab")
    qpath = data / spec.question_relpath
    qpath.parent.mkdir(parents=True)

    def load(videos: list[str]) -> list[dict]:
        rows = [{"video_id": v, "label": "Anger", "label_set": ["Anger", "Sadness"]} for v in videos]
        qpath.write_text(json.dumps(rows))
        return load_task_docs("ER-Lab", data, need_clues=False)

    assert len(load(["vids/a.mp4", "vids/b.mp4", "vids/inside.mp4", "vids/../vids/b.mp4"])) == 4
    os.symlink(outside / "clips" / "far.mp4", data / "vids" / "out.mp4")
    with pytest.raises(DataError, match=r"row 2: video path 'vids/out.mp4' is a symlink leading out"):
        load(["vids/a.mp4", "vids/b.mp4", "vids/out.mp4"])
    os.symlink(outside / "clips", data / "away")  # a folder leading out: every file under it is refused
    with pytest.raises(DataError, match=r"row 1: video path 'away/far.mp4' is a symlink leading out"):
        load(["vids/a.mp4", "away/far.mp4"])


def _hub_cache(home: Path, repo: str, files: dict[str, bytes]) -> Path:
    """A Hugging Face cache holding one revision of dataset `repo`, laid out as `snapshot_download` leaves it: each
    file of `snapshots/<rev>/` a relative symlink to `blobs/<hash>`. Returns the snapshot folder."""
    base = home / "hub" / f"datasets--{repo.replace('/', '--')}"
    rev = "0123456789abcdef0123456789abcdef01234567"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(rev)
    (base / "blobs").mkdir()
    for name, data in files.items():
        blob = base / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = base / "snapshots" / rev / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    return base / "snapshots" / rev


def test_a_data_set_in_the_hub_cache_loads_through_its_links(tmp_path: Path) -> None:
    """The Hub cache stores a snapshot's files as links into the repository's own `blobs/`: MVEI from the Hub
    (offline, from the cache) loads its images through them; a link out of the snapshot anywhere else is still
    refused."""
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(buf, format="PNG")
    row = {"image": "images/a.png", "statement": "It evokes joy.", "label": "correct", "dimension": "scene context"}
    snapshot = _hub_cache(tmp_path / "hf", "me/mvei", {"data/mvei.jsonl": (json.dumps(row) + "\n").encode(),
                                                       "data/images/a.png": buf.getvalue()})  # fmt: skip
    settings = {"EMO_MVEI_HUB_ID": "me/mvei", "EMO_CACHE_DIR": str(tmp_path / "cache")}
    code = (
        "from emo_tasks.mvei import hooks\n"
        f"docs = hooks.load_task('mvei/benchmark', {settings!r})\n"
        "print(len(docs), docs[0]['image_path'])\n"
    )
    env = {**env_without_secrets(), "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    env.pop("EMO_DATA_ROOT", None)
    env.pop("EMO_MVEI_FILE", None)
    ok = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert ok.stdout.split() == ["1", str(snapshot / "data" / "images" / "a.png")]
    # the same file linked from outside the repository's store is still a way out
    elsewhere = tmp_path / "elsewhere.png"
    elsewhere.write_bytes(buf.getvalue())
    (snapshot / "data" / "images" / "a.png").unlink()
    os.symlink(elsewhere, snapshot / "data" / "images" / "a.png")
    refused = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "is a symlink leading out of" in refused.stderr, refused.stderr[-3000:]
