"""lmms-eval hooks for MVEI: thin adapters; the decisions and metrics come from the pure `scoring` module.

Each pair is asked `repeats: 3` times (sampling on); the task's `take_first_k` filter hands all three answers to
`process_results`, which parses each (the authors' rule and our strict one) and records the majority.

The judge stage (`emo-tasks judge RUN_DIR`) re-scores a `--predict_only --log_samples` run with the same hooks:
`load_task` (the docs, in process_docs' order: doc_id = index), `doc_to_target` and `doc_to_text` (to check that
each logged answer belongs to the same row and prompt), `process_results(doc, [filtered_resps])` (a samples file's
`filtered_resps` is the three answers, `[a1, a2, a3]`) and `evaluate(records, args)`.  MVEI needs no judge: the
stage is the in-process scoring over the logged answers, so both give the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from emo_tasks import subset
from emo_tasks.common import load_yaml, placeholder_name, row_target
from emo_tasks.datafiles import dataset_source
from emo_tasks.images import load_image
from emo_tasks.metrics import paired_fields
from emo_tasks.settings import environ, refuse_batch_judge, refuse_lmms_flags

from . import scoring
from .data import data_file, load_docs
from .run_state import STATE
from .settings import MVEISettings

PROTOCOL_FILE = Path(__file__).with_name("protocol.yml")
#: The doc fields that identify a pair in `doc_to_target` (portable: no machine's absolute path).
TARGET_FIELDS = ("pair_id", "statement", "dimension", "label", "data_source", "image_name")


def load_task(dataset_name: str, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The validated pairs of a task's `dataset_name` ("mvei/benchmark" | "mvei/sample") as lmms-eval docs, in
    order (doc_id = index), with the settings read from `env`; the settings are registered for `evaluate`.

    A bad setting or row stops here (SettingsError / DataError naming it), before any inference."""
    source = dataset_source(dataset_name, "mvei")
    refuse_batch_judge(env)  # before the settings: their error would not name the two-stage flow
    settings = MVEISettings.from_env(env, source)
    docs = subset.restrict(dataset_name, load_docs(data_file(settings), source=source), subset_unit, env)
    STATE.sources.put(source, settings)
    return docs


def subset_unit(doc: Mapping[str, Any]) -> str:
    """A pair's key in a subset file (`emo_tasks.subset`): its pair_id, as report pairs runs."""
    return str(doc["pair_id"])


def subset_stratum(doc: Mapping[str, Any]) -> str:
    """The category a gate subset is stratified by (`emo-tasks plan-gate`): the dimension and the label."""
    return f"{doc['dimension']}/{doc['label']}"


def process_docs(dataset: Any) -> Any:
    """Replace lmms-eval's placeholder row (`dataset_name: mvei/<benchmark|sample>`) with the validated pairs
    (`load_task` with the process environment)."""
    import datasets

    refuse_lmms_flags("MVEI", own_repeats=3)  # before inference: flags that would give wrong numbers
    return datasets.Dataset.from_list(load_task(placeholder_name(dataset, "MVEI"), environ()))


def doc_to_target(doc: dict[str, Any]) -> str:
    """The label plus a hash of the pair's portable content (`TARGET_FIELDS`, `emo_tasks.common.row_target`):
    lmms-eval logs it per sample even with --predict_only, so the judge stage can prove an answer is mapped back
    to the same pair (a changed label, statement or image name changes it; another copy of the data does not)."""
    return row_target(doc["label"], {key: doc[key] for key in TARGET_FIELDS})


def doc_to_visual(doc: dict[str, Any]) -> list[Any]:
    """`[PIL.Image]` (RGB), as lmms-eval's image models take it; a DataError naming the file if unreadable."""
    return [load_image(doc["image_path"], "MVEI")]


def doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    """The published ESJ instruction, then the statement.  kwargs: `prompt` (a template with {instruction} and
    {statement}), `pre_prompt`, `post_prompt`."""
    kw = dict(lmms_eval_specific_kwargs or {})
    proto = load_yaml(str(PROTOCOL_FILE))
    text = (kw.get("prompt") or proto["template"]).format(instruction=proto["instruction"], statement=doc["statement"])
    return f"{kw.get('pre_prompt', '')}{text}{kw.get('post_prompt', '')}"


def _answers(results: Sequence[Any]) -> list[str]:
    """The pair's answers: take_first_k gives `[[a1, a2, a3]]`, lmms-eval's default filter `[a1]`."""
    items: list[Any] = []
    for r in results:
        items.extend(r if isinstance(r, (list, tuple)) else [r])
    return ["" if a is None else str(a) for a in items]


def process_results(doc: dict[str, Any], results: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Parse every answer (authors' rule + strict rule) and record the majority: cheap and thread-safe."""
    answers = _answers(results)
    pair = scoring.score_sample(answers, doc["dimension"], doc["label"])
    record = {
        "pair_id": doc["pair_id"],
        "dimension": doc["dimension"],
        "label": doc["label"],
        "answers": answers,
        "decisions": list(pair.decisions),
        "strict_decisions": list(pair.strict_decisions),
        "final": pair.final,
        "right": pair.right,
        "data_source": doc.get("data_source", "benchmark"),
        # the pair's accuracy (0/1) where lmms-eval's --baseline reads it (score_key: acc_total)
        **paired_fields(scoring.TABLE, scoring.TABLE.paired.per_sample(pair)),
    }
    return {metric: record for metric in scoring.TABLE.names}


def pair_result(record: dict[str, Any]) -> scoring.PairResult:
    """A logged `process_results` record (lmms-eval's sample log holds it too) as the pair's per-sample unit."""
    return scoring.PairResult(
        dimension=record["dimension"],
        label=record["label"],
        decisions=tuple(record["decisions"]),
        strict_decisions=tuple(record["strict_decisions"]),
    )


def evaluate(items: Sequence[dict[str, Any]], args: Any = None) -> dict[str, Any]:
    """The task's metrics, computed once for all its metric aggregations (keyed by the settings the task was
    loaded with and the records' content)."""
    settings = tuple(STATE.sources.get(s) for s in sorted({r.get("data_source", "benchmark") for r in items}))

    def compute() -> dict[str, Any]:
        scores = scoring.task_metrics([pair_result(r) for r in items], settings[0] if len(settings) == 1 else None)
        _log(items, scores)
        return scores

    return STATE.memo.get((settings, tuple((r["pair_id"], tuple(r["answers"])) for r in items)), compute)


def _log(items: Sequence[dict[str, Any]], scores: dict[str, Any]) -> None:
    from loguru import logger

    sample = " [sample]" if items and items[0].get("data_source") == "sample" else ""
    shown = ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in scores.items())
    logger.info(f"mvei{sample}: {shown}")
