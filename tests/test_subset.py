"""Gate subsets, in process: the subset file's checks, each benchmark's `load_task` keeping exactly the listed
rows (and refusing keys of other data), the record a run keeps, the judge stage's re-application of it, and the
plan's allocation and draw (hand-computed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import with_mme_sample

from emo_tasks import subset
from emo_tasks.common import DataError
from emo_tasks.gate import plan_gate, power
from emo_tasks.mme_emotion import hooks as mme
from emo_tasks.multiemo import hooks as multiemo
from emo_tasks.mvei import hooks as mvei


def _write(path: Path, rows: dict, **extra: object) -> Path:
    path.write_text(json.dumps({"emo_tasks_subset": 1, "name": "t", "rows": rows, **extra}))
    return path


def _env(tmp_path: Path, sub: Path | None = None) -> dict[str, str]:
    env = {"EMO_CACHE_DIR": str(with_mme_sample(tmp_path / "cache")), "EMO_JUDGE": "offline", "EMO_PROGRESS": "0"}
    if sub is not None:
        env[subset.ENV] = str(sub)
    return env


# ----------------------------------------------------------------------------------------------- the file
@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"rows": {"mvei/sample": ["sample-01"]}}, "not an emo-tasks subset file"),
        ({"emo_tasks_subset": 1, "rows": {}}, '"rows" must map'),
        ({"emo_tasks_subset": 1, "rows": {"mvei/sample": []}}, "non-empty list"),
        ({"emo_tasks_subset": 1, "rows": {"mvei/sample": [1, 2]}}, "non-empty list of unit keys (strings)"),
        ({"emo_tasks_subset": 1, "rows": {"mvei/sample": ["a", "b", "a"]}}, "lists 1 key(s) twice: a"),
        ({"emo_tasks_subset": 1, "rows": {"mvei/sample": ["a"]}, "plan": [1]}, '"plan" must be an object'),
    ],
)
def test_a_malformed_subset_file_is_refused_naming_it(tmp_path: Path, body: dict, says: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(body))
    with pytest.raises(DataError) as err:
        subset.load(path)
    assert says in str(err.value) and str(path) in str(err.value)


def test_a_missing_or_unreadable_subset_file_names_itself(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such subset file"):
        subset.from_env({subset.ENV: str(tmp_path / "absent.json")})
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(DataError, match="unreadable subset file"):
        subset.from_env({subset.ENV: str(tmp_path / "x.json")})
    assert subset.from_env({}) is None and subset.from_env({subset.ENV: " "}) is None


# ------------------------------------------------------------------------------------ load_task keeps rows
def test_each_benchmark_keeps_exactly_the_listed_units_in_data_order(tmp_path: Path) -> None:
    full_env = _env(tmp_path)
    sub = _write(tmp_path / "s.json", {
        "mvei/sample": ["sample-07", "sample-01"],
        "multiemo/sample": ["tie_two"],
        "mme_emotion/sample/ER-Lab": ["1"],
    })  # fmt: skip
    env = _env(tmp_path, sub)
    full = mvei.load_task("mvei/sample", full_env)
    kept = mvei.load_task("mvei/sample", env)
    assert [d["pair_id"] for d in kept] == ["sample-01", "sample-07"]  # the data's order, not the file's
    assert kept == [d for d in full if d["pair_id"] in ("sample-01", "sample-07")]
    images = multiemo.load_task("multiemo/sample", env)
    assert len(images) == 8 and {d["image_id"] for d in images} == {"tie_two"}  # an image's 8 emotion rows
    rows = mme.load_task("mme_emotion/sample/ER-Lab", env)
    assert [d["row"] for d in rows] == [1]
    assert rows[0] == mme.load_task("mme_emotion/sample/ER-Lab", full_env)[1]


def test_a_key_of_other_data_or_a_task_the_subset_lacks_is_an_error_before_inference(tmp_path: Path) -> None:
    sub = _write(tmp_path / "s.json", {"mvei/sample": ["sample-01", "pair-from-elsewhere"]})
    with pytest.raises(DataError) as err:
        mvei.load_task("mvei/sample", _env(tmp_path, sub))
    assert "1 of the 2 keys" in str(err.value) and "pair-from-elsewhere" in str(err.value)
    assert str(sub) in str(err.value)
    with pytest.raises(DataError, match="has no rows for multiemo/sample"):
        multiemo.load_task("multiemo/sample", _env(tmp_path, sub))
    other = _write(tmp_path / "o.json", {"mme_emotion/sample/ER-Lab": ["7"]})  # the sample's ER-Lab has rows 0, 1
    with pytest.raises(DataError, match="name no row of the data"):
        mme.load_task("mme_emotion/sample/ER-Lab", _env(tmp_path, other))


# ------------------------------------------------------------------------------------- record and re-apply
def test_the_record_and_the_stage_reapplying_it(tmp_path: Path) -> None:
    sub = _write(tmp_path / "s.json", {"mme_emotion/sample/ER-Lab": ["0", "1"], "mme_emotion/sample/SA": ["0", "1"]},
                 plan={"power": 0.8})  # fmt: skip
    env = _env(tmp_path, sub)
    rec = subset.record_for("mme_emotion/sample/ER-Lab", env)
    assert rec == {"name": "t", "file": str(sub), "n": 2, "digest": subset.digest(["1", "0"]), "keys": ["0", "1"],
                   "plan": {"power": 0.8}}  # fmt: skip
    assert subset.record_for("mme_emotion/sample/ER-Lab", _env(tmp_path)) is None
    folder = tmp_path / "stage"
    config = {"metadata": {"version": 0.1, subset.RECORD: rec}}
    sa = {"metadata": {subset.RECORD: subset.record_for("mme_emotion/sample/SA", env)}}
    # without EMO_SUBSET the stage writes the recorded keys; two tasks with the same row numbers get two files
    a = subset.stage_env("mme_emotion/sample/ER-Lab", config, _env(tmp_path), folder)[subset.ENV]
    b = subset.stage_env("mme_emotion/sample/SA", sa, _env(tmp_path), folder)[subset.ENV]
    assert a != b
    assert subset.load(a).rows == {"mme_emotion/sample/ER-Lab": ("0", "1")}
    assert subset.stage_env("mme_emotion/sample/ER-Lab", config, env, folder)[subset.ENV] == str(sub)
    other = _write(tmp_path / "o.json", {"mme_emotion/sample/ER-Lab": ["0"]})
    with pytest.raises(subset.SubsetMismatch, match="lists 1 rows"):
        subset.stage_env("mme_emotion/sample/ER-Lab", config, _env(tmp_path, other), folder)
    with pytest.raises(subset.SubsetMismatch, match="the run used the full data"):
        subset.stage_env("mme_emotion/sample/ER-Lab", {"metadata": {"version": 0.1}}, env, folder)
    assert subset.recorded({"metadata": [1]}) is None and subset.recorded({}) is None


# ------------------------------------------------------------------------------------------------ the plan
def test_proportional_allocation_by_largest_remainder() -> None:
    # 10 of 30: exact shares 5.0, 3.333, 1.667 -> 5, 3, 2 (the larger remainder gets the spare row)
    assert plan_gate.allocate({"a": 15, "b": 10, "c": 5}, 10) == {"a": 5, "b": 3, "c": 2}
    # 4 of 9 in three strata of 3: 1.333 each -> one spare row to the first name among equal remainders
    assert plan_gate.allocate({"y": 3, "x": 3, "z": 3}, 4) == {"x": 2, "y": 1, "z": 1}
    assert plan_gate.allocate({"a": 2, "b": 1}, 5) == {"a": 2, "b": 1}  # more than there is: all of it
    assert sum(plan_gate.allocate({str(i): i + 1 for i in range(17)}, 50).values()) == 50


def test_the_draw_is_stratified_and_reproducible() -> None:
    units = [(f"u{i}", "common" if i < 80 else "rare") for i in range(100)]
    first = plan_gate.draw(units, 20, seed=0, task="t")
    assert first == plan_gate.draw(list(reversed(units)), 20, seed=0, task="t")  # order-free, seeded
    assert first != plan_gate.draw(units, 20, seed=1, task="t")
    assert len(first) == 20
    assert sum(1 for u in first if int(u[1:]) >= 80) == 4  # the rare stratum's 20 % of the rows


def test_detectable_drop_inverts_the_planned_size() -> None:
    z = 1.959963984540054 + 0.8416212335729143
    # hand-computed: n 49, sd_0 10, no step: D = z * 10 / 7
    assert power.detectable_drop(49, 10.0) == pytest.approx(z * 10 / 7)
    # with a step: D solves D = z sqrt(sd^2 + s D) / sqrt(n); the rows required for that D are n again
    d = power.detectable_drop(200, 30.0, 50.0)
    assert d == pytest.approx(z * math.sqrt(30.0**2 + 50.0 * d) / math.sqrt(200))
    assert power.required_rows(math.sqrt(30.0**2 + 50.0 * d), d) == 200
    assert power.detectable_drop(200, 0.0, 0.0) == 0.0


def test_detect_specs() -> None:
    assert plan_gate.parse_detect(["2", "srcc=0.02"]) == {None: 2.0, "srcc": 0.02}
    for bad in (["0"], ["x=-1"], ["nan"], ["inf"], ["two"]):
        with pytest.raises(plan_gate.PlanError):
            plan_gate.parse_detect(bad)
    with pytest.raises(plan_gate.PlanError, match="required"):
        plan_gate.parse_detect([])


def test_a_subset_needs_only_its_own_videos(tmp_path: Path) -> None:
    full_env = _env(tmp_path)
    docs = mme.load_task("mme_emotion/sample/ER-Lab", full_env)
    Path(docs[0]["video_path"]).unlink()  # row 0's clip is gone
    with pytest.raises(DataError, match="video"):
        mme.load_task("mme_emotion/sample/ER-Lab", full_env)
    sub = _write(tmp_path / "s.json", {"mme_emotion/sample/ER-Lab": ["1"]})
    assert [d["row"] for d in mme.load_task("mme_emotion/sample/ER-Lab", _env(tmp_path, sub))] == [1]


def test_the_cost_dry_run_reads_the_answers_of_a_judged_result() -> None:
    # `emo-tasks judge` writes RUN/judged/<setup>/<stamp>_results.json; the answers are RUN's
    assert plan_gate.answers_folder("/x/run/judged/j-1/20261201_results.json") == Path("/x/run")
    assert plan_gate.answers_folder("/x/judged/run/judged/j/r_results.json") == Path("/x/judged/run")
    assert plan_gate.answers_folder("/x/run/model/20261201_results.json") == Path("/x/run/model")


def test_every_leaf_task_gets_a_row_then_its_categories_share_them() -> None:
    # 8 tasks of 2 rows, each row its own category, 5 rows asked: one-level allocation over the 16 categories
    # leaves 11 of them (and so at least 3 tasks) empty, and lmms-eval cannot run a task with no rows
    groups = {f"t{i}": {f"t{i}/a": 1, f"t{i}/b": 1} for i in range(8)}
    counts = plan_gate.allocate_in_groups(groups, 5)
    per_task = {g: sum(counts[h] for h in strata) for g, strata in groups.items()}
    assert per_task == {g: 1 for g in groups}  # fewer rows than tasks: one row per task
    # proportional over the tasks first (60 / 30 / 10 rows -> 6 / 3 / 1 of 10), then within each task
    groups = {"big": {"big/x": 40, "big/y": 20}, "mid": {"mid/x": 30}, "small": {"small/x": 5, "small/y": 5}}
    counts = plan_gate.allocate_in_groups(groups, 10)
    assert counts == {"big/x": 4, "big/y": 2, "mid/x": 3, "small/x": 1, "small/y": 0}
    # a task whose proportional share rounds to 0 gets one row, taken from the largest share
    groups = {"a": {"a/x": 97}, "b": {"b/x": 2}, "c": {"c/x": 1}}
    assert plan_gate.allocate_in_groups(groups, 4) == {"a/x": 2, "b/x": 1, "c/x": 1}
    units = [(f"t{i}\0r{j}", f"t{i}/{j}") for i in range(8) for j in range(2)]
    chosen = plan_gate.draw(units, 8, seed=0, task="g", group_of=lambda s: s.split("/", 1)[0])
    assert sorted(k.split("\0")[0] for k in chosen) == [f"t{i}" for i in range(8)]


def test_plan_gate_says_why_a_base_run_has_no_values_to_plan_from() -> None:
    from emo_tasks.results.reader import Run

    def run(results: dict) -> Run:
        return Run(Path("base"), Path("base/r_results.json"), {"results": {"t": results}})

    failed = plan_gate._why_no_values(run({"n_scored,none": 0, "n_judge_failed,none": 16}), "t")
    assert "every judgement of the base run failed (n_judge_failed 16)" in failed
    predict_only = plan_gate._why_no_values(run({"n_scored,none": None, "n_judge_failed,none": None}), "t")
    assert "--predict_only" in predict_only and "failed" not in predict_only
