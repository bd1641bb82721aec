"""The names MME-Emotion's YAML files reference with `!function utils.<name>`.

lmms-eval loads this file by path as a standalone module, once per YAML; the real code lives in the
`emo_tasks.mme_emotion` package so that its state (the judge memo, the engine) is shared by all tasks.
"""

from emo_tasks.mme_emotion.hooks import (  # noqa: F401
    agg_avg_step,
    agg_avg_token,
    agg_cot_s,
    agg_n_judge_failed,
    agg_n_scored,
    agg_rea_s,
    agg_rec_s,
    agg_rec_s_strict,
    doc_to_messages,
    doc_to_text,
    doc_to_visual,
    group_aggregate,
    process_docs,
    process_results,
)
