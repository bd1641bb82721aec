"""MME-Emotion in VLMEvalKit (issue 22), without VLMEvalKit: the dataset names, the rows, the frames an image model
is given, and `evaluate`'s path (prediction rows proven to be the run's -> a predict-only run folder -> the judge
stage) against the loopback judge, compared with lmms-eval's own in-process aggregation of the same answers."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import API_KEY, with_mme_sample

from emo_tasks.common import DataError
from emo_tasks.judging import stage
from emo_tasks.mme_emotion import hooks
from emo_tasks.mme_emotion import vlmeval as mme_vlmeval
from emo_tasks.mme_emotion.scoring import TABLE
from emo_tasks.results import reader, report
from emo_tasks.vlmeval.judging import judge_env
from emo_tasks.vlmeval.runfolder import run_settings
from judges.testing import LoopbackServer

sys.path.insert(0, str(Path(__file__).parent.parent))
from fakes import Judge  # noqa: E402

DATASET = "EmoVid_sample_ER_Lab"
TASK = "mme_emotion_sample_er_lab"
#: Substrings VLMEvalKit 0.0.20's model wrappers match in dataset names (`listinstr`) to change prompts or media.
WRAPPER_MATCHES = ("mme", "video", "mmbench", "vqa", "mcq", "y/n", "cn", "ocr", "math", "omni", "llava", "mmmu")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = with_mme_sample(tmp_path / "cache")
    monkeypatch.setenv("EMO_CACHE_DIR", str(root))
    monkeypatch.setenv("EMO_PROGRESS", "0")
    return root


@pytest.fixture
def judge() -> LoopbackServer:
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        yield srv


def _answer(i: int, label: str) -> str:
    return f"Step 1: the voice is tense. Step 2: the brows are drawn. Answer: {label if i % 2 else 'Neutral'}"


def _predictions(medium: str | None = "video frames") -> list[dict]:
    rows = mme_vlmeval.prediction_rows(DATASET)
    return [
        {**r, **({"medium": medium} if medium else {}), "prediction": _answer(r["index"], r["label"])} for r in rows
    ]


def _eval_file(tmp_path: Path, argv: list[str] | None = None) -> Path:
    folder = tmp_path / "work" / "eval-model"
    folder.mkdir(parents=True, exist_ok=True)
    if argv is not None:
        (folder / "status.json").write_text(json.dumps({"argv": argv}))
    path = folder / f"eval-model_{DATASET}.xlsx"
    path.write_bytes(b"VLMEvalKit's prediction file (its content is given to evaluate_predictions)")
    return path


def _kwargs(srv: LoopbackServer) -> dict:
    return {"api_base": f"{srv.base_url}/chat/completions", "key": API_KEY, "nproc": 8, "retry": 2, "timeout": 30}


def test_sixteen_datasets_named_so_no_model_wrapper_rewrites_them() -> None:
    names = mme_vlmeval.names()
    assert len(names) == 16 and {n for n in names if "_sample_" not in n} == {
        "EmoVid_ER_Lab", "EmoVid_ER_Wild", "EmoVid_Noise_ER", "EmoVid_FG_ER", "EmoVid_ML_ER", "EmoVid_SA",
        "EmoVid_FG_SA", "EmoVid_IR"}  # fmt: skip
    assert names[DATASET] == (TASK, "mme_emotion/sample/ER-Lab")
    assert not [n for n in names for w in WRAPPER_MATCHES if w in n.lower()]


def test_an_image_model_gets_the_judges_frames_named_by_the_videos_content(cache: Path, tmp_path: Path) -> None:
    from emo_tasks.mme_emotion.judge import frames_part

    doc = mme_vlmeval.load_docs(DATASET)[0]
    paths = mme_vlmeval.model_frames(doc, 10, -1, tmp_path / "frames")
    judge_frames = frames_part(dict(doc)).frames_jpeg()  # what the judge is shown: one per second, the first ten
    assert [Path(p).read_bytes() for p in paths] == judge_frames and len(paths) >= 2
    assert mme_vlmeval.model_frames(doc, 10, -1, tmp_path / "frames") == paths  # written once
    assert len(mme_vlmeval.model_frames(doc, 2, -1, tmp_path / "frames")) == 2
    assert len(mme_vlmeval.model_frames(doc, 10, 2.0, tmp_path / "frames")) > len(paths)  # two per second
    other = tmp_path / "other.mp4"  # another video's content: other frames, in another folder
    other.write_bytes(Path(mme_vlmeval.load_docs(DATASET)[1]["video_path"]).read_bytes())
    moved = mme_vlmeval.model_frames({**doc, "video_path": str(other)}, 10, -1, tmp_path / "frames")
    assert Path(moved[0]).parent != Path(paths[0]).parent


def test_evaluate_gives_lmms_evals_numbers_for_the_same_answers(
    cache: Path, judge: LoopbackServer, tmp_path: Path
) -> None:
    preds = _predictions()
    got = mme_vlmeval.evaluate_predictions(DATASET, preds, _eval_file(tmp_path), _kwargs(judge))
    sent = len(judge.calls)
    again = mme_vlmeval.evaluate_predictions(DATASET, preds, _eval_file(tmp_path), _kwargs(judge))
    assert again == got and len(judge.calls) == sent > 0  # evaluated again: the judge cache answers, nothing sent
    env = {**os.environ, "OPENAI_BASE_URL": judge.base_url, "OPENAI_API_KEY": API_KEY, "EMO_JUDGE": "api"}
    docs = hooks.load_task("mme_emotion/sample/ER-Lab", env)  # lmms-eval's path: process_docs .. aggregation
    records = [hooks.process_results(doc, [p["prediction"]])["rec_s"] for doc, p in zip(docs, preds, strict=True)]
    want = hooks.evaluate(records)
    assert {m: got[m] for m in TABLE.names} == want and want["n_scored"] == 2
    assert got["n_infer_failed"] == 0 and mme_vlmeval.PRIMARY in TABLE.names  # every metric goes to VLMEvalKit


@pytest.mark.slow  # in-process, but several judge passes: kept out of the fast tier's budget
def test_the_run_folder_records_the_prompt_asked_and_the_judge_stage_rejudges_it(
    cache: Path, judge: LoopbackServer, tmp_path: Path
) -> None:
    eval_file = _eval_file(tmp_path)
    got = mme_vlmeval.evaluate_predictions(DATASET, _predictions(), eval_file, _kwargs(judge))
    folder = eval_file.parent / "emo_tasks" / DATASET
    (source,) = folder.glob("*_results.json")
    data = json.loads(source.read_text())
    table = data["configs"][TASK]["lmms_eval_specific_kwargs"]
    assert table["default"] == {"medium": "video frames"} and table["medium"] == "video frames"
    assert stage.model_kwargs(table, "vlmevalkit")["medium"] == "video frames"  # what the judge stage checks
    assert data["emo_tasks_vlmeval"]["medium"] == "video frames"
    lines = [json.loads(x) for x in next(folder.glob("*_samples_*.jsonl")).read_text().splitlines()]
    assert all("Look at the video frames" in line["input"] for line in lines)
    # `report FOLDER` reads the judged result; `emo-tasks judge FOLDER` (another judge model) proves and judges it
    run = reader.load_run(folder)
    assert run.results[TASK]["cot_s,none"] == got["cot_s"] and API_KEY not in json.dumps(run.data)
    env = {**os.environ, "OPENAI_BASE_URL": judge.base_url, "OPENAI_API_KEY": API_KEY}
    assert stage.judge_run(folder, env=env, overrides={"EMO_JUDGE_MODEL": "judge-b"}) == stage.EXIT_OK


def test_a_prediction_file_that_does_not_say_the_medium_is_refused(cache: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not say which prompt the model was asked"):
        mme_vlmeval.evaluate_predictions(DATASET, _predictions(None), _eval_file(tmp_path), {})
    docs = mme_vlmeval.load_docs(DATASET)
    kept = {i: [{"type": "image", "value": "f.jpg"}, {"type": "text", "value": hooks.doc_to_text(d, {"medium": m})}]
            for i, (d, m) in enumerate(zip(docs, ["video frames", "video"], strict=True))}  # fmt: skip
    assert mme_vlmeval.medium_of_structs(docs, kept) is None  # two media: no answer
    kept[1][1]["value"] = hooks.doc_to_text(docs[1], {"medium": "video frames"})
    assert mme_vlmeval.medium_of_structs(docs, kept) == "video frames"  # the prompts VLMEvalKit kept and sent
    mixed = _predictions()
    mixed[1]["medium"] = "video"
    with pytest.raises(DataError, match="several media"):
        mme_vlmeval.evaluate_predictions(DATASET, mixed, _eval_file(tmp_path), {})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.append(dict(p[0])), "prediction rows 1 and 3 both have index 0"),
        (lambda p: p.pop(1), r"lacks 1 of the 2 rows \(missing: index 1\)"),
        (lambda p: p[0].update(target="Anger #000000000000"), "row 1 \\(index 0\\): its target"),
    ],
)
def test_rows_that_are_not_the_runs_are_refused_before_anything_is_judged(
    cache: Path, tmp_path: Path, change, message: str
) -> None:
    preds = _predictions()
    change(preds)
    with pytest.raises(DataError, match=message):
        mme_vlmeval.evaluate_predictions(DATASET, preds, _eval_file(tmp_path), {})
    folder = tmp_path / "work" / "eval-model" / "emo_tasks" / DATASET
    assert [p.name for p in folder.iterdir()] == ["emo_tasks_refused.json"]  # no results: why, for every tool
    with pytest.raises(reader.ReportError, match=f"evaluation of {DATASET} .* was refused, so no results of it"):
        reader.load_run(folder)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.append(dict(p[2])), "EmoVid_sample_all: prediction rows 3 and 17 both have index 2"),
        (lambda p: p.pop(5), "EmoVid_sample_all: the prediction file lacks 1 of the 16 rows (missing: index 5); "),
        (lambda p: p[9].update(target="x"), "EmoVid_sample_all: prediction row 10 (index 9): its target 'x' is "),
    ],
)
def test_a_groups_refusal_names_the_group_and_the_files_own_row_and_index(
    cache: Path, tmp_path: Path, change, message: str
) -> None:
    """The dataset the user ran (not the task the row belongs to), the prediction file's row and `index`."""
    preds = [{**r, "medium": "video", "prediction": _answer(r["index"], r["label"])}
             for r in mme_vlmeval.prediction_rows("EmoVid_sample_all")]  # fmt: skip
    change(preds)
    with pytest.raises(DataError) as refused:
        mme_vlmeval.evaluate_predictions("EmoVid_sample_all", preds, _eval_file(tmp_path), {})
    assert str(refused.value).startswith(message)


@pytest.mark.slow  # in-process, but several judge passes: kept out of the fast tier's budget
def test_defer_keeps_the_answers_for_emo_tasks_judge(cache: Path, judge: LoopbackServer, tmp_path: Path) -> None:
    eval_file = _eval_file(tmp_path)
    env = {**os.environ, "EMO_JUDGE": "defer"}
    got = mme_vlmeval.evaluate_predictions(DATASET, _predictions(), eval_file, _kwargs(judge), env=env)
    assert got == {"judging_deferred": True, "n_infer_failed": 0, "n_empty_answers": 0} and not judge.calls
    folder = eval_file.parent / "emo_tasks" / DATASET
    env = {**os.environ, "OPENAI_BASE_URL": judge.base_url, "OPENAI_API_KEY": API_KEY}
    assert stage.judge_run(folder, env=env) == stage.EXIT_OK
    judged = reader.load_run(folder)
    now = mme_vlmeval.evaluate_predictions(DATASET, _predictions(), eval_file, _kwargs(judge))
    assert {m: judged.results[TASK][f"{m},none"] for m in TABLE.names} == {m: now[m] for m in TABLE.names}


def test_no_judge_is_an_error_naming_the_folder_and_the_answers_stay(cache: Path, tmp_path: Path) -> None:
    eval_file = _eval_file(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_"))}
    with pytest.raises(RuntimeError, match="emo-tasks judge exited 3.*answers are kept in"):
        mme_vlmeval.evaluate_predictions(DATASET, _predictions(), eval_file, {}, env=env)
    assert len(list((eval_file.parent / "emo_tasks" / DATASET).glob("*_samples_*.jsonl"))) == 1


def test_a_failed_answer_is_counted_and_left_out(cache: Path, judge: LoopbackServer, tmp_path: Path) -> None:
    preds = _predictions()
    preds[0]["prediction"] = "Failed to obtain answer via API. "
    got = mme_vlmeval.evaluate_predictions(DATASET, preds, _eval_file(tmp_path), _kwargs(judge))
    assert got["n_infer_failed"] == 1 and got["n_scored"] + got["n_judge_failed"] == 1


def test_vlmevalkits_judge_settings_map_onto_ours() -> None:
    env = {"OPENAI_API_URL": "http://old/v1", "EMO_JUDGE_MODEL": "env-judge", "API_TYPE": "azure"}
    given = {"model": "qwen-judge", "api_base": "http://h:8000/v1/chat/completions", "key": "sk-x", "nproc": 32,
             "retry": 3, "timeout": 90, "verbose": False, "step_model": "qwen-step"}  # fmt: skip
    out = judge_env(env, given)
    assert out["EMO_JUDGE_MODEL"] == "qwen-judge" and out["EMO_STEP_MODEL"] == "qwen-step"
    assert out["OPENAI_BASE_URL"] == "http://h:8000/v1/chat/completions" and "OPENAI_API_URL" not in out
    assert (out["API_TYPE"], out["OPENAI_API_KEY"]) == ("openai", "sk-x")
    assert (out["EMO_JUDGE_CONCURRENCY"], out["EMO_JUDGE_MAX_TRIES"], out["EMO_JUDGE_TIMEOUT"]) == ("32", "3", "90.0")
    assert judge_env(env, {"nproc": None, "model": ""}) == env  # absent: ours (environment, then the paper's)
    from judges.config import EndpointConfig

    assert EndpointConfig.from_env(out).base_url == "http://h:8000/v1"


def test_the_runs_settings_are_read_from_its_status_file_never_its_key(tmp_path: Path) -> None:
    argv = ["run.py", "--data", DATASET, "--model", "m", "--base-url", "http://h/v1", "--key", "sk-secret-1",
            "--temperature", "0.7", "--limit", "6", "--video-llm"]  # fmt: skip
    got = run_settings(_eval_file(tmp_path, argv))
    assert got["limit"] == 6 and got["video_llm"] is True and "sk-secret-1" not in json.dumps(got)
    assert got["generation"]["temperature"] == 0.7 and got["generation"]["max_tokens"] == 2**15  # run.py's default
    assert run_settings(tmp_path / "nowhere" / "x.xlsx") == {"known": False}
    # the run's own arguments (what VLMEvalKit hands a dataset) win over a status.json of another launcher's argv
    args = {"work_dir": "w", "limit": 3, "base_url": None, "temperature": None, "max_tokens": 2**15}
    got = run_settings(_eval_file(tmp_path, argv), args)
    assert got["limit"] == 3 and set(got["generation"]) == {"model"}  # a model class keeps its own settings


@pytest.mark.slow  # in-process, but several judge passes: kept out of the fast tier's budget
def test_generation_settings_that_differ_from_the_protocol_are_noted(
    cache: Path, judge: LoopbackServer, tmp_path: Path
) -> None:
    argv = ["run.py", "--base-url", "http://h/v1", "--key", "sk-secret-2"]
    eval_file = _eval_file(tmp_path, argv)
    mme_vlmeval.evaluate_predictions(DATASET, _predictions(), eval_file, _kwargs(judge))
    notes = report.run_notes(reader.load_run(eval_file.parent / "emo_tasks" / DATASET))
    assert f"{TASK}: generation: max_tokens 32768 where the task asks max_new_tokens 1024" in " ".join(notes)
    assert not [n for n in notes if "temperature" in n]  # 0, as the task asks
    ours = "".join(p.read_text() for p in (eval_file.parent / "emo_tasks").rglob("*.json*"))
    assert "sk-secret-2" not in ours and '"max_tokens": 32768' in ours  # (VLMEvalKit's status.json has its argv)


@pytest.mark.slow  # in-process, but several judge passes: kept out of the fast tier's budget
def test_the_group_dataset_gives_the_pooled_numbers_of_lmms_evals_group(
    cache: Path, judge: LoopbackServer, tmp_path: Path
) -> None:
    from emo_tasks.benchmarks import benchmark

    rows = mme_vlmeval.prediction_rows("EmoVid_sample_all")
    assert len(rows) == 16 and [r["index"] for r in rows] == list(range(16)) and len({r["task"] for r in rows}) == 8
    preds = [{**r, "medium": "video", "prediction": _answer(r["index"], r["label"])} for r in rows]
    eval_file = _eval_file(tmp_path)
    got = mme_vlmeval.evaluate_predictions("EmoVid_sample_all", preds, eval_file, _kwargs(judge))
    env = {**os.environ, "OPENAI_BASE_URL": judge.base_url, "OPENAI_API_KEY": API_KEY, "EMO_JUDGE": "api"}
    per_task, sizes, start = [], [], 0
    for member in mme_vlmeval.members("EmoVid_sample_all"):  # lmms-eval: each task's aggregation, then the group's
        docs = hooks.load_task(mme_vlmeval.names()[member][1], env)
        answers = [p["prediction"] for p in preds[start : start + len(docs)]]
        records = [hooks.process_results(d, [a])["rec_s"] for d, a in zip(docs, answers, strict=True)]
        per_task.append(hooks.evaluate(records))
        sizes.append(len(docs))
        start += len(docs)
    pool = benchmark("mme").group_aggregate
    want = {m: pool([values[m] for values in per_task], sizes) for m in TABLE.names}
    assert {m: got[m] for m in TABLE.names} == want and want["n_scored"] == 16
    run = reader.load_run(eval_file.parent / "emo_tasks" / "EmoVid_sample_all")
    assert run.results["mme_emotion_sample"]["cot_s,none"] == got["cot_s"] and len(run.samples) >= 8
    wrong = [dict(p) for p in preds]
    wrong[3]["index"] = 16
    with pytest.raises(DataError, match="index 16 is no row of EmoVid_sample_all"):
        mme_vlmeval.evaluate_predictions("EmoVid_sample_all", wrong, eval_file, _kwargs(judge))
