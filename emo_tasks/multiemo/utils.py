"""The names MultiEmo-Bench's YAML files reference with `!function utils.<name>` (the code lives in
emo_tasks.multiemo.hooks, so its state is shared: lmms-eval loads this file by path, once per YAML)."""

from emo_tasks.multiemo.hooks import (  # noqa: F401
    agg_canberra,
    agg_cheb,
    agg_cosine,
    agg_js,
    agg_kl,
    agg_n_images,
    agg_n_images_incomplete,
    agg_n_parse_failed,
    agg_n_plcc_undefined,
    agg_n_srcc_undefined,
    agg_plcc,
    agg_precision_original,
    agg_precision_ours,
    agg_precision_single,
    agg_srcc,
    agg_wasserstein,
    doc_to_text,
    doc_to_visual,
    process_docs,
    process_results,
)
