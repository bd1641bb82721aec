"""The benchmarks in VLMEvalKit (issue 22): MVEI's dataset rows, its scoring of VLMEvalKit's predictions (the same
numbers as the lmms-eval task for the same answers), the refusals, the lmms-eval-shaped run folder every tool
reads; and, where VLMEvalKit is installed (`pip install -e ".[vlmeval]"`, or a Python that has it named by
EMO_VLMEVAL_PYTHON), the real `python -m vlmeval` against a loopback model, beside the real lmms-eval."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emo_tasks import report
from emo_tasks.benchmarks import all_benchmarks, load_object
from emo_tasks.common import DataError
from emo_tasks.mvei import hooks, scoring
from emo_tasks.mvei import vlmeval as mvei_vlmeval
from emo_tasks.settings import environ
from emo_tasks.vlmeval.runfolder import write_run

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = "EmoMVEI_sample"
ANSWERS = ["Correct", "Incorrect.", "I cannot tell", "It is correct", "Incorrect"]


def _predictions(answer=lambda doc_id, k: ANSWERS[(doc_id * 7 + k * 3) % len(ANSWERS)]) -> list[dict]:
    return [{**row, "prediction": answer(row["doc_id"], row["repeat"])} for row in mvei_vlmeval.prediction_rows(SAMPLE)]


def test_each_pair_is_three_rows_with_the_lmms_eval_prompt_and_target() -> None:
    docs = hooks.load_task("mvei/sample", environ())
    rows = mvei_vlmeval.prediction_rows(SAMPLE)
    assert len(rows) == 3 * len(docs) and [r["index"] for r in rows] == list(range(len(rows)))
    for row in rows:
        doc = docs[row["doc_id"]]
        assert row["index"] == 3 * row["doc_id"] + row["repeat"]
        assert row["question"] == hooks.doc_to_text(doc) and row["target"] == hooks.doc_to_target(doc)
        assert row["image_path"] == doc["image_path"] and Path(row["image_path"]).is_file()


def test_scores_equal_the_lmms_eval_tasks_for_the_same_answers() -> None:
    preds = _predictions()
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, preds)
    docs = hooks.load_task("mvei/sample", environ())
    records = [
        hooks.process_results(doc, [[p["prediction"] for p in preds if p["doc_id"] == i]])["acc_total"]
        for i, doc in enumerate(docs)
    ]
    assert metrics == scoring.task_metrics([hooks.pair_result(r) for r in records])  # lmms-eval's own path
    assert [line["acc_total"] for line in lines] == records and host["n_infer_failed"] == 0
    # hand-checked: pair 0's answers are ANSWERS[0], [3], [1] -> Correct, Correct, Incorrect -> majority correct
    assert lines[0]["filtered_resps"] == ["Correct", "It is correct", "Incorrect."]
    assert lines[0]["acc_total"]["final"] == "correct"
    assert host["sampling_off"] is False


def test_multiemo_scores_equal_the_lmms_eval_tasks_for_the_same_answers() -> None:
    from emo_tasks.multiemo import hooks as me_hooks
    from emo_tasks.multiemo import vlmeval as me_vlmeval
    from emo_tasks.vlmeval import images

    rows = images.prediction_rows(me_vlmeval.TASK, "EmoMultiEmo_sample")
    docs = me_hooks.load_task("multiemo/sample", environ())
    assert len(rows) == len(docs) and all(r["question"] == me_hooks.doc_to_text(docs[r["index"]]) for r in rows)
    answers = [f"Score: {(i * 37) % 101}. Reason: colours." if i % 11 else "no number" for i in range(len(rows))]
    preds = [{**r, "prediction": a} for r, a in zip(rows, answers, strict=True)]
    metrics, lines, host = images.score(me_vlmeval.TASK, "EmoMultiEmo_sample", preds)
    records = [me_hooks.process_results(doc, [a])["precision_ours"] for doc, a in zip(docs, answers, strict=True)]
    assert metrics == me_hooks.evaluate(records)  # lmms-eval's own aggregation over the same records
    assert metrics["n_parse_failed"] > 0 and host["n_infer_failed"] == 0 and len(lines) == len(docs)


def test_three_identical_answers_everywhere_say_sampling_was_off() -> None:
    _, _, host = mvei_vlmeval.score_predictions(SAMPLE, _predictions(lambda doc_id, k: ANSWERS[doc_id % 2]))
    assert host["sampling_off"] is True and "temperature" in host["note"]


def test_an_empty_answer_read_back_from_xlsx_is_empty_not_nan() -> None:
    preds = _predictions()
    preds[0]["prediction"], preds[1]["prediction"] = float("nan"), None  # pandas' empty xlsx cell; a missing one
    _, lines, _ = mvei_vlmeval.score_predictions(SAMPLE, preds)
    assert lines[0]["filtered_resps"][:2] == ["", ""] and lines[0]["acc_total"]["decisions"][:2] == ["give_up"] * 2


def test_the_prompt_settings_are_the_task_yamls() -> None:
    from emo_tasks.vlmeval.runfolder import prompt_config

    conf = prompt_config("mvei_sample")
    assert conf == {
        "description": "",
        "num_fewshot": 0,
        "doc_to_text": "<function doc_to_text>",
        "lmms_eval_specific_kwargs": {"default": {}},
        "metadata": {"version": 0.1, "benchmark": "MVEI"},
    }
    with pytest.raises(ValueError, match="no task YAML for nothing"):
        prompt_config("nothing")


def test_a_failed_answer_is_counted_and_its_pair_left_out() -> None:
    preds = _predictions()
    preds[4]["prediction"] = "Failed to obtain answer via API."
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, preds)
    assert host["n_infer_failed"] == 1 and metrics["n_pairs"] == 15 and 1 not in [ln["doc_id"] for ln in lines]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.append(dict(p[0])), "index 0 appears twice"),
        (lambda p: p.pop(5), "1 of 16 rows lack some of their 3 answer(s) (first: index 3)"),
        (lambda p: p[7].update(target="correct #000000000000"), "row 8 (index 7): its target"),
        (lambda p: p[0].update(index=999), "index 999 is no row"),
    ],
)
def test_rows_that_are_not_the_runs_are_refused(change, message: str) -> None:
    preds = _predictions()
    change(preds)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        mvei_vlmeval.score_predictions(SAMPLE, preds)


def test_the_report_says_what_the_vlmeval_run_flagged(tmp_path: Path) -> None:
    preds = _predictions(lambda doc_id, k: ANSWERS[doc_id % 2])
    preds[0]["prediction"] = "Failed to obtain answer via API."
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, preds)
    write_run(tmp_path / "run", "mvei_sample", metrics, lines, {"dataset_name": "mvei/sample"}, "m", host)
    notes = report.run_notes(report.load_run(tmp_path / "run"))
    assert "mvei_sample: 1 answers VLMEvalKit could not get (left out)" in notes
    assert any(n.startswith("mvei_sample: the three answers of every pair are identical") for n in notes)


def test_the_run_folder_is_read_by_the_report_with_the_same_numbers(tmp_path: Path) -> None:
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, _predictions())
    results = write_run(tmp_path / "run", "mvei_sample", metrics, lines, {"dataset_name": "mvei/sample"}, "m", host)
    run = report.load_run(tmp_path / "run")
    assert run.results_file == results and not [n for n in report.run_notes(run) if "per-sample" in n]
    acc = run.samples["mvei_sample"]["acc_total"]
    assert sum(acc.values()) / len(acc) == metrics["acc_total"] == run.results["mvei_sample"]["acc_total,none"]
    assert json.loads(results.read_text())["emo_tasks_vlmeval"]["sampling_off"] is False


def test_evaluating_the_same_predictions_again_rewrites_the_same_run(tmp_path: Path) -> None:
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, _predictions())
    args = (tmp_path / "run", "mvei_sample", metrics, lines, {"dataset_name": "mvei/sample"}, "m", host)
    first = write_run(*args, when=1_700_000_000.0)
    assert write_run(*args, when=1_700_000_000.0) == first
    assert len(list((tmp_path / "run").glob("*_results.json"))) == 1  # `report` needs no --run
    assert report.load_run(tmp_path / "run").results_file == first


def test_every_registered_vlmeval_dataset_names_a_function() -> None:
    specs = [s for b in all_benchmarks() for s in b.vlmeval_datasets]
    assert {"emo_tasks.mvei.vlmeval:dataset_class", "emo_tasks.multiemo.vlmeval:dataset_class"} <= set(specs)
    assert all(callable(load_object(s)) for s in specs)  # the function; calling it imports vlmeval


# ------------------------------------------------------------------------------------- with VLMEvalKit installed
def _vlmeval_python() -> str:
    python = os.environ.get("EMO_VLMEVAL_PYTHON") or sys.executable
    probe = subprocess.run([python, "-c", "import vlmeval"], capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        pytest.skip(
            f'VLMEvalKit is not installed for {python}: `pip install -e ".[vlmeval]"` (~7 GB), or name a Python '
            "that has it with EMO_VLMEVAL_PYTHON"
        )
    return python


@pytest.mark.slow
def test_python_m_vlmeval_runs_mvei_with_the_numbers_of_lmms_eval(tmp_path: Path) -> None:
    """The user's commands, unchanged: `python -m vlmeval --data EmoMVEI_sample --base-url ...` (our dataset found
    through the start-up hook) and `lmms-eval --tasks mvei_sample` against the same loopback model give the same
    metrics, and `emo-tasks report` reads the VLMEvalKit run."""
    sys.path.insert(0, str(Path(__file__).parent))
    from fakes import Model

    from judges.testing import LoopbackServer

    python = _vlmeval_python()
    key = "sk-vlm-0000000000000000"
    env = {**os.environ, "OPENAI_API_KEY": key, "PYTHONPATH": str(ROOT)}
    with LoopbackServer(responder=Model(), expected_api_key=key) as srv:
        vlm = subprocess.run(
            [python, "-m", "vlmeval", "--data", SAMPLE, "EmoMultiEmo_sample", "--model", "eval-model",
             "--base-url", srv.base_url,
             "--key", key, "--work-dir", str(tmp_path / "vlm")],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900,
        )  # fmt: skip
        lmms = subprocess.run(
            [python, "-m", "lmms_eval", "--model", "openai", "--model_args",
             f"model_version=eval-model,base_url={srv.base_url}", "--tasks", "mvei_sample,multiemo_sample",
             "--batch_size", "1",
             "--log_samples", "--output_path", str(tmp_path / "lmms")],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900,
        )  # fmt: skip
    from emo_tasks.multiemo import scoring as me_scoring

    (theirs,) = glob.glob(str(tmp_path / "lmms" / "**" / "*_results.json"), recursive=True)
    want_all = json.loads(Path(theirs).read_text())["results"]
    for dataset, task, table in (("EmoMultiEmo_sample", "multiemo_sample", me_scoring.TABLE),
                                 (SAMPLE, "mvei_sample", scoring.TABLE)):  # fmt: skip
        (ours,) = glob.glob(str(tmp_path / "vlm" / "eval-model" / "emo_tasks" / dataset / "*_results.json"))
        got, want = json.loads(Path(ours).read_text())["results"][task], want_all[task]
        names = [f"{m.name},none" for m in table]
        assert {k: got[k] for k in names} == {k: want[k] for k in names}, vlm.stderr[-2000:] + lmms.stderr[-2000:]
    assert "EmoMVEI_sample" in vlm.stdout + vlm.stderr and key not in Path(ours).read_text()
    status = json.loads((tmp_path / "vlm" / "eval-model" / "status.json").read_text())["datasets"]
    assert {d: status[d]["primary_metric"] for d in (SAMPLE, "EmoMultiEmo_sample")} == {
        SAMPLE: "acc_total", "EmoMultiEmo_sample": "precision_ours"}  # fmt: skip
    shown = subprocess.run([python, "-m", "emo_tasks", "report", str(Path(ours).parent), "--format", "json"],
                           capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert f"{got['acc_total,none']}" in shown.stdout
    gate = subprocess.run([python, "-m", "emo_tasks", "compare", str(Path(theirs).parent), str(Path(ours).parent)],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert gate.returncode == 0 and "mvei_sample" in gate.stdout, gate.stdout + gate.stderr  # across the hosts
    for args in (
        ["view", str(Path(ours).parent), "--out", str(tmp_path / "site")],
        ["export", str(Path(ours).parent), "--format", "mvei-official", "--out", str(tmp_path / "export")],
    ):
        done = subprocess.run([python, "-m", "emo_tasks", *args], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "export" / "Std_MVEI_results.json").is_file()
