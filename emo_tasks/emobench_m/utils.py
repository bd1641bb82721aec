"""The names EmoBench-M's YAML files reference with `!function utils.<name>`: the hooks of
`emo_tasks.emobench_m.hooks`, `agg_<metric>` for every metric of `emo_tasks.emobench_m.scoring.TABLE` and
`group_aggregate` (see `emo_tasks.benchmarks.yaml_functions`).

lmms-eval loads this file by path, once per YAML; the code lives in the package so that its state is shared.
"""

from emo_tasks.benchmarks import yaml_functions

globals().update(yaml_functions("emobench_m"))
