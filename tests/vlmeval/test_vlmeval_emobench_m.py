"""EmoBench-M in VLMEvalKit (issue 44), without VLMEvalKit: the dataset names, the rows, the frames an image model is
given, and `evaluate`'s path (prediction rows proven to be the run's -> the lmms-eval path's scoring functions ->
an lmms-eval-shaped run folder), compared with the pure functions lmms-eval's tasks call on the same answers."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import API_KEY
from test_vlmeval_mme import WRAPPER_MATCHES

from emo_tasks.benchmarks import all_benchmarks
from emo_tasks.common import DataError
from emo_tasks.emobench_m import hooks, scoring
from emo_tasks.emobench_m import vlmeval as ebm_vlmeval
from emo_tasks.emobench_m.protocol import scenarios
from emo_tasks.emobench_m.sample import sample_root
from emo_tasks.results import reader, report
from emo_tasks.settings import SettingsError, environ
from emo_tasks.vlmeval.reasoning import answer_read
from emo_tasks.vlmeval.runfolder import TaskOutput, write_tasks
from judges.testing import LoopbackServer

sys.path.insert(0, str(Path(__file__).parent.parent))
from fakes import Judge  # noqa: E402

GROUP = "EmoBenchM_sample_all"
OFFLINE = {"EMO_JUDGE": "offline"}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample's clips, generated once for the module (each test copies them into its own cache)."""
    cache = tmp_path_factory.mktemp("ebm_sample")
    sample_root(cache)
    return cache / "samples"


@pytest.fixture
def cache(generated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    shutil.copytree(generated, root / "samples")
    monkeypatch.setenv("EMO_CACHE_DIR", str(root))
    return root


def _answer(i: int, doc: dict) -> str:
    """Answers of every kind, derived from the row: the requested format, a label in prose, no label, an empty
    answer, a reasoning block with a decoy label before the answer."""
    if doc["kind"] == scoring.GENERATION:
        return ["The audience laughed because the joke was unexpected.", ""][i % 2]
    labels = doc["labels"]
    if doc["kind"] == scoring.JOINT:
        return f"{{'emotion label': '{labels[i % len(labels)]}', 'intent label': '{doc['intents'][i % 3]}'}}"
    pick = labels[(i * 5) % len(labels)]
    return [f"{{'emotion': '{pick}'}}", f"I think it is {pick}.", "hard to say", "",
            f"<think>maybe {labels[0]}</think>{pick}"][i % 5]  # fmt: skip


def _predictions(dataset: str = GROUP) -> list[dict]:
    docs = ebm_vlmeval.load_docs(dataset)
    rows = ebm_vlmeval.rows_of(docs)
    return [{**r, "prediction": _answer(i, d)} for i, (r, d) in enumerate(zip(rows, docs, strict=True))]


def _eval_file(tmp_path: Path, dataset: str = GROUP) -> Path:
    folder = tmp_path / "work" / "eval-model"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"eval-model_{dataset}.xlsx"
    path.write_bytes(b"VLMEvalKit's prediction file (its content is given to evaluate_predictions)")
    return path


def test_twenty_eight_datasets_named_so_no_model_wrapper_rewrites_them() -> None:
    names = ebm_vlmeval.dataset_names()
    assert len(names) == 28 and names[-2:] == ["EmoBenchM_all", "EmoBenchM_sample_all"]
    assert {n for n in names if "_sample_" not in n and not n.endswith("_all")} == {
        "EmoBenchM_FGMSA", "EmoBenchM_CH_SIMSV2S", "EmoBenchM_MOSI", "EmoBenchM_MOSEI", "EmoBenchM_SIMS",
        "EmoBenchM_FUNNY", "EmoBenchM_MUSTARD", "EmoBenchM_MELD", "EmoBenchM_MER2023", "EmoBenchM_RAVDSS_SONG",
        "EmoBenchM_RAVDSS_SPEECH", "EmoBenchM_MC_EIU", "EmoBenchM_SMILE"}  # fmt: skip
    assert ebm_vlmeval.names()["EmoBenchM_sample_MELD"] == ("emobench_m_sample_meld", "emobench_m/sample/meld")
    assert ebm_vlmeval.members(GROUP) == [f"EmoBenchM_sample_{k.upper()}" for k in scenarios()]
    assert not [n for n in names for w in WRAPPER_MATCHES if w in n.lower()]
    specs = [s for b in all_benchmarks() for s in b.vlmeval_datasets]
    assert "emo_tasks.emobench_m.vlmeval:dataset_class" in specs  # the registry's one line
    with pytest.raises(DataError, match="EmoBenchM_nothing: not an EmoBench-M dataset"):
        ebm_vlmeval.members("EmoBenchM_nothing")


def test_the_sample_rows_are_the_lmms_eval_tasks_docs(cache: Path) -> None:
    rows = ebm_vlmeval.prediction_rows(GROUP)
    assert len(rows) == 26 and [r["index"] for r in rows] == list(range(26))
    at = 0
    for sc in scenarios().values():
        docs = hooks.load_task(f"emobench_m/sample/{sc.key}", environ())  # lmms-eval's process_docs
        assert ebm_vlmeval.prediction_rows(f"EmoBenchM_sample_{sc.key.upper()}") == [
            {**r, "index": i} for i, r in enumerate(rows[at : at + len(docs)])]  # fmt: skip
        for row, doc in zip(rows[at : at + len(docs)], docs, strict=True):
            assert row["question"] == hooks.doc_to_text(doc) and row["target"] == hooks.doc_to_target(doc)
            assert row["video_path"] == doc["video_path"] and Path(row["video_path"]).is_file()
        at += len(docs)


def test_scores_equal_the_lmms_eval_paths_pure_functions(cache: Path) -> None:
    """Per scenario `scoring.task_metrics` over `scoring.score_sample` of each answer (as lmms-eval's default
    --reasoning_tags reads it), the group `scoring.group_aggregate`: what lmms-eval's tasks compute."""
    preds = _predictions()
    got = ebm_vlmeval.score_predictions(GROUP, preds, OFFLINE)
    docs = ebm_vlmeval.load_docs(GROUP)
    by_task: dict[str, list[scoring.SampleResult]] = {}
    for doc, p in zip(docs, preds, strict=True):
        unit = scoring.score_sample(doc["kind"], answer_read(p["prediction"]), doc["gold"], doc["labels"],
                                    doc["intents"], doc["gold_intent"])  # fmt: skip
        by_task.setdefault(f"emobench_m_sample_{doc['scenario']}", []).append(unit)
    want = {task: scoring.task_metrics(units) for task, units in by_task.items()}
    assert got.tasks == want and list(got.tasks) == [s.sample_task for s in scenarios().values()]
    sizes = [len(u) for u in by_task.values()]
    assert got.group == {m: scoring.group_aggregate([w[m] for w in want.values()], sizes) for m in scoring.TABLE.names}
    assert got.n_infer_failed == 0 and got.n_empty == sum(1 for p in preds if p["prediction"] == "")
    assert got.group["n_samples"] == 26 and 0 < got.group["accuracy"] < 100 and got.group["coverage"] < 100
    # a reasoning block is not read (its decoy label); the sample log keeps the whole answer in `resps`
    line = next(ln for t, ls in got.lines.items() for ln in ls if "<think>" in ln["resps"][0][0])
    assert "<think>" not in line["filtered_resps"][0] and line["accuracy"]["answer"] == line["filtered_resps"][0]


def test_one_answer_everywhere_gives_the_hand_counted_numbers(cache: Path) -> None:
    """`{'emotion': 'neutral'}` for every row (the e2e test's dummy answer): MOSI's golds are neutral and negative,
    so one of two is right (accuracy 50, weighted P/R/F1 25 / 50 / 33.3); FGMSA's are not neutral (0)."""
    preds = [{**p, "prediction": "{'emotion': 'neutral'}"} for p in _predictions()]
    got = ebm_vlmeval.score_predictions(GROUP, preds, OFFLINE)
    mosi = ebm_vlmeval.plain(got.tasks["emobench_m_sample_mosi"])
    assert (mosi["accuracy"], mosi["precision"], mosi["recall"]) == (50.0, 25.0, 50.0)
    assert mosi["f1"] == pytest.approx(100 / 3) and got.tasks["emobench_m_sample_fgmsa"]["accuracy"] == 0.0


def test_evaluate_writes_a_run_folder_the_report_reads_with_the_same_numbers(cache: Path, tmp_path: Path) -> None:
    preds = _predictions()
    eval_file = _eval_file(tmp_path)
    got = ebm_vlmeval.evaluate_predictions(GROUP, preds, eval_file, {}, "video", env={**environ(), **OFFLINE})
    scored = ebm_vlmeval.score_predictions(GROUP, preds, OFFLINE)
    assert {k: got[k] for k in scoring.TABLE.names} == ebm_vlmeval.plain(scored.group)
    folder = eval_file.parent / "emo_tasks" / GROUP
    run = reader.load_run(folder)
    assert run.results["emobench_m_sample"]["accuracy,none"] == got["accuracy"]
    assert run.results["emobench_m_sample_meld"]["f1,none"] == scored.tasks["emobench_m_sample_meld"]["f1"]
    assert run.data["group_subtasks"] == {"emobench_m_sample": list(scored.tasks)}
    assert not [n for n in report.run_notes(run) if "per-sample" in n]
    acc = run.samples["emobench_m_sample_mosi"]["accuracy"]  # per-sample values read back from the sample log
    assert sum(acc.values()) / len(acc) == run.results["emobench_m_sample_mosi"]["accuracy,none"]
    host = run.data["emo_tasks_vlmeval"]
    assert host["medium"] == "video" and host["n_docs"] == 26 and ebm_vlmeval.FRAMES_NOTE not in host["notes"]
    frames = ebm_vlmeval.evaluate_predictions(GROUP, preds, eval_file, {}, "video frames", env={**environ(), **OFFLINE})
    assert frames == got and ebm_vlmeval.FRAMES_NOTE in reader.load_run(folder).data["emo_tasks_vlmeval"]["notes"]


def test_smiles_llm_scorer_runs_with_vlmevalkits_judge_flags(cache: Path, tmp_path: Path) -> None:
    """VLMEvalKit's --judge-base-url / --judge-key reach the authors' LLM scorer (`judge.py`): its metrics are the
    lmms-eval path's (`hooks.process_results` + `hooks.evaluate` with the same judge), a rerun sends nothing, and
    the run folder's sample log holds each answer's ratings."""
    dataset = "EmoBenchM_sample_SMILE"
    preds = _predictions(dataset)
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        kwargs = {"api_base": f"{srv.base_url}/chat/completions", "key": API_KEY, "nproc": 4, "retry": 2}
        got = ebm_vlmeval.evaluate_predictions(dataset, preds, _eval_file(tmp_path, dataset), kwargs, "video")
        sent = len(srv.calls)
        again = ebm_vlmeval.evaluate_predictions(dataset, preds, _eval_file(tmp_path, dataset), kwargs, "video")
        assert again == got and len(srv.calls) == sent  # evaluated again: the judge cache answers
        env = {**environ(), "OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": API_KEY, "EMO_JUDGE": "api"}
        docs = hooks.load_task("emobench_m/sample/smile", env)
        records = [hooks.process_results(d, [p["prediction"]])["accuracy"] for d, p in zip(docs, preds, strict=True)]
        want = ebm_vlmeval.plain(hooks.evaluate(records))
    assert {k: got[k] for k in scoring.TABLE.names} == want and sent == 2  # one answer non-empty: two dimensions
    assert want["llm_total"] is not None and want["n_judge_failed"] == 0 and want["bleu"] is not None
    # the sample log holds each answer's ratings (evaluated again in this process too): the report's per-answer
    # values, whose mean is the metric
    run = reader.load_run(_eval_file(tmp_path, dataset).parent / "emo_tasks" / dataset)
    per_answer = run.samples["emobench_m_sample_smile"]["llm_total"]
    assert len(per_answer) == 2 and sum(per_answer.values()) / 2 == got["llm_total"]


def test_a_missing_annotation_file_or_video_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMO_EMOBENCH_M_ROOT", raising=False)
    with pytest.raises(SettingsError, match="EMO_EMOBENCH_M_ROOT is not set"):
        ebm_vlmeval.load_docs("EmoBenchM_MELD")
    root = tmp_path / "ebm"
    (root / "benchmark_json").mkdir(parents=True)
    monkeypatch.setenv("EMO_EMOBENCH_M_ROOT", str(root))
    with pytest.raises(DataError, match=rf"{root / 'benchmark_json' / 'MELD.json'} is missing"):
        ebm_vlmeval.load_docs("EmoBenchM_MELD")
    row = {
        "id": "m1",
        "video": "videos/a.mp4",
        "conversations": [{"from": "human", "value": "<video>\nWhich emotion?"}, {"from": "gpt", "value": "joy"}],
    }
    (root / "benchmark_json" / "MELD.json").write_text(json.dumps([row]))
    with pytest.raises(DataError, match=r"MELD/videos/a\.mp4 \(m1\)"):
        ebm_vlmeval.load_docs("EmoBenchM_MELD")
    with pytest.raises(DataError, match="FGMSA.json is missing"):
        ebm_vlmeval.load_docs("EmoBenchM_all")  # the group: its first scenario that cannot load stops it


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.append(dict(p[0])), f"{GROUP}: prediction rows 1 and 27 both have index 0"),
        (lambda p: p.pop(5), f"{GROUP}: the prediction file lacks 1 of the 26 rows (missing: index 5)"),
        (lambda p: p[3].update(target="neutral #000000000000"), f"{GROUP}: prediction row 4 (index 3): its target"),
    ],
)
def test_rows_that_are_not_the_runs_are_refused_and_leave_no_results(
    cache: Path, tmp_path: Path, change, message: str
) -> None:
    preds = _predictions()
    change(preds)
    eval_file = _eval_file(tmp_path)
    with pytest.raises(DataError) as refused:
        ebm_vlmeval.evaluate_predictions(GROUP, preds, eval_file, {}, "video", env={**environ(), **OFFLINE})
    assert str(refused.value).startswith(message)
    folder = eval_file.parent / "emo_tasks" / GROUP
    assert not list(folder.glob("*_results.json")) and (folder / "emo_tasks_refused.json").is_file()


def test_a_failed_answer_is_counted_and_its_row_left_out(cache: Path) -> None:
    preds = _predictions()
    preds[0]["prediction"] = "Failed to obtain answer via API."
    got = ebm_vlmeval.score_predictions(GROUP, preds, OFFLINE)
    assert got.n_infer_failed == 1 and [ln["doc_id"] for ln in got.lines["emobench_m_sample_fgmsa"]] == [1]
    assert got.tasks["emobench_m_sample_fgmsa"]["n_samples"] == 1 and got.group["n_samples"] == 25


def test_an_image_model_gets_frames_named_by_the_clips_content(cache: Path, tmp_path: Path) -> None:
    doc = ebm_vlmeval.load_docs("EmoBenchM_sample_MELD")[0]
    paths = ebm_vlmeval.model_frames(doc, 10, -1, tmp_path / "frames")
    assert paths and all(Path(p).read_bytes()[:2] == b"\xff\xd8" for p in paths)  # JPEG files
    assert ebm_vlmeval.model_frames(doc, 10, -1, tmp_path / "frames") == paths  # written once
    assert len(ebm_vlmeval.model_frames(doc, 1, -1, tmp_path / "frames")) == 1


def test_the_medium_is_read_from_the_parts_vlmevalkit_kept() -> None:
    from emo_tasks.vlmeval.video import medium_of_parts

    text = {"type": "text", "value": "Which emotion?"}
    assert medium_of_parts({0: [{"type": "video", "value": "a.mp4"}, text]}) == "video"
    assert medium_of_parts({0: [{"type": "image", "value": "f.jpg"}, text]}) == "video frames"
    assert medium_of_parts({0: [{"type": "video", "value": "a.mp4"}, text], 1: [text]}) is None


def test_a_group_without_given_metrics_keeps_the_judge_stages_empty_row(tmp_path: Path) -> None:
    """MME-Emotion's group row (pooled later by the judge stage) is unchanged; EmoBench-M's carries its metrics."""
    out = [TaskOutput("t", {"accuracy": 1.0}, [], {})]
    empty = write_tasks(tmp_path / "a", out, "m", {}, groups={"g": ["t"]})
    assert json.loads(empty.read_text())["results"]["g"] == {"alias": "g", "accuracy,none": None}
    given = write_tasks(tmp_path / "b", out, "m", {}, groups={"g": ["t"]}, group_metrics={"g": {"accuracy": 2.0}})
    assert json.loads(given.read_text())["results"]["g"] == {"alias": "g", "accuracy,none": 2.0}


@pytest.mark.parametrize("module", ["emo_tasks.mme_emotion.vlmeval", "emo_tasks.emobench_m.vlmeval"])
def test_each_video_adapter_gives_what_the_shared_dataset_class_reads(module: str) -> None:
    """The shared VLMEvalKit video class (`emo_tasks.vlmeval.video.dataset_class`) reads these names of each adapter;
    VLMEvalKit is not installed in the fast tier, so a name a refactor drops is caught here, not in the vlmeval tier."""
    import importlib

    from emo_tasks.vlmeval.video import ADAPTER_NAMES

    adapter = importlib.import_module(module)
    assert [n for n in ADAPTER_NAMES if not hasattr(adapter, n)] == []
    assert isinstance(adapter.MAX_FRAMES, int) and adapter.MAX_FRAMES > 0
    docs = adapter.load_docs(next(n for n in adapter.dataset_names() if "_sample_" in n))
    assert adapter.prompt_text(docs[0], "video").strip()
    assert adapter.primary_metric({}) == {}
