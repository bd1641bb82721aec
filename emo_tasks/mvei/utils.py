"""The names MVEI's YAML files reference with `!function utils.<name>` (the code lives in emo_tasks.mvei.hooks,
so its state is shared: lmms-eval loads this file by path, once per YAML)."""

from emo_tasks.mvei.hooks import (  # noqa: F401
    doc_to_target,
    doc_to_text,
    doc_to_visual,
    evaluate,
    process_docs,
    process_results,
)
from emo_tasks.mvei.scoring import TABLE

# The YAMLs' `aggregation: !function utils.agg_<metric>` need one module attribute per metric.  They are derived
# from the metric table (one list of MVEI's metrics), all reading one memoised `evaluate`, instead of being written
# out here a second time.
globals().update(TABLE.aggregations(evaluate))
