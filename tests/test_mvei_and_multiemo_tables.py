"""MVEI's and MultiEmo-Bench's metric tables against what lmms-eval loads: every task YAML's `metric_list` is the
table's, and `utils.py` (loaded by path, as lmms-eval does) has one aggregation per metric, all sharing one
scoring pass."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from emo_tasks.multiemo import scoring as multiemo_scoring
from emo_tasks.mvei import scoring as mvei_scoring

PACKAGE = Path(__file__).resolve().parent.parent / "emo_tasks"
BENCHMARKS = {
    "mvei": (mvei_scoring.TABLE, ("mvei.yaml", "mvei_sample.yaml")),
    "multiemo": (multiemo_scoring.TABLE, ("multiemo.yaml", "multiemo_sample.yaml")),
}


class _TaskLoader(yaml.SafeLoader):
    """lmms-eval's YAML dialect: `!function utils.name` is kept as the string "utils.name"."""


_TaskLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def task_config(path: Path) -> dict[str, Any]:
    """A task YAML with its `include:` chain applied (the including file's keys win, as in lmms-eval)."""
    config = yaml.load(path.read_text(encoding="utf-8"), Loader=_TaskLoader)
    include = config.pop("include", None)
    if include:
        config = {**task_config(path.parent / include), **config}
    return config


def load_utils(bench: str) -> ModuleType:
    """The benchmark's utils.py loaded by file path under a fresh name, as lmms-eval loads `!function` files."""
    spec = importlib.util.spec_from_file_location(f"_{bench}_utils_by_path", PACKAGE / bench / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_every_task_yaml_lists_the_tables_metrics(bench: str) -> None:
    table, files = BENCHMARKS[bench]
    for name in files:
        config = task_config(PACKAGE / bench / name)
        assert config["task"] == name.removesuffix(".yaml")
        assert config["metric_list"] == table.yaml_metric_list(), name


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_utils_has_one_aggregation_per_metric(bench: str) -> None:
    table, _ = BENCHMARKS[bench]
    utils = load_utils(bench)
    aggregations = sorted(k for k in vars(utils) if k.startswith("agg_"))
    assert aggregations == sorted(f"agg_{m}" for m in table.names)
    for name in ("process_docs", "doc_to_visual", "doc_to_text", "process_results"):
        assert callable(getattr(utils, name))


def test_table_directions_headlines_and_report_flags() -> None:
    """As the report and `compare` showed them before the tables existed."""
    mvei, multiemo = mvei_scoring.TABLE, multiemo_scoring.TABLE
    assert (mvei.benchmark, mvei.title, multiemo.benchmark, multiemo.title) == (
        "mvei", "MVEI", "multiemo", "MultiEmo-Bench"
    )  # fmt: skip
    dims = [f"acc_{d.replace(' ', '_')}" for d in mvei_scoring.DIMENSIONS]
    assert [m.name for m in mvei.headline] == ["acc_total"]  # compare's default
    assert {m.name for m in mvei.reported} == {*dims, "acc_total", "positive_ratio", "give_up_ratio"}
    assert {m.name for m in mvei if m.outcome} == {m.name for m in mvei.reported}
    assert {m.name for m in mvei if m.plot} == {*dims, "acc_total"}
    assert mvei.lower_is_better == {"give_up_ratio", "strict_parser_disagreement"}
    precisions = ("precision_ours", "precision_original", "precision_single")
    reported = [*precisions, *multiemo_scoring.DISTRIBUTION_METRICS]
    assert [m.name for m in multiemo.headline] == [m.name for m in multiemo.reported] == reported
    assert {m.name for m in multiemo if m.outcome} == {m.name for m in multiemo if m.plot} == set(precisions)
    assert [m.digits for m in multiemo.reported] == [2] * 3 + [4] * 8
    assert multiemo.lower_is_better == {
        "cheb", "canberra", "wasserstein", "kl", "js",
        "n_images_incomplete", "n_parse_failed", "n_srcc_undefined", "n_plcc_undefined",
    }  # fmt: skip
    for table in (mvei, multiemo):
        assert [m.name for m in table if m.in_table] == [m.name for m in table.reported]


def test_mvei_aggregations_share_one_scoring_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    from emo_tasks.mvei import hooks

    utils = load_utils("mvei")
    calls = []
    real = mvei_scoring.task_metrics
    monkeypatch.setattr(mvei_scoring, "task_metrics", lambda *a, **k: calls.append(1) or real(*a, **k))
    doc = {"pair_id": f"p-{uuid.uuid4()}", "dimension": "scene context", "label": "correct", "data_source": "sample"}
    items = [hooks.process_results(doc, [["Correct", "Correct", "Incorrect"]])["acc_total"]]
    values = {m: getattr(utils, f"agg_{m}")(items) for m in mvei_scoring.TABLE.names}
    assert len(calls) == 1
    assert values["acc_total"] == 100.0 and values["acc_scene_context"] == 100.0
    assert values["acc_sentiment_polarity"] is None and values["n_pairs"] == 1
    assert values["self_consistency"] == 0.0 and values["positive_ratio"] == 100.0
