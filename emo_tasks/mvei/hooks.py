"""lmms-eval hooks for MVEI: thin adapters; the decisions and metrics come from the pure `scoring` module.

Each pair is asked `repeats: 3` times (sampling on); the task's `take_first_k` filter hands all three answers to
`process_results`, which parses each (the authors' rule and our strict one) and records the majority.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError, LastResult, load_yaml, placeholder_name

from . import scoring
from .data import data_file, load_docs, load_image

PROTOCOL_FILE = Path(__file__).with_name("protocol.yml")
METRICS = (
    "acc_total",
    "acc_sentiment_polarity",
    "acc_emotion_interpretation",
    "acc_scene_context",
    "acc_perception_subjectivity",
    "positive_ratio",
    "give_up_ratio",
    "self_consistency",
    "strict_parser_disagreement",
    "n_pairs",
)


def protocol() -> dict[str, Any]:
    """The prompt template (protocol.yml), parsed once."""
    return load_yaml(str(PROTOCOL_FILE))


def process_docs(dataset: Any) -> Any:
    """Replace lmms-eval's placeholder row (`dataset_name: mvei/<benchmark|sample>`) with the validated pairs."""
    import datasets

    name = placeholder_name(dataset, "MVEI")
    if name == "mvei/sample":
        from .sample import sample_file

        docs = load_docs(sample_file(), source="sample")
    elif name == "mvei/benchmark":
        docs = load_docs(data_file(), source="benchmark")
    else:
        raise DataError(f"dataset_name must be mvei/benchmark or mvei/sample, got {name!r}")
    return datasets.Dataset.from_list(docs)


def doc_to_visual(doc: dict[str, Any]) -> list[Any]:
    """`[PIL.Image]` (RGB), as lmms-eval's image models take it; a DataError naming the file if unreadable."""
    return [load_image(doc["image_path"])]


def doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    """The published ESJ instruction, then the statement.  kwargs: `prompt` (a template with {instruction} and
    {statement}), `pre_prompt`, `post_prompt`."""
    kw = dict(lmms_eval_specific_kwargs or {})
    proto = protocol()
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
    decisions = [scoring.parse_official(a) for a in answers]
    strict = [scoring.parse_strict(a) for a in answers]
    final = scoring.majority(decisions)
    record = {
        "pair_id": doc["pair_id"],
        "dimension": doc["dimension"],
        "label": doc["label"],
        "answers": answers,
        "decisions": decisions,
        "strict_decisions": strict,
        "final": final,
        "right": scoring.is_right(final, doc["label"]),
        "data_source": doc.get("data_source", "benchmark"),
    }
    return {metric: record for metric in METRICS}


_memo = LastResult()


def _scores(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The task's metrics, computed once for all its metric aggregations."""

    def compute() -> dict[str, Any]:
        pairs = [
            scoring.PairResult(
                dimension=r["dimension"],
                label=r["label"],
                decisions=tuple(r["decisions"]),
                strict_decisions=tuple(r["strict_decisions"]),
            )
            for r in items
        ]
        scores = scoring.score_pairs(pairs)
        _log(items, scores)
        return scores

    return _memo.get(tuple((r["pair_id"], tuple(r["answers"])) for r in items), compute)


def _log(items: Sequence[dict[str, Any]], scores: dict[str, Any]) -> None:
    from loguru import logger

    sample = " [sample]" if items and items[0].get("data_source") == "sample" else ""
    shown = ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in scores.items())
    logger.info(f"mvei{sample}: {shown}")


def _aggregation(name: str, doc: str) -> Any:
    def aggregate(items: Sequence[dict[str, Any]]) -> Any:
        return _scores(items)[name]

    aggregate.__name__ = aggregate.__qualname__ = f"agg_{name}"
    aggregate.__doc__ = doc
    return aggregate


agg_acc_total = _aggregation("acc_total", "Accuracy of the majority decision over all pairs, %.")
agg_acc_sentiment_polarity = _aggregation("acc_sentiment_polarity", "Accuracy on sentiment-polarity pairs, %.")
agg_acc_emotion_interpretation = _aggregation(
    "acc_emotion_interpretation", "Accuracy on emotion-interpretation pairs, %."
)
agg_acc_scene_context = _aggregation("acc_scene_context", "Accuracy on scene-context pairs, %.")
agg_acc_perception_subjectivity = _aggregation(
    "acc_perception_subjectivity", "Accuracy on perception-subjectivity pairs, %."
)
agg_positive_ratio = _aggregation("positive_ratio", "Share of majority decisions that are Correct, %.")
agg_give_up_ratio = _aggregation("give_up_ratio", "Share of majority decisions that are neither, %.")
agg_self_consistency = _aggregation("self_consistency", "Share of pairs whose 3 decisions agree, %.")
agg_strict_parser_disagreement = _aggregation(
    "strict_parser_disagreement", "Share of answers where the strict parser disagrees with the authors' rule, %."
)
agg_n_pairs = _aggregation("n_pairs", "Pairs evaluated.")
