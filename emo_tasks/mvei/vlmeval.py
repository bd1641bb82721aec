"""MVEI in VLMEvalKit: datasets `EmoMVEI` (the 3,086 pairs) and `EmoMVEI_sample` (the bundled sample).

The same pairs, prompt and scoring as the lmms-eval tasks `mvei` / `mvei_sample` (`hooks.load_task`,
`hooks.doc_to_text`, `hooks.process_results`, `scoring.task_metrics`).  The paper asks each pair three times and
keeps the majority: in lmms-eval that is `repeats: 3`; VLMEvalKit asks the model once per row, so each pair is
three rows (index = 3 * doc_id + k) and `evaluate` joins them again.  Sampling is the model's setting in
VLMEvalKit (API models default to temperature 0), not the dataset's: when all three answers are identical on
every pair, the results say that sampling was off (`sampling_off`), as self-consistency 100 % means.

Every number comes from rows proven to be the run's: each (pair, k) once, every pair with its three answers, and
each row's `target` (the pair's content hash, `hooks.doc_to_target`) equal to the data's now; anything else is an
error naming the row, never a guess.  A row VLMEvalKit could not answer (its failure marker) is counted
(`n_infer_failed`) and its pair left out of the scores, never read as an answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError
from emo_tasks.settings import environ

from . import hooks, scoring

#: VLMEvalKit dataset name -> (our lmms-eval task, its dataset_name)
TASKS = {"EmoMVEI": ("mvei", "mvei/benchmark"), "EmoMVEI_sample": ("mvei_sample", "mvei/sample")}
REPEATS = 3
#: VLMEvalKit's answer when the model call failed after its retries (`vlmeval.smp.file.INFER_FAIL_MSG`).
INFER_FAIL = "Failed to obtain answer"


def prediction_rows(dataset: str, env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The rows VLMEvalKit asks the model: three per pair, each with the pair's prompt, image and target."""
    _, name = TASKS[dataset]
    rows = []
    for doc_id, doc in enumerate(hooks.load_task(name, environ() if env is None else env)):
        question = hooks.doc_to_text(doc)
        for k in range(REPEATS):
            rows.append({
                "index": REPEATS * doc_id + k, "doc_id": doc_id, "repeat": k, "pair_id": doc["pair_id"],
                "image_path": doc["image_path"], "question": question, "statement": doc["statement"],
                "dimension": doc["dimension"], "label": doc["label"], "target": hooks.doc_to_target(doc),
            })  # fmt: skip
    return rows


def score_predictions(
    dataset: str, predictions: Sequence[Mapping[str, Any]], env: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """(metrics, lmms-eval-shaped sample-log lines, host facts) from VLMEvalKit's prediction rows (each a mapping
    with `index`, `target` and `prediction`); a DataError names the first row that is not the run's."""
    task, name = TASKS[dataset]
    docs = hooks.load_task(name, environ() if env is None else env)
    answers: dict[int, dict[int, str]] = {}
    failed: set[int] = set()
    for n, row in enumerate(predictions, start=1):
        try:
            index = int(row["index"])
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{dataset} prediction row {n}: no integer `index`") from None
        doc_id, k = divmod(index, REPEATS)
        if not 0 <= doc_id < len(docs):
            raise DataError(f"{dataset} prediction row {n}: index {index} is no row of {dataset} ({len(docs)} pairs)")
        if str(row.get("target")) != hooks.doc_to_target(docs[doc_id]):
            raise DataError(
                f"{dataset} prediction row {n} (index {index}): its target {row.get('target')!r} is not pair "
                f"{docs[doc_id]['pair_id']}'s in the data now; the predictions are of other data"
            )
        if k in answers.setdefault(doc_id, {}):
            raise DataError(f"{dataset} prediction row {n}: index {index} appears twice")
        text = "" if row.get("prediction") is None else str(row["prediction"])
        if INFER_FAIL in text:
            failed.add(doc_id)
        answers[doc_id][k] = text
    missing = [docs[i]["pair_id"] for i in range(len(docs)) if len(answers.get(i, {})) != REPEATS]
    if missing:
        raise DataError(
            f"{dataset}: {len(missing)} of {len(docs)} pairs lack some of their {REPEATS} answers (first: "
            f"{missing[0]}); evaluate a complete prediction file"
        )
    lines, results = [], []
    for doc_id, doc in enumerate(docs):
        if doc_id in failed:
            continue
        three = [answers[doc_id][k] for k in range(REPEATS)]
        record = hooks.process_results(doc, [three])
        results.append(hooks.pair_result(record[scoring.TABLE.names[0]]))
        lines.append({
            "doc_id": doc_id, "target": hooks.doc_to_target(doc), "input": hooks.doc_to_text(doc),
            "input_media": [doc["image_path"]], "resps": [three], "filtered_resps": three, **record,
        })  # fmt: skip
    metrics = scoring.task_metrics(results)
    same = [len(set(line["filtered_resps"])) == 1 for line in lines]
    host = {
        "dataset": dataset,
        "task": task,
        "n_infer_failed": len(failed),
        "sampling_off": bool(same) and all(same),
    }
    if host["sampling_off"]:
        host["note"] = (
            "the three answers of every pair are identical: the model did not sample (VLMEvalKit's API models use "
            "temperature 0 unless --temperature is given); MVEI's protocol asks for sampled answers, so "
            "self_consistency is 100 % by construction and the majority is a single answer"
        )
    return metrics, lines, host


@cache
def dataset_class() -> type:
    """The VLMEvalKit dataset class (built on first use: it imports vlmeval)."""
    import pandas as pd
    from vlmeval.dataset.image_base import ImageBaseDataset
    from vlmeval.smp import load

    from emo_tasks.vlmeval import HOST_TYPE
    from emo_tasks.vlmeval.runfolder import run_dir, write_run

    class EmoMVEI(ImageBaseDataset):
        """MVEI (emo_tasks): Correct/Incorrect judgements of emotion statements about an image."""

        TYPE = HOST_TYPE
        MODALITY = "IMAGE"
        DATASET_URL = {name: "" for name in TASKS}

        def load_data(self, dataset: str) -> Any:
            return pd.DataFrame(prediction_rows(dataset))

        def build_prompt(self, line: Any) -> list[dict[str, str]]:
            if isinstance(line, int):
                line = self.data.iloc[line]
            return [dict(type="image", value=str(line["image_path"])), dict(type="text", value=line["question"])]

        @classmethod
        def report_primary_metric(cls, metrics: dict[str, Any] | None) -> dict[str, float]:
            """acc_total: the paper's headline (VLMEvalKit would guess one from the names)."""
            value = (metrics or {}).get("acc_total")
            return {"acc_total": value} if isinstance(value, int | float) else {}

        def evaluate(self, eval_file: str, **judge_kwargs: Any) -> dict[str, Any]:
            table = load(eval_file)
            metrics, lines, host = score_predictions(self.dataset_name, table.to_dict("records"))
            task = TASKS[self.dataset_name][0]
            model = Path(eval_file).parent.name
            host["prediction_file"] = str(Path(eval_file).resolve())
            write_run(run_dir(eval_file, self.dataset_name), task, metrics, lines,
                      {"dataset_name": TASKS[self.dataset_name][1], "repeats": REPEATS}, model, host)  # fmt: skip
            return {**metrics, **{k: v for k, v in host.items() if k in ("n_infer_failed", "sampling_off")}}

    return EmoMVEI
