"""The names MME-Emotion's YAML files reference with `!function utils.<name>`.

lmms-eval loads this file by path as a standalone module, once per YAML; the real code lives in the
`emo_tasks.mme_emotion` package so that its state (the task registry, the judge memo, the engine) is shared by all
tasks.
"""

from emo_tasks.mme_emotion.hooks import (  # noqa: F401
    doc_to_messages,
    doc_to_target,
    doc_to_text,
    doc_to_visual,
    evaluate,
    process_docs,
    process_results,
)
from emo_tasks.mme_emotion.scoring import TABLE, group_aggregate  # noqa: F401

# The task YAMLs name one aggregation per metric (`aggregation: !function utils.agg_rec_s`, ...), so this module
# must hold `agg_<metric>` for every metric of the table: derived from `scoring.TABLE` (all of them read one
# memoised `evaluate`), never written out by hand, so the YAML test can check the two agree.
globals().update(TABLE.aggregations(evaluate))
