"""MVEI through its loader, its hooks and the real lmms-eval CLI (`--model dummy` and `--model openai` against a
loopback server that answers differently on each of the three queries)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import API_KEY, env_without_secrets
from PIL import Image
from test_mvei_in_judge_stage import assert_run_rescores_exactly

from emo_tasks.common import DataError
from emo_tasks.mvei import hooks
from emo_tasks.mvei.data import data_file, load_docs
from emo_tasks.mvei.sample import sample_pairs
from emo_tasks.mvei.settings import MVEISettings
from emo_tasks.settings import SettingsError, environ
from judges.testing import LoopbackServer, Reply, count_media, last_user_text

PAIRS = sample_pairs()
N_CORRECT = sum(1 for _, _, label in PAIRS if label == "correct")


def _image(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (200, 10, 10)).save(path)
    return path.name


# ------------------------------------------------------------------------------------------------- data formats
def test_standard_and_plain_formats_load_the_same_pairs(tmp_path: Path) -> None:
    std = tmp_path / "std" / "mvei.json"
    _image(std.parent / "a.png")
    std.write_text(json.dumps({
        "7": {"image_path": "a.png", "prompt": "It evokes joy.", "ground_truth": "Correct",
              "other_info": {"statement_meta": {"class": "Scene Context"}}},
    }))  # fmt: skip
    plain = tmp_path / "plain" / "mvei.jsonl"
    _image(plain.parent / "a.png")
    plain.write_text(
        json.dumps({"image": "a.png", "statement": "It evokes joy.", "label": "correct", "dimension": "scene context"})
        + "\n"
    )
    a, b = load_docs(std)[0], load_docs(plain)[0]
    for key in ("statement", "label", "dimension"):
        assert a[key] == b[key]
    assert a["label"] == "correct" and a["dimension"] == "scene context" and a["pair_id"] == "7"
    assert Path(a["image_path"]).is_file()


@pytest.mark.parametrize(
    "row, message",
    [
        ({"image": "a.png", "statement": "s", "label": "maybe", "dimension": "scene context"}, "label must be"),
        ({"image": "a.png", "statement": "s", "label": "correct", "dimension": "colour"}, "unknown dimension"),
        ({"image": "missing.png", "statement": "s", "label": "correct", "dimension": "scene context"}, "missing"),
        ({"image": "a.png", "statement": "", "label": "correct", "dimension": "scene context"}, "missing statement"),
        ({"picture": "a.png"}, "not an MVEI row"),
    ],
)
def test_malformed_rows_are_named(tmp_path: Path, row: dict, message: str) -> None:
    path = tmp_path / "mvei.jsonl"
    _image(tmp_path / "a.png")
    good = {"image": "a.png", "statement": "fine", "label": "incorrect", "dimension": "sentiment polarity"}
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError, match=message) as err:
        load_docs(path)
    assert str(path) in str(err.value) and ("line 2" in str(err.value) or "missing.png" in str(err.value))


def test_data_file_errors_say_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="EMO_DATA_ROOT"):
        MVEISettings.from_env({"EMO_DATA_ROOT": str(tmp_path)})
    (tmp_path / "mvei").mkdir()
    (tmp_path / "mvei" / "mvei.json").write_text("{}")
    (tmp_path / "mvei" / "mvei.jsonl").write_text("")
    with pytest.raises(SettingsError, match="both"):
        MVEISettings.from_env({"EMO_DATA_ROOT": str(tmp_path)})
    with pytest.raises(SettingsError, match="EMO_MVEI_FILE"):
        MVEISettings.from_env({"EMO_MVEI_FILE": str(tmp_path / "nope.json")})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        load_docs(bad)


# ------------------------------------------------------------------------------------------------- settings
@pytest.mark.parametrize(
    "env, variable, value, accepted",
    [
        ({"EMO_MVEI_FILE": "/no/such/mvei.json"}, "EMO_MVEI_FILE", "/no/such/mvei.json", "mvei.json or mvei.jsonl"),
        ({"EMO_DATA_ROOT": "/no/such/root"}, "EMO_DATA_ROOT", "/no/such/root", "mvei/mvei.json or mvei/mvei.jsonl"),
        ({"EMO_MVEI_HUB_ID": "not a repo"}, "EMO_MVEI_HUB_ID", "not a repo", "owner/name"),
        ({"EMO_PROGRESS": "maybe"}, "EMO_PROGRESS", "maybe", "1, true"),
    ],
)
def test_bad_settings_name_the_variable_value_and_accepted(env: dict, variable: str, value: str, accepted: str) -> None:
    with pytest.raises(SettingsError) as err:
        MVEISettings.from_env(env)
    message = str(err.value)
    assert f"{variable}=" in message and repr(value) in message and accepted in message


def test_settings_resolve_the_data_once_and_are_hashable(tmp_path: Path) -> None:
    (tmp_path / "root" / "mvei").mkdir(parents=True)
    in_root = tmp_path / "root" / "mvei" / "mvei.jsonl"
    in_root.write_text("")
    named = tmp_path / "named.json"
    named.write_text("{}")
    cache = {"EMO_CACHE_DIR": str(tmp_path / "cache")}
    by_file = MVEISettings.from_env({**cache, "EMO_MVEI_FILE": str(named), "EMO_DATA_ROOT": str(tmp_path / "root")})
    by_root = MVEISettings.from_env({**cache, "EMO_DATA_ROOT": str(tmp_path / "root")})
    hub = MVEISettings.from_env({**cache, "EMO_MVEI_HUB_ID": "me/my-mvei"})
    assert (by_file.data.file, by_root.data.file, hub.data.file) == (named, in_root, None)
    assert (by_file.data.hub_id, hub.data.hub_id) == ("wudq/MVEI", "me/my-mvei")
    assert data_file(by_file) == named and data_file(by_root) == in_root
    assert hash(by_root) == hash(MVEISettings.from_env({**cache, "EMO_DATA_ROOT": str(tmp_path / "root")}))
    # the sample reads none of the data variables, so a bad one cannot stop it
    sample = MVEISettings.from_env({**cache, "EMO_MVEI_FILE": "/no/such/file"}, "sample")
    assert (sample.data.file, sample.data.hub_id, sample.common.cache_dir) == (None, None, tmp_path / "cache")
    path = data_file(sample)
    assert path == tmp_path / "cache" / "samples" / "mvei-v1" / "mvei.json" and len(load_docs(path)) == len(PAIRS)


def test_process_docs_reads_the_settings_before_anything_else(tmp_path: Path, monkeypatch) -> None:
    import datasets

    def placeholder(source: str) -> datasets.Dataset:
        return datasets.Dataset.from_list([{"emo_source": f"mvei/{source}"}])

    monkeypatch.setenv("EMO_MVEI_FILE", str(tmp_path / "typo.json"))
    with pytest.raises(SettingsError, match="EMO_MVEI_FILE="):
        hooks.process_docs(placeholder("benchmark"))
    monkeypatch.setenv("EMO_CACHE_DIR", str(tmp_path / "cache"))
    docs = hooks.process_docs(placeholder("sample"))
    assert len(docs) == len(PAIRS) and {d["data_source"] for d in docs} == {"sample"}
    assert all(d["image_path"].startswith(str(tmp_path / "cache")) for d in docs)
    assert hooks.STATE.sources.get("sample") == MVEISettings.from_env(environ(), "sample")  # kept for the aggregation
    with pytest.raises(DataError, match="mvei/benchmark or mvei/sample"):
        hooks.process_docs(placeholder("other"))


# ------------------------------------------------------------------------------------------------- read back
def _pair_record(pair_id: str, dimension: str, label: str, decisions: list[str]) -> dict:
    answers = [d.capitalize() for d in decisions]
    return hooks.process_results(
        {"pair_id": pair_id, "dimension": dimension, "label": label, "data_source": "sample"}, [answers]
    )


def test_read_samples_from_a_hand_written_run(tmp_path: Path) -> None:
    from emo_tasks.mvei.registry import BENCHMARK

    run = tmp_path / "run"
    folder = run / "model__x"
    folder.mkdir(parents=True)
    results = folder / "20250101_000000_results.json"
    results.write_text("{}")
    lines = [
        {"doc_id": 0, **_pair_record("p1", "scene context", "correct", ["correct", "correct", "incorrect"])},
        {"doc_id": 1, **_pair_record("p2", "sentiment polarity", "incorrect", ["correct", "unsure", "unsure"])},
        {"doc_id": 2, **_pair_record("p3", "scene context", "incorrect", ["correct", "correct", "correct"])},
    ]
    log = folder / "20250101_000000_samples_mvei_sample.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    got = BENCHMARK.read_samples(run, results, "mvei_sample", {})
    assert got.notes == [] and got.summary is None
    assert got.values == {
        "acc_total": {"p1": 100.0, "p2": 0.0, "p3": 0.0},
        "acc_sentiment_polarity": {"p2": 0.0},
        "acc_scene_context": {"p1": 100.0, "p3": 0.0},
        "positive_ratio": {"p1": 100.0, "p2": 0.0, "p3": 100.0},
        "give_up_ratio": {"p1": 0.0, "p2": 100.0, "p3": 0.0},
    }
    assert BENCHMARK.owns("mvei") and BENCHMARK.owns("mvei_sample") and BENCHMARK.table.benchmark == "mvei"

    missing = BENCHMARK.read_samples(run, results, "mvei", {})
    assert missing.values == {} and missing.notes == [
        "mvei: no per-sample log (*_samples_mvei.jsonl), so no confidence intervals; rerun lmms-eval with "
        "--log_samples --output_path DIR to get them"
    ]
    broken_line = len(log.read_text().splitlines()) + 1
    log.write_text(log.read_text() + "{oops\n")
    (note,) = BENCHMARK.read_samples(run, results, "mvei_sample", {}).notes
    assert note.startswith(f"mvei_sample: could not read per-sample values from {log.name} (DataError(")
    assert f"line {broken_line}: not a JSON object" in note  # the real line, not "line 1 column N"
    assert note.endswith("); no CIs")


def test_hooks_prompt_visual_and_three_answers(tmp_path: Path) -> None:
    doc = {"pair_id": "1", "image_path": str(tmp_path / _image(tmp_path / "x.png")), "statement": "It evokes joy.",
           "label": "incorrect", "dimension": "scene context"}  # fmt: skip
    text = hooks.doc_to_text(doc)
    assert text.startswith("Based on the provided image and emotional statement") and text.endswith("It evokes joy.")
    assert hooks.doc_to_text(doc, {"prompt": "{statement}?", "post_prompt": " A/B"}) == "It evokes joy.? A/B"
    (img,) = hooks.doc_to_visual(doc)
    assert img.mode == "RGB" and img.size == (8, 8)
    rec = hooks.process_results(doc, [["Incorrect", "Correct.", "<answer>incorrect</answer>"]])["acc_total"]
    assert rec["decisions"] == ["incorrect", "correct", "incorrect"] and rec["final"] == "incorrect" and rec["right"]
    corrupt = tmp_path / "c.png"
    corrupt.write_bytes(b"not an image")
    with pytest.raises(DataError, match=str(corrupt)):
        hooks.doc_to_visual({**doc, "image_path": str(corrupt)})


# ------------------------------------------------------------------------------------------------- CLI runs
def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = env_without_secrets()
    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", EMO_CACHE_DIR=str(tmp_path / "cache"), EMO_PROGRESS="0")
    env.update(extra)
    return env


def _run(tmp_path: Path, out: Path, model_args: list[str], env: dict[str, str]) -> tuple[dict, str]:
    cmd = [sys.executable, "-m", "lmms_eval", *model_args, "--tasks", "mvei_sample", "--output_path", str(out),
           "--log_samples"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    files = sorted(out.rglob("*_results.json"))
    assert files, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(files[-1].read_text())["results"]["mvei_sample"], proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("response", ["Correct", "Incorrect", "Unsure"])
def test_dummy_responses_give_the_expected_bias_metrics(tmp_path: Path, response: str) -> None:
    res, out = _run(tmp_path, tmp_path / "out", ["--model", "dummy", "--model_args", f"response={response}"],
                    _env(tmp_path))  # fmt: skip
    n = len(PAIRS)
    assert res["n_pairs,none"] == n
    if response == "Correct":
        assert res["positive_ratio,none"] == 100.0 and res["give_up_ratio,none"] == 0.0
        assert res["acc_total,none"] == pytest.approx(100 * N_CORRECT / n)
    elif response == "Incorrect":
        assert res["positive_ratio,none"] == 0.0 and res["give_up_ratio,none"] == 0.0
        assert res["acc_total,none"] == pytest.approx(100 * (n - N_CORRECT) / n)
    else:
        assert res["give_up_ratio,none"] == 100.0 and res["acc_total,none"] == 0.0
    for dim in ("sentiment_polarity", "emotion_interpretation", "scene_context", "perception_subjectivity"):
        assert res[f"acc_{dim},none"] is not None
    assert res["self_consistency,none"] == 100.0  # dummy answers the same thing three times
    logged = [json.loads(line) for p in (tmp_path / "out").rglob("*_samples_mvei_sample.jsonl")
              for line in p.read_text().splitlines()]  # fmt: skip
    assert len(logged) == n and all(len(s["acc_total"]["answers"]) == 3 for s in logged)


@pytest.mark.slow
def test_openai_model_three_different_answers_majority_decides(tmp_path: Path) -> None:
    """The loopback model answers each repeat of a pair differently; the majority of the three decides."""
    patterns = {0: ["Correct", "Incorrect", "Correct"], 1: ["Incorrect", "Correct.", "<answer>Incorrect</answer>"]}
    seen: dict[str, list[str]] = {}
    images: list[int] = []

    def responder(body: dict, attempt: int) -> Reply:
        text = last_user_text(body)
        statement = text.rsplit("Statement: ", 1)[1]
        images.append(count_media(body)[0])
        answer = patterns[len(statement) % 2][(attempt - 1) % 3]
        seen.setdefault(statement, []).append(answer)
        return Reply(text=answer)

    with LoopbackServer(responder=responder, expected_api_key=API_KEY) as srv:
        args = ["--model", "openai", "--model_args",
                f"model_version=mvei-model,base_url={srv.base_url},api_key={API_KEY},num_concurrent=1"]  # fmt: skip
        res, out = _run(tmp_path, tmp_path / "out", args, _env(tmp_path))
    assert len(seen) == len({s for _, s, _ in PAIRS}) and all(len(v) % 3 == 0 for v in seen.values()), out[-3000:]
    assert set(images) == {1}  # every query carried its image
    expected_right = 0
    for _, statement, label in PAIRS:
        majority = "correct" if len(statement) % 2 == 0 else "incorrect"
        expected_right += majority == label
    assert res["acc_total,none"] == pytest.approx(100 * expected_right / len(PAIRS))
    assert res["self_consistency,none"] == 0.0  # no pair got three equal decisions
    n_even = sum(1 for _, s, _ in PAIRS if len(s) % 2 == 0)
    assert res["positive_ratio,none"] == pytest.approx(100 * n_even / len(PAIRS))
    assert 0.0 < res["positive_ratio,none"] < 100.0
    # the judge stage's re-scoring of the sample log (emo-tasks judge) gives exactly these numbers
    assert_run_rescores_exactly(tmp_path / "out", "mvei_sample", hooks, "acc_total", _env(tmp_path))


@pytest.mark.slow
def test_emo_judge_batch_stops_the_run_before_inference(tmp_path: Path) -> None:
    """EMO_JUDGE=batch (issue 35): the in-process judge does not batch, so the task refuses when it loads, on one
    line naming the two-stage flow; nothing is answered, nothing written (tests/judging/test_batch_judge_mode.py
    checks every task's loader in process)."""
    from emo_tasks.settings import BATCH_JUDGE_MESSAGE

    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", "response=Correct", "--tasks",
           "mvei_sample", "--output_path", str(out), "--log_samples"]  # fmt: skip
    proc = subprocess.run(cmd, env=_env(tmp_path, EMO_JUDGE="batch"), capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)  # fmt: skip
    text = proc.stdout + proc.stderr
    first = next((line for line in proc.stderr.splitlines() if "EMO_JUDGE=batch" in line), None)
    assert first == f"emo-tasks: mvei/sample: SettingsError: {BATCH_JUDGE_MESSAGE}", text[-3000:]
    assert "Running generate_until requests" not in text  # failed before inference
    assert not list(out.rglob("*_results.json")) and not list(out.rglob("*_samples_*.jsonl")), text[-3000:]
    assert not (tmp_path / "cache" / "samples").exists()  # the sample was never even generated
