"""An image benchmark as a VLMEvalKit dataset: one `ImageTask` description per benchmark, the rows VLMEvalKit asks,
the scoring of its predictions by the lmms-eval task's own hooks, and the dataset class built from both.

The rows are the lmms-eval task's docs (`hooks.load_task`), each asked `repeats` times (VLMEvalKit asks once per
row: index = repeats * doc_id + k), with the task's own prompt (`doc_to_text`) and row hash (`doc_to_target`).
`score` proves every prediction row is the run's before it counts: each (doc, k) once, every doc with all its
answers, the row's `target` equal to the data's now (anything else: a DataError naming the row).  A row VLMEvalKit
could not answer (its failure marker) is counted (`n_infer_failed`) and its doc left out (the benchmark's own
metrics then say what is missing), never read as an answer.  Then `process_results` per doc and the task's
`evaluate` over the records: the numbers of the lmms-eval task for the same answers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError
from emo_tasks.settings import environ
from emo_tasks.vlmeval.reasoning import answer_read

#: VLMEvalKit's answer when the model call failed after its retries (`vlmeval.smp.file.INFER_FAIL_MSG`).
INFER_FAIL = "Failed to obtain answer"


@dataclass(frozen=True)
class ImageTask:
    """What VLMEvalKit needs to know of one image benchmark."""

    #: VLMEvalKit dataset name -> (our lmms-eval task, its dataset_name)
    names: Mapping[str, tuple[str, str]]
    #: the lmms-eval hooks module (load_task, doc_to_text, doc_to_target, process_results, evaluate)
    hooks: str
    #: the headline metric VLMEvalKit's summary shows
    primary: str
    #: answers per doc (MVEI: the paper's three sampled answers)
    repeats: int = 1
    #: the doc fields copied into the prediction table beside the prompt (for people reading it)
    columns: tuple[str, ...] = ()
    #: (sample-log lines) -> benchmark facts for the results (e.g. MVEI's `sampling_off`; `notes`: lines the report
    #: shows)
    flags: Callable[[list[dict[str, Any]]], dict[str, Any]] = field(default=lambda lines: {})


def _hooks(task: ImageTask) -> Any:
    return importlib.import_module(task.hooks)


def _docs(task: ImageTask, dataset: str, env: Mapping[str, str] | None) -> list[dict[str, Any]]:
    return _hooks(task).load_task(task.names[dataset][1], environ() if env is None else env)


def prediction_rows(task: ImageTask, dataset: str, env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The rows VLMEvalKit asks the model: `repeats` per doc, each with its prompt, image and target."""
    hooks = _hooks(task)
    rows = []
    for doc_id, doc in enumerate(_docs(task, dataset, env)):
        question, target = hooks.doc_to_text(doc), hooks.doc_to_target(doc)
        for k in range(task.repeats):
            rows.append({
                "index": task.repeats * doc_id + k, "doc_id": doc_id, "repeat": k, "image_path": doc["image_path"],
                "question": question, "target": target, **{c: doc[c] for c in task.columns},
            })  # fmt: skip
    return rows


@dataclass
class Collected:
    """The answers of a prediction file, proven to be the run's (`collect_answers`)."""

    #: doc_id -> its answers, in order (every doc the run answered)
    answers: dict[int, list[str]]
    #: doc_ids with an answer VLMEvalKit could not get (its failure marker): left out of the scores
    failed: set[int]
    #: answers of the docs scored that were an empty cell (scored as an empty answer, as the protocol scores one)
    n_empty: int = 0


def collect_answers(
    repeats: int,
    dataset: str,
    predictions: Sequence[Mapping[str, Any]],
    targets: Sequence[str],
    limit: int | None = None,
) -> Collected:
    """The answers in VLMEvalKit's prediction rows (index = repeats * doc_id + k), each proven to be the run's
    (module docstring) against the data's docs' `targets` (`doc_to_target`, in order).  Every row is there, or,
    when the run was asked `--limit N` (`limit`: VLMEvalKit then keeps the first N rows), the first N are, and N
    keeps whole docs (as lmms-eval's --limit keeps the first docs): a shorter file is refused, never read as a
    limited run.

    A refusal (DataError) says what the user sees: `dataset` is the one they ran (a group's, not its task's), a row
    is the prediction file's row (1: the first under the header) with its own `index`, and what is missing is
    named by the index of the row that is missing."""
    total = repeats * len(targets)
    answers: dict[int, dict[int, str]] = {}
    row_of: dict[int, int] = {}  # index -> the file's row holding it
    failed: set[int] = set()
    empty: set[tuple[int, int]] = set()
    for n, row in enumerate(predictions, start=1):
        try:
            index = int(row["index"])
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{dataset}: prediction row {n} has no integer `index`") from None
        if not 0 <= index < total:
            raise DataError(
                f"{dataset}: prediction row {n}: index {index} is no row of {dataset} (its rows are index 0 to "
                f"{total - 1})"
            )
        if index in row_of:
            raise DataError(f"{dataset}: prediction rows {row_of[index]} and {n} both have index {index}")
        row_of[index] = n
        doc_id, k = divmod(index, repeats)
        if str(row.get("target")) != targets[doc_id]:
            raise DataError(
                f"{dataset}: prediction row {n} (index {index}): its target {row.get('target')!r} is not the "
                f"data's now ({targets[doc_id]!r}); the predictions are of other data"
            )
        text = _answer(row.get("prediction"))
        if INFER_FAIL in text:
            failed.add(doc_id)
        elif not text:
            empty.add((doc_id, k))
        answers.setdefault(doc_id, {})[k] = text
    n_rows = len(row_of)
    expected = total
    if limit is not None and n_rows == limit < total and set(row_of) == set(range(n_rows)):
        if n_rows % repeats:  # the first `limit` rows cut the answers of one doc
            first = n_rows - n_rows % repeats
            raise DataError(
                f"{dataset}: --limit {limit} keeps the first {limit} rows (index 0 to {limit - 1}), which splits "
                f"the {repeats} rows that ask one question {repeats} times (index {first} to {first + repeats - 1}); "
                f"use a --limit that is a multiple of {repeats}"
            )
        expected = n_rows
    missing = [i for i in range(expected) if i not in row_of]
    if missing:
        shown = ", ".join(str(i) for i in missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise DataError(
            f"{dataset}: the prediction file lacks {len(missing)} of the {expected} rows (missing: index {shown}); "
            "evaluate a complete prediction file"
        )
    return Collected(
        {i: [got[k] for k in range(repeats)] for i, got in answers.items()},
        failed,
        sum(1 for doc_id, _ in empty if doc_id not in failed),
    )


def _answer(value: Any) -> str:
    """A prediction cell as text: an empty cell is "" (NaN or None when read by pandas' defaults), never "nan"."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value)


def read_predictions(eval_file: str | Path) -> list[dict[str, Any]]:
    """VLMEvalKit's prediction file's rows as written.  VLMEvalKit's own `load` reads xlsx, tsv and csv with
    pandas' default NA strings, so a model that answered "None", "N/A" or "null" would come back as NaN, an empty
    answer, where lmms-eval scores the text: read here with none, only an empty cell is empty.  Other formats
    (json) with VLMEvalKit's `load`."""
    import pandas as pd

    path = Path(eval_file)
    suffix = path.suffix.lower()
    if suffix == ".xlsx":
        frame = pd.read_excel(path, keep_default_na=False)
    elif suffix in (".tsv", ".csv"):
        frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", keep_default_na=False)
    else:
        from vlmeval.smp import load

        frame = load(str(path))
    return frame.to_dict("records")


def score(
    task: ImageTask,
    dataset: str,
    predictions: Sequence[Mapping[str, Any]],
    env: Mapping[str, str] | None = None,
    limit: int | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """(metrics, lmms-eval-shaped sample-log lines, host facts) of VLMEvalKit's prediction rows (`limit`: the
    run's --limit, see `collect_answers`)."""
    hooks = _hooks(task)
    docs = _docs(task, dataset, env)
    targets = [hooks.doc_to_target(doc) for doc in docs]
    got_all = collect_answers(task.repeats, dataset, predictions, targets, limit)
    answers, failed = got_all.answers, got_all.failed
    lines, records = [], []
    for doc_id, doc in enumerate(docs[: len(answers)]):
        if doc_id in failed:
            continue
        got = answers[doc_id]
        read = [answer_read(a) for a in got]  # as lmms-eval's default --reasoning_tags hands them to the hooks
        record = hooks.process_results(doc, [read] if task.repeats > 1 else read)
        records.append(next(iter(record.values())))
        lines.append({
            "doc_id": doc_id, "target": targets[doc_id], "input": hooks.doc_to_text(doc),
            "input_media": [doc["image_path"]], "resps": [[a] for a in got], "filtered_resps": read, **record,
        })  # fmt: skip
    metrics = hooks.evaluate(records)
    host = {
        "dataset": dataset,
        "task": task.names[dataset][0],
        "n_docs": len(docs),
        "n_infer_failed": len(failed),
        "n_empty_answers": got_all.n_empty,
        **({"limit": len(answers)} if len(answers) < len(docs) else {}),
        **task.flags(lines),
    }
    host["notes"] = [*empty_notes(got_all.n_empty), *host.get("notes", [])]
    return metrics, lines, host


def empty_notes(n_empty: int) -> list[str]:
    """The report's note on answers that were empty cells (none: no note)."""
    if not n_empty:
        return []
    return [
        f"{n_empty} answer(s) were an empty cell in the prediction file, scored as an empty answer (as the protocol "
        "scores one; n_empty_answers)"
    ]


def _with_run_args(init: Callable[..., None]) -> Callable[..., None]:
    """`init` with the run's arguments (`runfolder.RUN_ARGS`) as named parameters: VLMEvalKit's build_dataset hands
    a dataset class only the arguments its constructor names."""
    import inspect

    from .runfolder import RUN_ARGS

    params = [p for p in inspect.signature(init).parameters.values() if p.kind is not p.VAR_KEYWORD]
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in RUN_ARGS]

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)

    wrapped.__signature__ = inspect.Signature([*params, *extra])  # type: ignore[attr-defined]
    return wrapped


def dataset_class(task: ImageTask, class_name: str, doc: str) -> type:
    """The VLMEvalKit dataset class of `task` (imports vlmeval)."""
    import pandas as pd
    from vlmeval.dataset.image_base import ImageBaseDataset

    from . import HOST_TYPE
    from .runfolder import evaluation, prompt_config, run_facts, run_settings, write_run

    def load_data(self: Any, dataset: str) -> Any:
        return pd.DataFrame(prediction_rows(task, dataset))

    def build_prompt(self: Any, line: Any) -> list[dict[str, str]]:
        if isinstance(line, int):
            line = self.data.iloc[line]
        return [dict(type="image", value=str(line["image_path"])), dict(type="text", value=line["question"])]

    def report_primary_metric(cls: Any, metrics: dict[str, Any] | None) -> dict[str, float]:
        value = (metrics or {}).get(task.primary)
        return {task.primary: value} if isinstance(value, int | float) else {}

    def __init__(
        self: Any, dataset: str = next(iter(task.names)), skip_noimg: bool = True, **run_args: Any
    ) -> None:  # fmt: skip
        # build_dataset hands over the run's arguments named here (RUN_ARGS): what it asked, for the results
        self.run_args = run_args
        ImageBaseDataset.__init__(self, dataset=dataset, skip_noimg=skip_noimg)

    def evaluate(self: Any, eval_file: str, **judge_kwargs: Any) -> dict[str, Any]:
        with evaluation(eval_file, self.dataset_name) as folder:  # refused: no results left to take for this run's
            asked = run_settings(eval_file, getattr(self, "run_args", None))
            metrics, lines, host = score(task, self.dataset_name, read_predictions(eval_file),
                                         limit=asked.get("limit"))  # fmt: skip
            lmms_task, dataset_name = task.names[self.dataset_name]
            facts = run_facts(eval_file, lmms_task, asked)
            host.update(facts, notes=[*host.get("notes", []), *facts["notes"]])
            config = {"dataset_name": dataset_name, "repeats": task.repeats, **prompt_config(lmms_task)}
            write_run(folder, lmms_task, metrics, lines, config, Path(eval_file).parent.name, host,
                      when=Path(eval_file).stat().st_mtime, n_original=host["n_docs"])  # fmt: skip
        return {**metrics, **{k: v for k, v in host.items() if isinstance(v, int | float | bool)}}

    return type(class_name, (ImageBaseDataset,), {
        "__doc__": doc, "TYPE": HOST_TYPE, "MODALITY": "IMAGE", "DATASET_URL": dict.fromkeys(task.names, ""),
        "__init__": _with_run_args(__init__), "load_data": load_data, "build_prompt": build_prompt,
        "evaluate": evaluate,
        "report_primary_metric": classmethod(report_primary_metric),
    })  # fmt: skip
