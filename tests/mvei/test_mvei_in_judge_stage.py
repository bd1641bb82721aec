"""MVEI as the judge stage (`emo-tasks judge RUN_DIR`) uses it: `load_task` gives process_docs' rows,
`doc_to_target` pins each row (portable, and changed by any change to the row), and re-scoring a sample log with
`process_results` + `evaluate` gives exactly the in-process metrics."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from PIL import Image

from emo_tasks.common import DataError, LastResult
from emo_tasks.images import portable_name
from emo_tasks.mvei import hooks
from emo_tasks.mvei.scoring import TABLE
from emo_tasks.settings import environ

#: Hand-written answers, cycled over the pairs: majorities both ways, a 1-1-1 give-up, the authors' rule's
#: weaknesses ("Anger" = A = Correct), tags, and an empty answer.
ANSWERS = [
    ["Correct", "Correct", "Incorrect"],
    ["Incorrect", "not sure", "Incorrect."],
    ["Correct", "Incorrect", "I cannot tell"],
    ["<answer>Incorrect</answer>", "B", "Correct."],
    ["Anger", "A", "b"],
    ["", "Correct", "<think>hmm</think>Incorrect"],
    ["It is not correct.", "Correct", "Correct"],
]


def placeholder(name: str) -> Any:
    import datasets

    return datasets.Dataset.from_list([{"emo_source": name}])


def sample_log(tmp_path: Path, task: str, logged: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines lmms-eval's own EvaluationTracker writes for these logged samples (its flattening, str(target),
    `input` = the first argument, `doc` dropped)."""
    from lmms_eval.loggers.evaluation_tracker import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(tmp_path / "run"))
    tracker.general_config_tracker.model_name_sanitized = "model"
    tracker.date_id = "20250101_000000"
    tracker.save_results_samples(task, logged)
    path = tmp_path / "run" / "model" / f"20250101_000000_samples_{task}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def logged_sample(doc_id: int, doc: dict[str, Any], target: str, prompt: str, filtered: Any, metrics: dict) -> dict:
    """One document as lmms-eval's `_process_document_results` logs it (one request per document)."""
    return {
        "doc_id": doc_id,
        "doc": doc,
        "target": target,
        "arguments": [prompt, {"max_new_tokens": 256}, doc_id, "task", "test"],
        "resps": [filtered],
        "filtered_resps": [filtered],
        **metrics,
    }


def rescore(
    bench_hooks: Any,
    first_metric: str,
    dataset_name: str,
    env: dict[str, str],
    lines: list[dict],
    kwargs: dict,
    args: Any,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """What the stage does per task: load the rows, check every saved answer against its row and prompt, rebuild
    the records from `filtered_resps` (the first metric's record), evaluate."""
    docs = bench_hooks.load_task(dataset_name, env)
    for line in lines:
        doc = docs[line["doc_id"]]
        assert line["target"] == bench_hooks.doc_to_target(doc)
        assert line["input"] == bench_hooks.doc_to_text(doc, kwargs)
    records = [
        bench_hooks.process_results(docs[line["doc_id"]], [line["filtered_resps"]])[first_metric] for line in lines
    ]
    return records, bench_hooks.evaluate(records, args)


# ------------------------------------------------------------------------------------------------ load_task
def test_load_task_gives_process_docs_rows_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMO_CACHE_DIR", str(tmp_path / "cache"))
    docs = hooks.load_task("mvei/sample", environ())
    rows = list(hooks.process_docs(placeholder("mvei/sample")))
    assert rows == docs and [d["row"] for d in docs] == list(range(len(docs)))
    # lmms-eval hands doc_to_target a Dataset row: the same target as the stage's loaded doc
    assert [hooks.doc_to_target(r) for r in rows] == [hooks.doc_to_target(d) for d in docs]
    assert hooks.STATE.sources.get("sample") is not None  # evaluate's settings come from load_task too
    with pytest.raises(DataError, match="mvei/benchmark or mvei/sample"):
        hooks.load_task("mvei/other", environ())
    with pytest.raises(DataError, match="mvei/benchmark or mvei/sample"):
        hooks.load_task("multiemo/sample", environ())


def test_hooks_expose_the_stage_api() -> None:
    from emo_tasks.mvei import utils

    for name in ("load_task", "doc_to_text", "doc_to_target", "process_results", "evaluate"):
        assert callable(getattr(hooks, name))
    assert utils.doc_to_target is hooks.doc_to_target


# ------------------------------------------------------------------------------------------------ targets
def write_plain(folder: Path, rows: list[dict[str, Any]]) -> Path:
    """A plain-format data file with its images under `folder`."""
    for i, row in enumerate(rows):
        path = folder / row["image"]
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (6, 4), (10 * i, 50, 90)).save(path)
    data = folder / "mvei.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


ROWS = [
    {"image": "img/a.png", "statement": "It evokes joy.", "label": "correct", "dimension": "scene context"},
    {"image": "img/b.png", "statement": "It feels calm.", "label": "incorrect", "dimension": "sentiment polarity"},
    {"image": "./img/../img/c.png", "statement": "Fear.", "label": "correct", "dimension": "emotion interpretation"},
]


def targets(env: dict[str, str], name: str = "mvei/benchmark") -> list[str]:
    return [hooks.doc_to_target(d) for d in hooks.load_task(name, env)]


def test_targets_are_the_same_for_copies_of_the_data(tmp_path: Path) -> None:
    a = write_plain(tmp_path / "a", ROWS)
    b = write_plain(tmp_path / "elsewhere" / "deeper" / "b", ROWS)
    ta, tb = targets({"EMO_MVEI_FILE": str(a)}), targets({"EMO_MVEI_FILE": str(b)})
    assert ta == tb and len(set(ta)) == len(ROWS)
    assert ta[0].startswith("correct #") and ta[1].startswith("incorrect #")
    docs = hooks.load_task("mvei/benchmark", {"EMO_MVEI_FILE": str(a)})
    assert [d["image_name"] for d in docs] == ["img/a.png", "img/b.png", "img/c.png"]  # never a machine's path
    # the bundled sample generated in two cache folders
    one = targets({"EMO_CACHE_DIR": str(tmp_path / "c1")}, "mvei/sample")
    two = targets({"EMO_CACHE_DIR": str(tmp_path / "c2")}, "mvei/sample")
    assert one == two and len(set(one)) == len(one)


@pytest.mark.parametrize(
    "change",
    [
        {"label": "incorrect"},  # a flipped label
        {"statement": "It evokes great joy."},
        {"dimension": "perception subjectivity"},
        {"image": "img/other.png"},
    ],
)
def test_a_changed_row_changes_its_target(tmp_path: Path, change: dict[str, str]) -> None:
    before = targets({"EMO_MVEI_FILE": str(write_plain(tmp_path / "a", ROWS))})
    changed = [{**ROWS[0], **change}, *ROWS[1:]]
    after = targets({"EMO_MVEI_FILE": str(write_plain(tmp_path / "b", changed))})
    assert after[0] != before[0] and after[1:] == before[1:]


def test_a_different_pair_id_or_source_changes_the_target(tmp_path: Path) -> None:
    doc = hooks.load_task("mvei/benchmark", {"EMO_MVEI_FILE": str(write_plain(tmp_path, ROWS))})[0]
    assert hooks.doc_to_target({**doc, "pair_id": "line 9"}) != hooks.doc_to_target(doc)
    assert hooks.doc_to_target({**doc, "data_source": "sample"}) != hooks.doc_to_target(doc)
    # the machine's absolute path and the row index are not part of the row's identity
    assert hooks.doc_to_target({**doc, "image_path": "/elsewhere/a.png", "row": 7}) == hooks.doc_to_target(doc)


def test_portable_name(tmp_path: Path) -> None:
    data = tmp_path / "data" / "mvei.json"
    assert portable_name("images/x.png", data) == "images/x.png"
    assert portable_name("./images/../images/x.png", data) == "images/x.png"
    assert portable_name(str(tmp_path / "data" / "images" / "x.png"), data) == "images/x.png"
    assert portable_name(str(tmp_path / "other" / "x.png"), data) == "x.png"  # outside the folder: its name only
    assert portable_name("../shared/x.png", data) == "x.png"


# ------------------------------------------------------------------------------------------------ re-scoring
def test_stage_rescoring_gives_exactly_the_in_process_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMO_CACHE_DIR", str(tmp_path / "cache"))
    kwargs = {"post_prompt": " Answer Correct or Incorrect."}
    # in process, as lmms-eval runs it: process_docs' Dataset rows, take_first_k's [[a1, a2, a3]], the aggregation
    rows = list(hooks.process_docs(placeholder("mvei/sample")))
    in_process, logged = [], []
    for doc_id, doc in enumerate(rows):
        answers = ANSWERS[doc_id % len(ANSWERS)]
        metrics = hooks.process_results(doc, [answers])
        in_process.append(metrics["acc_total"])
        logged.append(
            logged_sample(doc_id, doc, hooks.doc_to_target(doc), hooks.doc_to_text(doc, kwargs), answers, metrics)
        )
    want = hooks.evaluate(in_process, None)

    lines = sample_log(tmp_path, "mvei_sample", logged)
    assert lines[0]["filtered_resps"] == ANSWERS[0]  # the samples file holds the three answers, unwrapped
    monkeypatch.setattr(hooks.STATE, "memo", LastResult())  # computed afresh, not the in-process value remembered
    records, got = rescore(
        hooks, TABLE.names[0], "mvei/sample", environ(), lines, kwargs, SimpleNamespace(log_samples=True)
    )
    assert records == in_process
    assert json.dumps(got) == json.dumps(want) and got == want
    assert set(TABLE.names) <= got.keys() and got["n_pairs"] == len(rows)
    assert 0 < got["acc_total"] < 100 and 0 < got["give_up_ratio"] and got["strict_parser_disagreement"] > 0


def test_stage_on_another_machine_copy_of_the_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run on one copy of the data, re-scored against another copy (other folder): same targets, same metrics."""
    a = write_plain(tmp_path / "gpu" / "data", ROWS)
    b = tmp_path / "laptop" / "copy"
    shutil.copytree(a.parent, b)
    run_env = {"EMO_MVEI_FILE": str(a), "EMO_CACHE_DIR": str(tmp_path / "c1")}
    docs = hooks.load_task("mvei/benchmark", run_env)
    logged = []
    for doc_id, doc in enumerate(docs):
        answers = ANSWERS[doc_id]
        metrics = hooks.process_results(doc, [answers])
        logged.append(logged_sample(doc_id, doc, hooks.doc_to_target(doc), hooks.doc_to_text(doc), answers, metrics))
    want = hooks.evaluate([s["acc_total"] for s in logged])
    lines = sample_log(tmp_path, "mvei", logged)
    monkeypatch.setattr(hooks.STATE, "memo", LastResult())
    stage_env = {"EMO_MVEI_FILE": str(b / "mvei.jsonl"), "EMO_CACHE_DIR": str(tmp_path / "c2")}
    _, got = rescore(hooks, TABLE.names[0], "mvei/benchmark", stage_env, lines, {}, None)
    assert got == want


# ------------------------------------------------------------------------------------------------ a real run
def assert_run_rescores_exactly(out: Path, task: str, bench_hooks: Any, first_metric: str, env: dict[str, str]) -> None:
    """Re-score a real lmms-eval run's sample log as the stage does and compare with its results.json, value by
    value (called by the slow CLI tests of test_mvei.py and test_multiemo.py, which run with --log_samples)."""
    results_file = sorted(out.rglob("*_results.json"))[-1]
    data = json.loads(results_file.read_text(encoding="utf-8"))
    config = data["configs"][task]
    (log,) = out.rglob(f"*_samples_{task}.jsonl")
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    kwargs = config.get("lmms_eval_specific_kwargs") or {}
    kwargs = kwargs.get("default", kwargs)  # the YAML's per-model table, as lmms-eval resolves it for a model
    _, got = rescore(bench_hooks, first_metric, config["dataset_name"], env, lines, kwargs, None)
    recorded = data["results"][task]
    names = [key.removesuffix(",none") for key in recorded if key.endswith(",none") and "_stderr" not in key]
    assert names and {n: recorded[f"{n},none"] for n in names} == {n: got[n] for n in names}
