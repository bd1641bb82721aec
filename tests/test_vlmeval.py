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
    assert host["sampling_off"] is True and "temperature" in host["notes"][0]


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


def test_a_run_asked_with_limit_is_scored_on_its_first_docs_and_says_so(tmp_path: Path) -> None:
    first = _predictions()[:6]  # VLMEvalKit's --limit 6 keeps the first six rows: pairs 0 and 1, three answers each
    metrics, lines, host = mvei_vlmeval.images.score(mvei_vlmeval.TASK, SAMPLE, first, limit=6)
    assert metrics["n_pairs"] == 2 and [ln["doc_id"] for ln in lines] == [0, 1] and host["limit"] == 2
    results = write_run(tmp_path / "run", "mvei_sample", metrics, lines, {}, "m", host, n_original=host["n_docs"])
    assert json.loads(results.read_text())["n-samples"]["mvei_sample"] == {"original": 16, "effective": 2}
    with pytest.raises(DataError, match="--limit 7 keeps the first 7 rows, which cuts doc 2's 3 answers"):
        mvei_vlmeval.images.score(mvei_vlmeval.TASK, SAMPLE, _predictions()[:7], limit=7)
    with pytest.raises(DataError, match="14 of 16 rows lack"):  # not asked --limit: a short file is refused
        mvei_vlmeval.score_predictions(SAMPLE, first)


def test_a_run_of_other_predictions_replaces_the_folders_old_one(tmp_path: Path) -> None:
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, _predictions())
    args = (tmp_path / "run", "mvei_sample", metrics, lines, {"dataset_name": "mvei/sample"}, "m", host)
    write_run(*args, when=1_700_000_000.0)
    (tmp_path / "run" / "judged" / "x").mkdir(parents=True)  # what `emo-tasks judge` made of the old answers
    newer = write_run(*args, when=1_700_000_100.0)  # VLMEvalKit ran again: a new prediction file
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == sorted(
        [newer.name, newer.name.replace("results.json", "samples_mvei_sample.jsonl")])  # fmt: skip
    assert report.load_run(tmp_path / "run").results_file == newer


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


MME_DATASETS = ("EmoVid_sample_ER_Lab", "EmoVid_sample_ML_ER", "EmoVid_sample_SA")


def _mme_model():  # noqa: ANN202 - built here: fakes is importable only once tests/ is on sys.path
    """The loopback model of `fakes.Model`, answering MME-Emotion questions with steps and a label of the row's
    candidates, both derived from the prompt (so answers, step counts and ratings vary across rows)."""
    import hashlib
    import re

    sys.path.insert(0, str(Path(__file__).parent))
    from fakes import Model

    from judges.testing import Reply, last_user_text

    class Answers(Model):
        def __call__(self, body: dict, attempt: int):  # noqa: ANN204
            text = last_user_text(body)
            found = re.search(r"Candidate \w+ labels: (.+?)\.\n", text)
            if body.get("model") != "eval-model" or not found:
                return super().__call__(body, attempt)
            h = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
            labels = [x.strip() for x in found.group(1).split(",")]
            steps = " ".join(f"Step {i + 1}: cue {(h >> i) % 9} noted." for i in range(h % 4))
            return Reply(text=f"{steps} Answer: {labels[h % len(labels)]}")

    return Answers()


def _vlmeval_mme(
    python: str, srv, work: Path, env: dict, *extra: str, data: tuple[str, ...] = MME_DATASETS
) -> subprocess.CompletedProcess:
    cmd = [python, "-m", "vlmeval", "--data", *data, "--model", "eval-model", "--base-url", srv.base_url,
           "--key", env["OPENAI_API_KEY"], "--work-dir", str(work), *extra]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work.parent, timeout=900)


@pytest.mark.slow
def test_python_m_vlmeval_runs_mme_emotion_with_the_numbers_of_lmms_eval(tmp_path: Path) -> None:
    """MME-Emotion through both hosts against one loopback model and judge: VLMEvalKit with a video model
    (`--video-llm`: the file and the medium "video", as lmms-eval's `--model openai` is asked) gives lmms-eval's
    numbers; with an image model (frames, "video frames") and VLMEvalKit's own judge flags, the run is judged by
    the judge named there; `report`, `compare` and `export` read the VLMEvalKit run."""
    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import env_without_secrets, with_mme_sample

    from emo_tasks.mme_emotion import scoring as mme_scoring
    from judges.testing import LoopbackServer

    python = _vlmeval_python()
    key = "sk-vlm-0000000000000000"
    cache = with_mme_sample(tmp_path / "cache")
    env = {**env_without_secrets(), "OPENAI_API_KEY": key, "PYTHONPATH": str(ROOT), "EMO_CACHE_DIR": str(cache),
           "EMO_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}  # fmt: skip
    tasks = [f"mme_emotion_sample_{d.split('_sample_')[1].lower()}" for d in MME_DATASETS]
    with LoopbackServer(responder=_mme_model(), expected_api_key=key) as srv:
        env["OPENAI_BASE_URL"] = srv.base_url  # the judge of both hosts (the paper's judge models by default)
        video = _vlmeval_mme(python, srv, tmp_path / "vlm", env, "--video-llm",
                             data=(*MME_DATASETS, "EmoVid_sample_all"))  # fmt: skip
        lmms = subprocess.run(
            [python, "-m", "lmms_eval", "--model", "openai", "--model_args",
             f"model_version=eval-model,base_url={srv.base_url}", "--tasks", "mme_emotion_sample", "--batch_size", "1",
             "--log_samples", "--output_path", str(tmp_path / "lmms")],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900,
        )  # fmt: skip
        model_calls = [c for c in srv.calls if c.model == "eval-model"]
        srv.reset_log()
        frames = _vlmeval_mme(python, srv, tmp_path / "vlm_frames", env, "--judge", "judge-x", "--judge-base-url",
                              srv.base_url, "--judge-key", key, "--judge-api-nproc", "8")  # fmt: skip
        frame_calls = [c for c in srv.calls if c.model == "eval-model"]
        judge_models = {c.model for c in srv.calls if c.model != "eval-model"}
        # `emo-tasks judge` judges the VLMEvalKit run again with another judge; `agreement` compares the two judges
        frames_dir = tmp_path / "vlm_frames" / "eval-model" / "emo_tasks" / MME_DATASETS[0]
        rejudge = subprocess.run([python, "-m", "emo_tasks", "judge", str(frames_dir), "--judge-model", "judge-b"],
                                 capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
        assert rejudge.returncode == 0, rejudge.stderr[-2000:]
    (theirs,) = glob.glob(str(tmp_path / "lmms" / "**" / "*_results.json"), recursive=True)
    want_all = json.loads(Path(theirs).read_text())["results"]
    names = [f"{m.name},none" for m in mme_scoring.TABLE]
    logs = video.stderr[-3000:] + lmms.stderr[-3000:]
    for dataset, task in zip(MME_DATASETS, tasks, strict=True):
        folder = tmp_path / "vlm" / "eval-model" / "emo_tasks" / dataset
        (ours,) = glob.glob(str(folder / "judged" / "*" / "*_results.json"))
        got = json.loads(Path(ours).read_text())["results"][task]
        assert {k: got[k] for k in names} == {k: want_all[task][k] for k in names}, logs
        assert got["n_scored,none"] == 2
    # the video model got the file; lmms-eval's openai model got frames: the prompt ("video") is the same
    # the group dataset (all eight tasks' rows) gives lmms-eval's group numbers: the official Overall
    group_dir = tmp_path / "vlm" / "eval-model" / "emo_tasks" / "EmoVid_sample_all"
    (ours,) = glob.glob(str(group_dir / "judged" / "*" / "*_results.json"))
    got = json.loads(Path(ours).read_text())["results"]["mme_emotion_sample"]
    assert {k: got[k] for k in names} == {k: want_all["mme_emotion_sample"][k] for k in names}, logs
    assert got["n_scored,none"] == 16
    assert len(model_calls) == 2 * len(MME_DATASETS) + 16 + 16 and {c.images for c in model_calls[:22]} == {0}
    status = json.loads((tmp_path / "vlm" / "eval-model" / "status.json").read_text())["datasets"]
    assert {status[d]["primary_metric"] for d in MME_DATASETS} == {"cot_s"}, status
    # the image model: frames (the judge's sampler), the medium "video frames", judged by VLMEvalKit's --judge
    assert len(frame_calls) == 2 * len(MME_DATASETS) and min(c.images for c in frame_calls) >= 2, frames.stderr[-3000:]
    assert judge_models == {"judge-x"}
    folder = frames_dir
    judged = next(p for p in glob.glob(str(folder / "judged" / "*" / "*_results.json")) if "judge-x" in p)
    data = json.loads(Path(judged).read_text())
    assert data["emo_tasks_judge"]["judge_models"] == {"judge_model": "judge-x", "step_model": "judge-x"}
    assert data["emo_tasks_vlmeval"]["medium"] == "video frames" and key not in Path(judged).read_text()
    lmms_dir = tmp_path / "lmms"  # the --output_path: the judge logs are there, beside the model's folder
    for args in (
        ["report", str(Path(judged).parent)],
        ["compare", str(lmms_dir), str(tmp_path / "vlm" / "eval-model" / "emo_tasks" / MME_DATASETS[1])],
        ["compare", str(lmms_dir), str(group_dir)],  # the group against lmms-eval's group
        ["export", str(tmp_path / "vlm" / "eval-model" / "emo_tasks" / MME_DATASETS[2]), "--format", "mme-official",
         "--out", str(tmp_path / "export")],
        ["agreement", *sorted(glob.glob(str(folder / "judged" / "*")))],
        ["view", *sorted(glob.glob(str(folder / "judged" / "*"))), "--out", str(tmp_path / "site")],
    ):  # fmt: skip
        done = subprocess.run([python, "-m", "emo_tasks", *args], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    assert (tmp_path / "site" / "index.html").is_file() and list((tmp_path / "export").rglob("*.json*"))


@pytest.mark.slow
def test_the_vlmevalkit_parts_registration_relies_on_are_still_there() -> None:
    """A canary for the pinned packaging (ms-vlmeval 0.0.20): what `emo_tasks.vlmeval.register()` and the dataset
    classes rely on, checked in VLMEvalKit itself, so an upgrade that moves one fails here by name."""
    python = _vlmeval_python()
    probe = r"""
import inspect, json
import vlmeval.dataset as ds, vlmeval.run as run
from vlmeval.dataset.video_base import VideoBaseDataset
from vlmeval.dataset.image_base import ImageBaseDataset
from vlmeval.dataset.video_dataset_config import supported_video_datasets
from vlmeval.smp.file import INFER_FAIL_MSG
import vlmeval.api.lmdeploy as lmdeploy, vlmeval.inference_video as inference_video
from emo_tasks.vlmeval.images import INFER_FAIL
checks = {
    "DATASET_CLASSES is a list build_dataset walks": isinstance(ds.DATASET_CLASSES, list)
        and "DATASET_CLASSES" in inspect.getsource(ds.build_dataset),
    "SUPPORTED_DATASETS is a list": isinstance(ds.SUPPORTED_DATASETS, list),
    "run.py uses the same build_dataset and supported_video_datasets": run.build_dataset is ds.build_dataset
        and run.supported_video_datasets is supported_video_datasets,
    "our names registered by the start-up hook": {"EmoMVEI_sample", "EmoMultiEmo_sample", "EmoVid_sample_ER_Lab"}
        <= set(ds.SUPPORTED_DATASETS) and "EmoVid_sample_IR" in supported_video_datasets,
    "build_dataset builds ours": type(ds.build_dataset("EmoVid_sample_ER_Lab")).__name__ == "EmoVid"
        and type(ds.build_dataset("EmoMVEI_sample")).__name__ == "EmoMVEI",
    "VideoBaseDataset asks prepare_dataset and build_prompt(.., video_llm=)":
        {"prepare_dataset", "build_prompt", "evaluate"} <= VideoBaseDataset.__abstractmethods__
        and "video_llm=getattr(model, 'VIDEO_LLM', False)" in inspect.getsource(inference_video),
    "ImageBaseDataset.load_data(dataset)": "dataset" in inspect.signature(ImageBaseDataset.load_data).parameters,
    "the failure marker": INFER_FAIL == INFER_FAIL_MSG,
    "the --base-url model's temperature": "'temperature': 0.0" in inspect.getsource(lmdeploy)
        and issubclass(run.LMDeployAPI, lmdeploy.LMDeployWrapper),
    "run.py's --max-tokens default": "default=2 ** 15" in inspect.getsource(run.parse_args),
    "judge_kwargs keys": all(k in inspect.getsource(run.get_judge_kwargs)
                             for k in ("'nproc'", "'retry'", "'timeout'", "'api_base'", "'key'", "'model'")),
    "status.json keeps argv": "argv=sys.argv" in inspect.getsource(run),
    "build_dataset hands our classes the run's arguments": "dataset_kwargs = vars(args)" in inspect.getsource(run)
        and ds.build_dataset("EmoMVEI_sample", work_dir="w", limit=6, data=["x"]).run_args["limit"] == 6
        and ds.build_dataset("EmoVid_sample_ER_Lab", work_dir="w", limit=6, data=["x"]).run_args["limit"] == 6,
}
print(json.dumps({k: bool(v) for k, v in checks.items()}))
"""
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    checks = json.loads(done.stdout.strip().splitlines()[-1])
    assert [k for k, ok in checks.items() if not ok] == [] and len(checks) == 13


_EVALSCOPE_RUN = r"""
import glob, json, os, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
from fakes import Model
from judges.testing import LoopbackServer
from evalscope import TaskConfig, run_task

key, work, limit = os.environ["OPENAI_API_KEY"], sys.argv[2], json.loads(sys.argv[3])
with LoopbackServer(responder=Model(), expected_api_key=key) as srv:
    os.environ["OPENAI_BASE_URL"] = srv.base_url  # MME-Emotion's judge
    model = {"name": "CustomAPIModel", "type": "eval-model", "api_base": f"{srv.base_url}/chat/completions",
             "key": key, "temperature": 0.0, "img_size": -1, "max_tokens": 1024}
    config = {"data": sys.argv[4:], "model": [model], "mode": "all", "reuse": False, "nproc": 4, **limit}
    run_task(task_cfg=TaskConfig(eval_backend="VLMEvalKit", eval_config=config, work_dir=work))
"""


def _evalscope_python() -> str:
    python = _vlmeval_python()
    probe = subprocess.run([python, "-c", "import evalscope"], capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        pytest.skip(f'EvalScope is not installed for {python}: `pip install -e ".[vlmeval,evalscope]"`')
    return python


@pytest.mark.slow
def test_evalscope_runs_our_datasets_through_its_vlmevalkit_backend(tmp_path: Path) -> None:
    """EvalScope's documented Python API (`run_task(TaskConfig(eval_backend="VLMEvalKit", ...))`, its own model
    class) on MVEI and MME-Emotion: the run folders are written; the answers EvalScope collected, scored by our
    lmms-eval path, give its numbers; its `limit` reaches our datasets (they read the run's arguments)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import env_without_secrets, with_mme_sample

    python = _evalscope_python()
    key = "sk-vlm-0000000000000000"
    env = {
        **env_without_secrets(),
        "OPENAI_API_KEY": key,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "EMO_CACHE_DIR": str(with_mme_sample(tmp_path / "cache")),
        "EMO_PROGRESS": "0",
    }
    for work, limit, data in ((tmp_path / "es", {}, [SAMPLE, "EmoVid_sample_ER_Lab"]),
                              (tmp_path / "es_limit", {"limit": 6}, [SAMPLE])):  # fmt: skip
        done = subprocess.run([python, "-c", _EVALSCOPE_RUN, str(ROOT), str(work), json.dumps(limit), *data],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    import pandas as pd

    (ours,) = glob.glob(str(tmp_path / "es" / "*" / "eval-model" / "emo_tasks" / SAMPLE / "*_results.json"))
    (xlsx,) = glob.glob(str(tmp_path / "es" / "*" / "eval-model" / f"eval-model_{SAMPLE}.xlsx"))
    metrics, _, _ = mvei_vlmeval.score_predictions(SAMPLE, pd.read_excel(xlsx).to_dict("records"))
    got = json.loads(Path(ours).read_text())["results"]["mvei_sample"]
    assert {f"{k},none": v for k, v in metrics.items()} == {k: v for k, v in got.items() if k != "alias"}
    (judged,) = glob.glob(str(tmp_path / "es" / "*" / "eval-model" / "emo_tasks" / "EmoVid_sample_ER_Lab" / "judged"
                              / "*" / "*_results.json"))  # fmt: skip
    assert json.loads(Path(judged).read_text())["results"]["mme_emotion_sample_er_lab"]["n_scored,none"] == 2
    (limited,) = glob.glob(str(tmp_path / "es_limit" / "*" / "eval-model" / "emo_tasks" / SAMPLE / "*_results.json"))
    data = json.loads(Path(limited).read_text())
    assert data["n-samples"]["mvei_sample"] == {"original": 16, "effective": 2}
    assert data["emo_tasks_vlmeval"]["limit"] == 2 and key not in Path(limited).read_text()


def test_a_gate_subset_keeps_its_rows_and_is_recorded_for_the_judge_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EMO_SUBSET under VLMEvalKit: the dataset's rows are the subset's, its run folder records the subset as an
    lmms-eval run does, and the judge stage (run without EMO_SUBSET) re-applies it and scores every kept pair."""
    from emo_tasks import subset
    from emo_tasks.stage import judge_run
    from emo_tasks.vlmeval.runfolder import prompt_config

    keep = ["sample-03", "sample-10", "sample-12"]
    sub = tmp_path / "subset.json"
    sub.write_text(json.dumps({"emo_tasks_subset": 1, "name": "g", "rows": {"mvei/sample": keep}}))
    monkeypatch.setenv("EMO_SUBSET", str(sub))
    rows = mvei_vlmeval.prediction_rows(SAMPLE)
    assert sorted({r["target"] for r in rows}) == sorted(hooks.doc_to_target(d) for d in hooks.load_task(
        "mvei/sample", environ()))  # fmt: skip
    assert len(rows) == 3 * len(keep)
    preds = [{**row, "prediction": "Correct"} for row in rows]
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, preds)
    config = {"dataset_name": "mvei/sample", **prompt_config("mvei_sample")}
    assert subset.recorded(config)["keys"] == keep
    write_run(tmp_path / "run", "mvei_sample", metrics, lines, config, "m", host, n_original=host["n_docs"])
    monkeypatch.delenv("EMO_SUBSET")
    assert judge_run(tmp_path / "run", env={**environ(), "EMO_JUDGE": "offline"}, out=tmp_path / "judged") == 0
    judged = report.load_run(tmp_path / "judged")
    assert judged.results["mvei_sample"]["n_pairs,none"] == len(keep) and judged.subset("mvei_sample")["n"] == 3
