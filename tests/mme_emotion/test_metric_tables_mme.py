"""MME-Emotion's task YAMLs agree with its one metric table (`scoring.TABLE`), and so do its aggregation functions
and its `results.BENCHMARK` description."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from emo_tasks.mme_emotion.registry import BENCHMARK
from emo_tasks.mme_emotion.scoring import TABLE

FOLDER = Path(__file__).resolve().parent.parent.parent / "emo_tasks" / "mme_emotion"


class _Loader(yaml.SafeLoader):
    """Reads lmms-eval task YAMLs: `!function utils.x` becomes the string "utils.x"."""


_Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def load_task_yaml(path: Path) -> dict[str, Any]:
    """A task YAML with its `include:` chain merged in (the including file wins, as in lmms-eval)."""
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    include = data.pop("include", None)
    if include is None:
        return data
    return {**load_task_yaml(path.parent / include), **data}


YAMLS = {p.name: load_task_yaml(p) for p in sorted(FOLDER.glob("*.yaml"))}
TASK_YAMLS = {name: d for name, d in YAMLS.items() if "task" in d and isinstance(d["task"], str)}
GROUP_YAMLS = {name: d for name, d in YAMLS.items() if "group" in d}


def test_the_folder_holds_sixteen_tasks_and_two_groups() -> None:
    assert len(TASK_YAMLS) == 16 and len(GROUP_YAMLS) == 2
    assert sorted(d["task"] for d in TASK_YAMLS.values()) == sorted(BENCHMARK.tasks)
    assert sorted(d["group"] for d in GROUP_YAMLS.values()) == sorted(BENCHMARK.groups)
    assert sorted(t for d in GROUP_YAMLS.values() for t in d["task"]) == sorted(BENCHMARK.tasks)
    assert BENCHMARK.table is TABLE and BENCHMARK.key == "mme" and BENCHMARK.read_samples is not None


@pytest.mark.parametrize("name", sorted(TASK_YAMLS))
def test_task_metric_list_is_the_table(name: str) -> None:
    assert TASK_YAMLS[name]["metric_list"] == TABLE.yaml_metric_list()


@pytest.mark.parametrize("name", sorted(GROUP_YAMLS))
def test_group_aggregates_every_metric_of_the_table(name: str) -> None:
    metrics = GROUP_YAMLS[name]["aggregate_metric_list"]
    assert tuple(m["metric"] for m in metrics) == TABLE.names
    assert {m["aggregation"] for m in metrics} == {"utils.group_aggregate"}


def test_utils_defines_every_function_the_yamls_name() -> None:
    spec = importlib.util.spec_from_file_location("mme_utils_probe", FOLDER / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    named = set()
    for d in YAMLS.values():
        for v in d.values():
            if isinstance(v, str) and v.startswith("utils."):
                named.add(v)
        for m in d.get("metric_list", []) + d.get("aggregate_metric_list", []):
            named.add(m["aggregation"])
    assert {f"utils.agg_{n}" for n in TABLE.names} <= named
    for ref in sorted(named):
        assert callable(getattr(utils, ref.split(".", 1)[1])), ref
    assert utils.agg_rec_s.__name__ == "agg_rec_s" and "Rec-S" in utils.agg_rec_s.__doc__
