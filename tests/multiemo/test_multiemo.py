"""MultiEmo-Bench's data format, hooks and a real lmms-eval CLI run on the bundled sample."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import env_without_secrets
from PIL import Image
from test_mvei_in_judge_stage import assert_run_rescores_exactly

from emo_tasks.common import DataError
from emo_tasks.multiemo import hooks
from emo_tasks.multiemo.data import EMOTIONS, data_file, load_images
from emo_tasks.multiemo.sample import _IMAGES
from emo_tasks.multiemo.settings import MultiEmoSettings
from emo_tasks.settings import SettingsError, environ
from judges import JudgeConfigError


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
        data_file(MultiEmoSettings.from_env({}))


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


# ------------------------------------------------------------------------------------------------ settings
@pytest.mark.parametrize(
    "env, variable, value, accepted",
    [
        ({"EMO_MULTIEMO_FILE": "/no/such.jsonl"}, "EMO_MULTIEMO_FILE", "/no/such.jsonl", "multiemo.jsonl"),
        ({"EMO_DATA_ROOT": "/no/such/root"}, "EMO_DATA_ROOT", "/no/such/root", "multiemo/multiemo.jsonl"),
        ({"EMO_MULTIEMO_HUB_ID": "a/b/c"}, "EMO_MULTIEMO_HUB_ID", "a/b/c", "owner/name"),
        ({"EMO_CACHE_DIR": "/tmp/x", "EMO_PROGRESS": "sometimes"}, "EMO_PROGRESS", "sometimes", "0, false"),
    ],
)
def test_bad_settings_name_the_variable_value_and_accepted(env: dict, variable: str, value: str, accepted: str) -> None:
    with pytest.raises(SettingsError) as err:
        MultiEmoSettings.from_env(env)
    message = str(err.value)
    assert f"{variable}=" in message and repr(value) in message and accepted in message


def test_bad_judge_settings_stop_the_task_too() -> None:
    with pytest.raises(JudgeConfigError, match="EMO_JUDGE_TIMEOUT='soon'.*a number"):
        MultiEmoSettings.from_env({"EMO_JUDGE_TIMEOUT": "soon"}, "sample")


def test_settings_resolve_data_judge_and_cache(tmp_path: Path) -> None:
    path = _write(tmp_path, _row())
    env = {"EMO_CACHE_DIR": str(tmp_path / "cache"), "EMO_MULTIEMO_FILE": str(path), "EMO_JUDGE_MODEL": "my-judge"}
    settings = MultiEmoSettings.from_env(env)
    assert (settings.data.file, settings.data.hub_id, settings.judge_model) == (path, None, "my-judge")
    assert settings.engine.cache_path == tmp_path / "cache" and data_file(settings) == path
    assert hash(settings) == hash(MultiEmoSettings.from_env(dict(env)))
    assert MultiEmoSettings.from_env({**env, "EMO_JUDGE_CACHE": "0"}).engine.cache_path is None
    assert MultiEmoSettings.from_env({"EMO_MULTIEMO_HUB_ID": "me/multiemo"}).data.hub_id == "me/multiemo"
    # a command line's --data, and the sample, read none of the data variables
    bad = {**env, "EMO_MULTIEMO_FILE": "/no/such.jsonl", "EMO_DATA_ROOT": "/no/root"}
    assert MultiEmoSettings.from_env(bad, data_file=path).data.file == path
    sample = MultiEmoSettings.from_env(bad, "sample")
    assert sample.data.file is None and sample.data.hub_id is None
    assert data_file(sample) == tmp_path / "cache" / "samples" / "multiemo-v1" / "multiemo.jsonl"
    assert len(load_images(data_file(sample))) == len(_IMAGES)


def test_process_docs_fails_fast_and_registers_what_it_loaded(tmp_path: Path, monkeypatch) -> None:
    import datasets

    placeholder = datasets.Dataset.from_list([{"emo_source": "multiemo/benchmark"}])
    monkeypatch.setenv("EMO_MULTIEMO_FILE", str(tmp_path / "typo.jsonl"))
    with pytest.raises(SettingsError, match="EMO_MULTIEMO_FILE="):
        hooks.process_docs(placeholder)
    path = _write(tmp_path, _row(id="a"), _row(id="b"))
    monkeypatch.setenv("EMO_MULTIEMO_FILE", str(path))
    docs = hooks.process_docs(placeholder)
    loaded = hooks.STATE.sources.get("benchmark")
    assert loaded.settings == MultiEmoSettings.from_env(environ()) and set(loaded.images) == {"a", "b"}
    # image a: all 8 answers, one without a score; image b: only 3 answers came back (e.g. --limit)
    records = [hooks.process_results(d, ["Score: 170" if i == 3 else f"Score: {10 * i}"])["cheb"]
               for i, d in enumerate(docs) if i < 11]  # fmt: skip
    metrics = hooks.evaluate(records)
    assert metrics["n_parse_failed"] == 1 and metrics["n_images"] == 2 and metrics["n_images_incomplete"] == 2
    assert metrics["precision_ours"] is None


# ------------------------------------------------------------------------------------------------ read back
def _log_lines(scores: dict[str, list[float | None]], source: str) -> list[dict]:
    lines = []
    for image_id, values in scores.items():
        for emotion, score in zip(EMOTIONS, values, strict=True):
            doc = {"image_id": image_id, "emotion": emotion, "image_path": "x.png", "data_source": source}
            answer = "I cannot tell." if score is None else f"Score: {score:g}. Reason: colours."
            lines.append({"doc_id": len(lines), **hooks.process_results(doc, [answer])})
    return lines


def test_sample_values_score_each_image_alone() -> None:
    from emo_tasks.multiemo.registry import sample_values

    reference = {
        "clear": {"votes": [2, 0, 14, 6, 0, 3, 0, 0], "n_annotators": 20, "original_label": "awe"},
        "tie": {"votes": [9, 0, 1, 2, 0, 9, 0, 0], "n_annotators": 20, "original_label": "amusement"},
        "failed": {"votes": [0, 0, 0, 0, 0, 0, 20, 0], "n_annotators": 20, "original_label": "fear"},
    }
    asked = []
    lines = _log_lines(
        {
            "clear": [10, 10, 90, 10, 10, 10, 10, 10],  # P = {awe} = G
            "tie": [80, 0, 0, 0, 0, 80, 0, 0],  # P = {amusement, excitement} = G; original amusement: 1/2
            "failed": [None] + [50] * 7,  # incomplete: no value at all
        },
        "benchmark",
    )
    values = sample_values(lines, reference=lambda source: asked.append(source) or reference)
    assert asked == ["benchmark"]  # read once, for the source the records name
    assert values["precision_ours"] == {"clear": 100.0, "tie": 100.0}
    assert values["precision_original"] == {"clear": 100.0, "tie": 50.0}
    assert values["precision_single"]["clear"] == 100.0 and values["precision_single"]["tie"] == 50.0
    # clear: p = votes/20, q = scores/100 -> max |p - q| = |0.7 - 0.9| = |0.3 - 0.1| = 0.2
    assert values["cheb"]["clear"] == pytest.approx(0.2) and set(values["cheb"]) == {"clear", "tie"}


def test_read_samples_reads_the_votes_of_the_data_the_run_used(tmp_path: Path) -> None:
    from emo_tasks.multiemo.registry import BENCHMARK

    run = tmp_path / "run"
    run.mkdir()
    results = run / "20250101_000000_results.json"
    results.write_text("{}")
    scores = {image_id: [float(10 * j + i) for j in range(8)] for i, image_id in enumerate(_IMAGES)}
    (run / "20250101_000000_samples_multiemo_sample.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in _log_lines(scores, "sample"))
    )
    got = BENCHMARK.read_samples(run, results, "multiemo_sample", {})
    assert got.notes == [] and set(got.values) == {m.name for m in BENCHMARK.table.reported}
    # all annotators chose "none": no dominant emotion, so no precision_ours value (issue 14 #13)
    assert set(got.values["precision_ours"]) == set(_IMAGES) - {"all_none"}
    assert set(got.values["precision_original"]) == set(_IMAGES)
    # the same records for the benchmark task, with no benchmark data configured: a note, not an error
    (run / "20250101_000000_samples_multiemo.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in _log_lines(scores, "benchmark"))
    )
    (note,) = BENCHMARK.read_samples(run, results, "multiemo", {}).notes
    assert note.startswith("multiemo: could not read per-sample values from 20250101_000000_samples_multiemo.jsonl")
    assert "No MultiEmo-Bench data configured" in note and note.endswith("; no CIs")


def _run(tmp_path: Path, response: str) -> dict:
    env = env_without_secrets()
    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", EMO_CACHE_DIR=str(tmp_path / "cache"), EMO_PROGRESS="0")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={response}",
           "--tasks", "multiemo_sample", "--output_path", str(out), "--log_samples"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    files = sorted(out.rglob("*_results.json"))
    assert files, proc.stdout[-2000:] + proc.stderr[-4000:]
    # the judge stage's re-scoring of the sample log (emo-tasks judge) gives exactly the run's numbers
    assert_run_rescores_exactly(out, "multiemo_sample", hooks, "precision_ours", env)
    return json.loads(files[-1].read_text())["results"]["multiemo_sample"]


@pytest.mark.slow
def test_sample_with_constant_scores(tmp_path: Path) -> None:
    res = _run(tmp_path, "Score: 70. Reason: calm colours.")
    n = len(_IMAGES)
    # every image's 8 scores tie: P = all 8, so each image earns |argmax votes| / 8 on our labels; an image whose
    # annotators all chose "none" has no dominant emotion and is left out (issue 14 #13: no free credit)
    with_dominant = [votes for votes, _, _ in _IMAGES.values() if max(votes) > 0]
    assert len(with_dominant) == len(_IMAGES) - 1
    expected = sum(sum(v == max(votes) for v in votes) / 8 for votes in with_dominant)
    assert res["precision_ours,none"] == pytest.approx(100 * expected / len(with_dominant))
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
