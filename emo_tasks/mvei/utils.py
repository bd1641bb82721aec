"""The names MVEI's YAML files reference with `!function utils.<name>` (the code lives in emo_tasks.mvei.hooks,
so its state is shared: lmms-eval loads this file by path, once per YAML)."""

from emo_tasks.mvei.hooks import (  # noqa: F401
    agg_acc_emotion_interpretation,
    agg_acc_perception_subjectivity,
    agg_acc_scene_context,
    agg_acc_sentiment_polarity,
    agg_acc_total,
    agg_give_up_ratio,
    agg_n_pairs,
    agg_positive_ratio,
    agg_self_consistency,
    agg_strict_parser_disagreement,
    doc_to_text,
    doc_to_visual,
    process_docs,
    process_results,
)
