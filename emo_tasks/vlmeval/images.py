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


def collect_answers(
    repeats: int,
    dataset: str,
    predictions: Sequence[Mapping[str, Any]],
    targets: Sequence[str],
    limit: int | None = None,
) -> tuple[dict[int, list[str]], set[int]]:
    """({doc_id: its answers in order}, doc_ids with a failed answer) from VLMEvalKit's prediction rows (index =
    repeats * doc_id + k), each proven to be the run's (module docstring) against the data's docs' `targets`
    (`doc_to_target`, in order).  Every doc is answered, or, when the run was asked `--limit N` (`limit`: VLMEvalKit
    then keeps the first N rows), the first N // repeats docs are, with all their answers (as lmms-eval's --limit
    keeps the first docs): a shorter file is refused, never read as a limited run."""
    answers: dict[int, dict[int, str]] = {}
    failed: set[int] = set()
    for n, row in enumerate(predictions, start=1):
        try:
            index = int(row["index"])
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{dataset} prediction row {n}: no integer `index`") from None
        doc_id, k = divmod(index, repeats)
        if not 0 <= doc_id < len(targets):
            raise DataError(f"{dataset} prediction row {n}: index {index} is no row of {dataset} ({len(targets)} docs)")
        if str(row.get("target")) != targets[doc_id]:
            raise DataError(
                f"{dataset} prediction row {n} (index {index}): its target {row.get('target')!r} is not the data's "
                f"now ({targets[doc_id]!r}); the predictions are of other data"
            )
        if k in answers.setdefault(doc_id, {}):
            raise DataError(f"{dataset} prediction row {n}: index {index} appears twice")
        text = _answer(row.get("prediction"))
        if INFER_FAIL in text:
            failed.add(doc_id)
        answers[doc_id][k] = text
    indices = {repeats * i + k for i, got in answers.items() for k in got}
    n_rows = len(indices)
    if limit is not None and n_rows == limit < repeats * len(targets) and indices == set(range(n_rows)):
        if n_rows % repeats:  # the first `limit` rows cut a doc's answers
            raise DataError(
                f"{dataset}: --limit {limit} keeps the first {limit} rows, which cuts doc {n_rows // repeats}'s "
                f"{repeats} answers; use a --limit that is a multiple of {repeats}"
            )
        expected = n_rows // repeats
    else:
        expected = len(targets)
    missing = [i for i in range(expected) if len(answers.get(i, {})) != repeats]
    if missing:
        raise DataError(
            f"{dataset}: {len(missing)} of {expected} rows lack some of their {repeats} answer(s) (first: "
            f"index {repeats * missing[0]}); evaluate a complete prediction file"
        )
    return {i: [got[k] for k in range(repeats)] for i, got in answers.items()}, failed


def _answer(value: Any) -> str:
    """A prediction cell as text: an empty answer comes back from VLMEvalKit's xlsx as NaN (or None), never "nan"."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value)


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
    answers, failed = collect_answers(task.repeats, dataset, predictions, targets, limit)
    lines, records = [], []
    for doc_id, doc in enumerate(docs[: len(answers)]):
        if doc_id in failed:
            continue
        got = answers[doc_id]
        record = hooks.process_results(doc, [got] if task.repeats > 1 else got)
        records.append(next(iter(record.values())))
        lines.append({
            "doc_id": doc_id, "target": targets[doc_id], "input": hooks.doc_to_text(doc),
            "input_media": [doc["image_path"]], "resps": [[a] for a in got], "filtered_resps": got, **record,
        })  # fmt: skip
    metrics = hooks.evaluate(records)
    host = {
        "dataset": dataset,
        "task": task.names[dataset][0],
        "n_docs": len(docs),
        "n_infer_failed": len(failed),
        **({"limit": len(answers)} if len(answers) < len(docs) else {}),
        **task.flags(lines),
    }
    return metrics, lines, host


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
    from vlmeval.smp import load

    from . import HOST_TYPE
    from .runfolder import prompt_config, run_dir, run_facts, run_settings, write_run

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
        asked = run_settings(eval_file, getattr(self, "run_args", None))
        metrics, lines, host = score(task, self.dataset_name, load(eval_file).to_dict("records"),
                                     limit=asked.get("limit"))  # fmt: skip
        lmms_task, dataset_name = task.names[self.dataset_name]
        facts = run_facts(eval_file, lmms_task, asked)
        host.update(facts, notes=[*host.get("notes", []), *facts["notes"]])
        config = {"dataset_name": dataset_name, "repeats": task.repeats, **prompt_config(lmms_task)}
        write_run(run_dir(eval_file, self.dataset_name), lmms_task, metrics, lines, config,
                  Path(eval_file).parent.name, host, when=Path(eval_file).stat().st_mtime,
                  n_original=host["n_docs"])  # fmt: skip
        return {**metrics, **{k: v for k, v in host.items() if isinstance(v, int | float | bool)}}

    return type(class_name, (ImageBaseDataset,), {
        "__doc__": doc, "TYPE": HOST_TYPE, "MODALITY": "IMAGE", "DATASET_URL": dict.fromkeys(task.names, ""),
        "__init__": _with_run_args(__init__), "load_data": load_data, "build_prompt": build_prompt,
        "evaluate": evaluate,
        "report_primary_metric": classmethod(report_primary_metric),
    })  # fmt: skip
