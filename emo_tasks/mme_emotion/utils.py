"""The names MME-Emotion's YAML files reference with `!function utils.<name>`: the hooks of
`emo_tasks.mme_emotion.hooks` and `agg_<metric>` for every metric of `emo_tasks.mme_emotion.scoring.TABLE`
(see `emo_tasks.benchmarks.yaml_functions`).

lmms-eval loads this file by path, once per YAML; the code lives in the package so that its state (loaded tasks,
the memo the aggregations share) is shared by all of them.
"""

from emo_tasks.benchmarks import yaml_functions

globals().update(yaml_functions("mme"))
