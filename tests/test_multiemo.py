"""MultiEmo-Bench's data format, hooks and a real lmms-eval CLI run on the bundled sample."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import env_without_secrets
from PIL import Image

from emo_tasks.mme_emotion.data import DataError
from emo_tasks.multiemo import hooks
from emo_tasks.multiemo.data import EMOTIONS, data_file, load_images
from emo_tasks.multiemo.sample import _IMAGES


def _row(**over: object) -> dict:
    votes = dict.fromkeys(EMOTIONS, 0) | {"awe": 12, "contentment": 6, "none": 2}
    row = {"id": "img1", "image": "a.png", "votes": votes, "n_annotators": 20, "original_label": "awe",
           "source": "EmoSet"}  # fmt: skip
    row.update(over)
    return row


def _write(tmp_path: Path, *rows: dict) -> Path:
    Image.new("RGB", (4, 4)).save(tmp_path / "a.png")
    path = tmp_path / "multiemo.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_valid_row_loads(tmp_path: Path) -> None:
    (row,) = load_images(_write(tmp_path, _row()))
    assert row["votes"] == [0, 0, 12, 6, 0, 0, 0, 0] and row["votes_none"] == 2
    assert Path(row["image_path"]).is_file() and row["image_id"] == "img1"


@pytest.mark.parametrize(
    "over, message",
    [
        ({"votes": dict.fromkeys(EMOTIONS, 0)}, "missing \\['none'\\]"),
        ({"votes": dict.fromkeys(EMOTIONS, 0) | {"none": 0, "joy": 1}}, "unknown \\['joy'\\]"),
        ({"votes": dict.fromkeys(EMOTIONS, 0) | {"none": 21}}, "0..20"),
        ({"votes": dict.fromkeys(EMOTIONS, -1) | {"none": 0}}, "0..20"),
        ({"n_annotators": 1}, "n_annotators"),
        ({"original_label": "joy"}, "original_label"),
        ({"source": "Flickr"}, "source"),
        ({"image": "missing.png"}, "missing"),
        ({"annotators": [["awe"]] * 19}, "annotators must list 20"),
        ({"annotators": [["awe"]] * 20}, "do not add up"),
        ({"annotators": [["awe", "awe"]] + [["none"]] * 19}, "distinct"),
    ],
)
def test_malformed_rows_name_the_line(tmp_path: Path, over: dict, message: str) -> None:
    path = _write(tmp_path, _row(id="ok"), _row(**over))
    with pytest.raises(DataError, match=message) as err:
        load_images(path)
    assert str(path) in str(err.value) and "line 2" in str(err.value)


def test_duplicate_ids_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="repeats line 1"):
        load_images(_write(tmp_path, _row(), _row()))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_row()) + "\n{oops\n")
    with pytest.raises(DataError, match="line 2: not valid JSON"):
        load_images(bad)
    with pytest.raises(DataError, match="EMO_DATA_ROOT"):
        data_file({})


def test_hooks_one_doc_per_image_and_emotion_and_parse_failures_recorded(tmp_path: Path, monkeypatch) -> None:
    import datasets

    path = _write(tmp_path, _row(id="a"), _row(id="b"))
    monkeypatch.setenv("EMO_MULTIEMO_FILE", str(path))
    docs = hooks.process_docs(datasets.Dataset.from_list([{"emo_source": "multiemo/benchmark"}]))
    assert len(docs) == 16 and [d["emotion"] for d in docs][:8] == list(EMOTIONS)
    assert "awe" in hooks.doc_to_text(docs[2]) and "0 (not at all) to 100" in hooks.doc_to_text(docs[2])
    assert hooks.doc_to_text(docs[2], {"prompt": "Rate {emotion}."}) == "Rate awe."
    ok = hooks.process_results(docs[0], ["Score: 70. Reason: calm."])["srcc"]
    bad = hooks.process_results(docs[1], ["Score: 170"])["srcc"]
    none = hooks.process_results(docs[2], ["I cannot tell."])["srcc"]
    assert ok["predicted_score"] == 70 and ok["parse_status"] == "parsed"
    assert bad["predicted_score"] is None and bad["parse_status"] == "out_of_range"
    assert none["predicted_score"] is None and none["parse_status"] == "missing"
    assert "score" not in ok  # lmms-eval's CLT stderr would read it as a 0/1 outcome


def _run(tmp_path: Path, response: str) -> dict:
    env = env_without_secrets()
    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", EMO_CACHE_DIR=str(tmp_path / "cache"), EMO_PROGRESS="0")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={response}",
           "--tasks", "multiemo_sample", "--output_path", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    files = sorted(out.rglob("*_results.json"))
    assert files, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(files[-1].read_text())["results"]["multiemo_sample"]


@pytest.mark.slow
def test_sample_with_constant_scores(tmp_path: Path) -> None:
    res = _run(tmp_path, "Score: 70. Reason: calm colours.")
    n = len(_IMAGES)
    # every image's 8 scores tie: P = all 8, so each image earns |argmax votes| / 8 on our labels
    expected = 0.0
    for votes, _, _ in _IMAGES.values():
        top = max(votes)
        expected += sum(v == top for v in votes) / 8
    assert res["precision_ours,none"] == pytest.approx(100 * expected / n)
    assert res["precision_original,none"] == pytest.approx(100 / 8)
    assert res["precision_single,none"] == pytest.approx(100 / 8)
    # constant predictions: SRCC/PLCC undefined for every image, counted, never a number from nothing
    assert res["srcc,none"] is None and res["plcc,none"] is None
    assert res["n_srcc_undefined,none"] == n and res["n_plcc_undefined,none"] == n
    assert res["n_images,none"] == n and res["n_parse_failed,none"] == 0 and res["n_images_incomplete,none"] == 0
    assert res["cheb,none"] is not None and res["kl,none"] is not None


@pytest.mark.slow
def test_sample_without_scores_counts_failures(tmp_path: Path) -> None:
    res = _run(tmp_path, "I would rather not say.")
    assert res["n_parse_failed,none"] == 8 * len(_IMAGES) and res["n_images_incomplete,none"] == len(_IMAGES)
    assert res["precision_ours,none"] is None and res["cheb,none"] is None
