"""`emo-tasks report RUN... --trend`: checkpoint parsing, ordering and its errors in-process (fast); then three real
lmms-eval runs of the sample tasks, one per "checkpoint", through the real CLI (slow).

The runs are named so that no wrong order passes: `base` (its checkpoint, 50, is only in its model args:
`pretrained=org/emo-step50`, which also makes lmms-eval nest its results in a model folder), `ckpt-1000` and
`ckpt-200`.  By checkpoint: base, ckpt-200, ckpt-1000; by name: base, ckpt-1000, ckpt-200; the command line below
gives ckpt-1000, base, ckpt-200.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import shared_gate_runs
from conftest import API_KEY, cli_env, run_emo, with_mme_sample
from fakes import Judge

from emo_tasks import cli
from emo_tasks.results import reader, trend
from judges.testing import LoopbackServer

GOOD = "Correct. Score: 80. Reason: bright. Answer: anger"  # MVEI 50 %, some Rec-S
MID = "Incorrect. Score: 30. Reason: dim. Answer: joy"  # MVEI 50 %, Rec-S 0
BAD = "Score: 10. Reason: dim."  # no decision: MVEI 0 %
TASKS = "mvei_sample,multiemo_sample,mme_emotion_sample"
#: folder -> model_args
RUNS = {
    "ckpt-1000": f"response={GOOD}",
    "base": f"response={BAD},pretrained=org/emo-step50",
    "ckpt-200": f"response={MID}",
}
GIVEN = ["ckpt-1000", "base", "ckpt-200"]
BY_CHECKPOINT = ["base", "ckpt-200", "ckpt-1000"]
#: (task, metric) checked against the results files: a value in every run, one null everywhere (offline Rea-S)
CHECKED = [("mvei_sample", "acc_total"), ("mme_emotion_sample", "rec_s"), ("multiemo_sample", "cheb")]


# ---------------------------------------------------------------------------------------------- fast: keys
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pretrained=org/model-ckpt-1200", 1200),
        ("pretrained=/ckpts/run3/checkpoint-1200", 1200),
        ("pretrained=/ckpts/step1200", 1200),
        ("pretrained=/ckpts/global_step_1200,dtype=bfloat16", 1200),
        ("pretrained=/megatron/iter_0001200", 1200),
        ("pretrained=/ckpts/CKPT1200", 1200),
        ("pretrained=/ckpts/Checkpoint_7", 7),
        ("pretrained=/runs/step100/checkpoint-300", 300),  # the last one: the innermost folder names the weights
        ("pretrained=Qwen/Qwen2.5-VL-7B-Instruct", None),
        ("pretrained=stepfun-ai/Step-1V-8B", None),  # a model name, not a step: a letter follows the number
        ("pretrained=/ckpts/mystep5", None),  # the word must not end a longer word
        ("pretrained=/ckpts/steps-1000", None),  # `steps` is not one of the words
        ("response=Score: 10. Reason: dim.", None),  # model args are never read for a lone integer
        ("max_pixels=1003520", None),
        ("", None),
        (None, None),
    ],
)
def test_checkpoint_in_model_args(text: str | None, expected: int | None) -> None:
    assert trend.checkpoint_in(text) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ckpt-1200", 1200),
        ("qwen-7b-step500", 500),  # the word wins over the other integers
        ("1200", 1200),
        ("ep3", 3),
        ("run-2-lr3e-5", None),  # several integers, no word: no guess
        ("final", None),
    ],
)
def test_checkpoint_in_folder_name(name: str, expected: int | None) -> None:
    assert trend.checkpoint_in(name, only_integer=True) == expected


def _run(folder: str, model_args: str | None = None, date: object = None, results: dict | None = None,
         stamp: str = "20261201_130501") -> reader.Run:  # fmt: skip
    """A Run as `reader.load_run` builds it, without files (the key functions read only these fields)."""
    path = Path(folder)
    data = {"config": {"model": "m", "model_args": model_args}, "date": date, "results": results or {}}
    return reader.Run(path=path, results_file=path / f"{stamp}_results.json", data=data, label=path.name)


def test_checkpoint_of_prefers_model_args_then_the_run_folder() -> None:
    assert trend.checkpoint_of(_run("runs/ckpt-5", "pretrained=o/m-checkpoint-700")) == 700
    assert trend.checkpoint_of(_run("runs/ckpt-1200", "pretrained=Qwen/Qwen2.5-VL-7B-Instruct")) == 1200
    assert trend.checkpoint_of(_run("runs/1200")) == 1200
    assert trend.checkpoint_of(_run("runs/final", "pretrained=Qwen/Qwen2.5-VL-7B-Instruct")) is None
    # a judged result: the run folder is the one holding judged/, not the judge setup's (whose name has numbers)
    judged = _run("runs/ckpt-300/judged/judge=gpt-4o-2024-11-20,step=gpt-4.1-2025-04-14-0a1b2c3d4e")
    assert trend.run_folder(judged) == Path("runs/ckpt-300")
    assert trend.checkpoint_of(judged) == 300


def test_date_of_stamp_epoch_and_file_name() -> None:
    assert trend.date_of(_run("a", date="20261201_130501")) == "20261201_130501"
    epoch = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()  # 08:00 on lmms-eval's UTC+8 clock
    assert trend.date_of(_run("a", date=epoch)) == "20260101_080000"
    assert trend.date_of(_run("a", date=None, stamp="20261130_101010")) == "20261130_101010"
    assert trend.date_of(_run("a", date="yesterday", stamp="x")) is None
    later = datetime(2026, 1, 1, 0, 0, 1, tzinfo=timezone(timedelta(hours=8))).timestamp()
    assert trend.date_of(_run("a", date=later)) == "20260101_000001"


# ---------------------------------------------------------------------------------------------- fast: order
def _labels(ordering: trend.Ordering) -> list[str]:
    return [r.label for r in ordering.runs]


def test_checkpoint_order_is_numeric_not_by_name_or_given() -> None:
    runs = [_run("runs/ckpt-1000"), _run("runs/ckpt-50"), _run("runs/ckpt-200"), _run("runs/ckpt-9")]
    for how in ("auto", "checkpoint"):
        got = trend.order_runs(runs, how)
        assert got.how == "checkpoint" and got.keys == [9, 50, 200, 1000]
        assert _labels(got) == ["ckpt-9", "ckpt-50", "ckpt-200", "ckpt-1000"]
    assert trend.order_runs(runs, "auto").why.startswith("checkpoint (auto")
    given = trend.order_runs(runs, "given")
    assert _labels(given) == ["ckpt-1000", "ckpt-50", "ckpt-200", "ckpt-9"] and given.keys == [1, 2, 3, 4]


def test_explicit_order_refuses_ties_and_missing_keys_naming_the_run() -> None:
    tied = [_run("runs/ckpt-5"), _run("runs/a", "pretrained=o/m-step5")]
    tie = r"^--trend checkpoint: a \(runs/a\) has the same checkpoint 5 as ckpt-5$"
    with pytest.raises(trend.TrendError, match=tie):
        trend.order_runs(tied, "checkpoint")
    missing = [_run("runs/ckpt-5"), _run("runs/final")]
    with pytest.raises(trend.TrendError, match=r"final \(runs/final\) has no checkpoint number"):
        trend.order_runs(missing, "checkpoint")
    same_day = [_run("runs/x", date="20261201_130501"), _run("runs/y", date="20261201_130501")]
    with pytest.raises(trend.TrendError, match=r"--trend date: y \(runs/y\) has the same date 20261201_130501 as x"):
        trend.order_runs(same_day, "date")
    with pytest.raises(trend.TrendError, match=r"--trend date: z \(runs/z\) has no date"):
        trend.order_runs([_run("runs/x", date="20261201_130501"), _run("runs/z", stamp="z")], "date")
    assert issubclass(trend.TrendError, reader.ReportError)  # the CLI's exit 2


def test_auto_falls_back_to_date_then_given() -> None:
    by_date = [_run("runs/x", date="20261201_130501"), _run("runs/ckpt-5", date="20261130_090000")]
    got = trend.order_runs(by_date, "auto")
    assert got.how == "date" and _labels(got) == ["ckpt-5", "x"] and got.keys == ["20261130_090000", "20261201_130501"]
    assert "no checkpoint order (x (runs/x) has no checkpoint number" in got.why
    tied = [_run("runs/ckpt-5", date="20261201_130501"), _run("runs/b", "pretrained=o/step5", date="20261201_130501")]
    got = trend.order_runs(tied, "auto")
    assert got.how == "given" and _labels(got) == ["ckpt-5", "b"] and "the same date" in got.why


def test_markdown_json_and_plot_show_missing_values_as_na(tmp_path: Path) -> None:
    """A run without the task, one with a null value and one with a value: n/a in the tables, null in the JSON,
    never a crash (values without per-sample files have no CI)."""
    runs = [
        _run("runs/ckpt-1", results={"mvei_sample": {"acc_total,none": None}}),
        _run("runs/ckpt-2", results={"mvei_sample": {"acc_total,none": 37.5}}),
        _run("runs/ckpt-3", results={"multiemo_sample": {"cheb,none": 0.25}}),
    ]
    ordering = trend.order_runs(runs, "auto")
    series = trend.trend_rows(ordering.runs, resamples=50, seed=0)
    assert [s.name for s in series][:1] == ["mvei_sample:acc_total"]
    md = trend.render_trend_markdown(ordering, series)
    assert "| 2 | ckpt-2 | 37.50 | n/a | n/a |" in md  # its value, but the first run has none: no delta
    assert "| 1 | ckpt-1 | n/a | n/a | n/a |" in md
    assert "### MultiEmo-Bench — cheb (multiemo_sample) (lower is better)" in md
    assert "| 3 | ckpt-3 | 0.2500 | n/a | n/a |" in md
    records = trend.trend_json(ordering, series)
    assert [r["key"] for r in records] == [1, 2, 3] and {r["order"] for r in records} == {"checkpoint"}
    assert records[1]["metrics"]["mvei_sample:acc_total"] == {
        "value": 37.5, "ci_low": None, "ci_high": None, "n": None, "delta": None
    }  # fmt: skip
    trend.plot_trend(ordering, series, tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_deltas_are_signed_and_float_noise_is_not_a_drop() -> None:
    runs = [
        _run("runs/ckpt-1", results={"multiemo_sample": {"cosine,none": 0.1 + 0.2}}),
        _run("runs/ckpt-2", results={"multiemo_sample": {"cosine,none": 0.3}}),
        _run("runs/ckpt-3", results={"multiemo_sample": {"cosine,none": 0.25}}),
    ]
    ordering = trend.order_runs(runs, "checkpoint")
    series = [s for s in trend.trend_rows(ordering.runs, 50, 0) if s.metric.name == "cosine"]
    md = trend.render_trend_markdown(ordering, series)
    assert "| 2 | ckpt-2 | 0.3000 | +0.0000 |" in md and "| 3 | ckpt-3 | 0.2500 | -0.0500 |" in md
    assert series[0].points[1].delta == 0.3 - (0.1 + 0.2)  # the JSON keeps the exact difference


def _judged_by(run: reader.Run, judge: str) -> reader.Run:
    """The run as if judged by `judge`: the summaries `compare` and the trend read the judge setup from."""
    run.summaries = {"mvei_sample": {"judge_models": {"judge": judge}}}
    return run


def test_a_change_of_judge_breaks_the_trend_line_and_restarts_delta() -> None:
    """In-process: the change between ckpt-2 and ckpt-3 is refused without allow_mixed (naming both runs and the
    judge models); with it, Δ restarts at ckpt-3 and the plot's value line is two lines, never joined across the
    dashed break."""
    runs = [
        _judged_by(_run(f"runs/ckpt-{i}", results={"mvei_sample": {"acc_total,none": v}}), judge)
        for i, v, judge in ((1, 40.0, "judge-a"), (2, 45.0, "judge-a"), (3, 70.0, "judge-b"), (4, 60.0, "judge-b"))
    ]
    ordering = trend.order_runs(runs, "checkpoint")
    with pytest.raises(trend.TrendError) as refused:
        trend.check_comparable(ordering)
    text = str(refused.value)
    assert "\n" not in text and "ckpt-2 (runs/ckpt-2, checkpoint 2) -> ckpt-3 (runs/ckpt-3, checkpoint 3): " in text
    assert "judges: judge_models {'judge': 'judge-a'} vs {'judge': 'judge-b'} (mvei_sample)" in text
    assert "checkpoint 1)" not in text and "--allow-mixed" in text
    changes, _ = trend.check_comparable(ordering, allow_mixed=True)
    assert [c.index for c in changes] == [2]
    series = trend.trend_rows(ordering.runs, 50, 0, [c.index for c in changes])
    assert [p.delta for p in series[0].points] == [0.0, 5.0, 0.0, -10.0]
    records = trend.trend_json(ordering, series, changes)
    assert [r["segment"] for r in records] == [0, 0, 1, 1] and [r["break"] is None for r in records] == [
        True, True, False, True]  # fmt: skip
    assert records[2]["break"]["differences"] == [
        "judges: judge_models {'judge': 'judge-a'} vs {'judge': 'judge-b'} (mvei_sample)"]  # fmt: skip
    md = trend.render_trend_markdown(ordering, series, changes)
    assert "- break 1, before ckpt-3 (runs/ckpt-3, checkpoint 3): judges: judge_models" in md
    assert [r[0] for r in _trend_table("\n" + md, "MVEI — acc_total (mvei_sample)")] == ["1", "2", "—", "3", "4"]
    assert "| 3 | ckpt-3 | 70.00 | +0.00 |" in md and "| 4 | ckpt-4 | 60.00 | -10.00 |" in md
    import matplotlib.pyplot as plt

    fig = trend.trend_figure(ordering, series, changes)
    ax = fig.axes[0]
    values = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert [list(line.get_xdata()) for line in values] == [[1.0, 2.0], [3.0, 4.0]]
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and list(dashed[0].get_xdata()) == [2.5, 2.5]
    assert any("break 1 (before ckpt-3" in t.get_text() for t in fig.texts)
    plt.close(fig)
    # without changes: one line through every run, as before
    fig = trend.trend_figure(ordering, trend.trend_rows(ordering.runs, 50, 0))
    assert [list(x.get_xdata()) for x in fig.axes[0].get_lines() if x.get_marker() == "o"] == [[1.0, 2.0, 3.0, 4.0]]
    plt.close(fig)


def test_a_judge_change_a_calibration_carries_is_marked_and_adjusted_not_a_break(tmp_path: Path) -> None:
    """In-process: with a calibration of judge-a -> judge-b, the change before ckpt-3 is no break: values after it
    are shown as judged and adjusted by the shift (Δ the adjusted value's, never restarting), the figure marks it and
    continues the line with the adjusted values; a calibration of other judges leaves it refused, saying why."""
    from emo_tasks.results.calibration import Shift, calibration_document, load_calibration

    def calibration(name: str, candidate: str, shift: float = 20.0) -> object:
        doc = calibration_document(
            {"identity": {"judge_models": {"judge": "judge-a"}}, "runs": []},
            {"identity": {"judge_models": {"judge": candidate}}, "runs": []},
            [Shift("mvei", "mvei_sample", "acc_total", 16, shift, shift - 4.0, shift + 4.0, 1.0, False)],
            tolerance={"default": 1.0}, rule="r", level=0.95, created="now",
        )  # fmt: skip
        (tmp_path / name).write_text(json.dumps(doc))
        return load_calibration(tmp_path / name)

    runs = [
        _judged_by(_run(f"runs/ckpt-{i}", results={"mvei_sample": {"acc_total,none": v}}), judge)
        for i, v, judge in ((1, 40.0, "judge-a"), (2, 45.0, "judge-a"), (3, 70.0, "judge-b"), (4, 60.0, "judge-b"))
    ]
    ordering = trend.order_runs(runs, "checkpoint")
    cal = calibration("c.json", "judge-b")
    changes, _ = trend.check_comparable(ordering, calibration=cal)
    assert [(c.index, c.is_break) for c in changes] == [(2, False)]
    series = trend.trend_rows(ordering.runs, 50, 0, [], changes)
    points = series[0].points
    assert [p.cell.value for p in points] == [40.0, 45.0, 70.0, 60.0]  # as judged
    assert [p.adjusted.value if p.adjusted else None for p in points] == [None, None, 50.0, 40.0]
    assert [p.delta for p in points] == [0.0, 5.0, 10.0, 0.0]  # the adjusted value's, from the first run
    md = trend.render_trend_markdown(ordering, series, changes)
    assert f"**Judge change (--calibration {tmp_path / 'c.json'}):** before ckpt-3" in md and "break" not in md
    assert "| 3 | ckpt-3 | 70.00 | 50.00 [" in md and "| +10.00 |" in md
    records = trend.trend_json(ordering, series, changes)
    assert [r["segment"] for r in records] == [0, 0, 0, 0] and records[2]["judge_change"]["calibration"].endswith(
        "c.json"
    )
    assert records[3]["metrics"]["mvei_sample:acc_total"]["shift"] == 20.0
    import matplotlib.pyplot as plt

    fig = trend.trend_figure(ordering, series, changes)
    lines = fig.axes[0].get_lines()
    assert [list(x.get_xdata()) for x in lines if x.get_marker() == "o"] == [[1.0, 2.0], [3.0, 4.0]]
    adjusted = [x for x in lines if x.get_marker() == "s"]
    assert len(adjusted) == 1 and list(adjusted[0].get_ydata()) == [45.0, 50.0, 40.0]
    assert [list(x.get_xdata()) for x in lines if x.get_linestyle() == ":"] == [[2.5, 2.5]]
    # every line of the title and the footnotes fits the one-panel figure (the title's legend was cut at both edges)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    width = fig.get_window_extent(renderer).width
    texts = [fig._suptitle, *fig.texts]  # type: ignore[attr-defined]
    assert len(texts) >= 3 and any("judge change (before ckpt-3" in t.get_text() for t in fig.texts)
    for text in texts:
        box = text.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= width, (text.get_text(), box.x0, box.x1, width)
    plt.close(fig)
    # a calibration of another candidate judge does not carry it: still refused, saying why
    with pytest.raises(trend.TrendError, match=r"the candidate judge \(the later run's\) differs in judge_models"):
        trend.check_comparable(ordering, calibration=calibration("other.json", "judge-c"))


def _calibration_file(path: Path, reference: str, candidate: str, shift: float, half: float) -> object:
    """A calibration of judge `reference` -> `candidate` on mvei_sample acc_total: `shift` +- `half` (95 %)."""
    from emo_tasks.results.calibration import Shift, calibration_document, load_calibration

    doc = calibration_document(
        {"identity": {"judge_models": {"judge": reference}}, "runs": []},
        {"identity": {"judge_models": {"judge": candidate}}, "runs": []},
        [Shift("mvei", "mvei_sample", "acc_total", 16, shift, shift - half, shift + half, 1.0, False)],
        tolerance={"default": 1.0}, rule="r", level=0.95, created="now",
    )  # fmt: skip
    path.write_text(json.dumps(doc))
    return load_calibration(path)


def _chain_runs(judges: list[str], values: list[float]) -> trend.Ordering:
    runs = [_judged_by(_run(f"runs/ckpt-{i}", results={"mvei_sample": {"acc_total,none": v}}), judge)
            for i, (v, judge) in enumerate(zip(values, judges, strict=True), 1)]  # fmt: skip
    return trend.order_runs(runs, "checkpoint")


def test_a_chain_of_judge_changes_is_carried_by_one_calibration_each_shifts_added(tmp_path: Path) -> None:
    """Issue 42 item 8: judges a, a, b, c, c with calibrations a->b (+20 +-4) and b->c (+15 +-3): each change is
    carried by its own file (given in any order); after the second the shifts add (+35) and the CIs combine in
    quadrature (+-5): the values stay on judge a's scale and Δ never restarts."""
    ab = _calibration_file(tmp_path / "ab.json", "judge-a", "judge-b", 20.0, 4.0)
    bc = _calibration_file(tmp_path / "bc.json", "judge-b", "judge-c", 15.0, 3.0)
    ordering = _chain_runs(["judge-a", "judge-a", "judge-b", "judge-c", "judge-c"], [40.0, 45.0, 70.0, 90.0, 80.0])
    for given in ([ab, bc], [bc, ab]):
        changes, notes = trend.check_comparable(ordering, calibration=given)
        assert [(c.index, c.is_break, c.calibration) for c in changes] == [(2, False, ab), (3, False, bc)]
        assert not [n for n in notes if "--calibration" in n]
        points = trend.trend_rows(ordering.runs, 50, 0, [], changes)[0].points
        assert [p.shift for p in points] == [None, None, 20.0, 35.0, 35.0]
        assert [p.adjusted.value if p.adjusted else None for p in points] == [None, None, 50.0, 55.0, 45.0]
        assert [p.delta for p in points] == [0.0, 5.0, 10.0, 15.0, 5.0]
        assert points[3].adjusted.ci_high - points[3].adjusted.value == pytest.approx(5.0, abs=0.01)
    records = trend.trend_json(ordering, trend.trend_rows(ordering.runs, 50, 0, [], changes), changes)
    assert [r["judge_change"]["calibration"] if r["judge_change"] else None for r in records] == [
        None, None, str(tmp_path / "ab.json"), str(tmp_path / "bc.json"), None]  # fmt: skip
    # with a->b alone, the change to c is not carried: refused, saying why for that change only
    with pytest.raises(trend.TrendError) as refused:
        trend.check_comparable(ordering, calibration=[ab])
    assert "ckpt-3 (runs/ckpt-3, checkpoint 3) -> ckpt-4" in str(refused.value)
    assert "ckpt-2 (runs/ckpt-2, checkpoint 2) -> ckpt-3" not in str(refused.value)
    # two files carrying one change: which one would be silent, so refused
    again = _calibration_file(tmp_path / "ab2.json", "judge-a", "judge-b", 25.0, 4.0)
    with pytest.raises(trend.TrendError, match=r"before ckpt-3 .* is carried by 2 files .*ab\.json, .*ab2\.json"):
        trend.check_comparable(ordering, calibration=[ab, bc, again])
    # a file that carries nothing is said
    cd = _calibration_file(tmp_path / "cd.json", "judge-c", "judge-d", 1.0, 1.0)
    _, notes = trend.check_comparable(ordering, calibration=[ab, bc, cd])
    assert [n for n in notes if "--calibration" in n] == [
        f"--calibration {tmp_path / 'cd.json'} carries no judge change of this trend"]  # fmt: skip


def test_a_chain_back_to_the_first_judge_needs_no_shift(tmp_path: Path) -> None:
    """a -> b -> a: after the return the values are judge a's own, as judged; Δ from the first run, no shift."""
    ab = _calibration_file(tmp_path / "ab.json", "judge-a", "judge-b", 20.0, 4.0)
    ba = _calibration_file(tmp_path / "ba.json", "judge-b", "judge-a", -18.0, 4.0)
    ordering = _chain_runs(["judge-a", "judge-b", "judge-a"], [40.0, 62.0, 44.0])
    changes, _ = trend.check_comparable(ordering, calibration=[ab, ba])
    assert [c.calibration for c in changes] == [ab, ba]
    points = trend.trend_rows(ordering.runs, 50, 0, [], changes)[0].points
    assert [p.shift for p in points] == [None, 20.0, None]
    assert [p.delta for p in points] == [0.0, 2.0, 4.0]


# ---------------------------------------------------------------------------------------------- fast: CLI
def _results_dir(root: Path, name: str, model_args: str, date: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    data = {
        "results": {"mvei_sample": {"acc_total,none": 50.0}},
        "config": {"model": "dummy", "model_args": model_args},
        "date": date,
    }
    (folder / f"{date}_results.json").write_text(json.dumps(data))
    return folder


def test_cli_refuses_csv_and_a_tie_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _results_dir(tmp_path, "ckpt-7", "response=x", "20261201_130501")
    b = _results_dir(tmp_path, "other", "response=y,pretrained=o/m-step7", "20261201_130502")
    assert cli.main(["report", str(a), str(b), "--format", "csv", "--trend"]) == 2
    err = capsys.readouterr().err
    assert err == "emo-tasks report: --trend is not available with --format csv (use md or json)\n"
    assert cli.main(["report", str(a), str(b), "--trend", "checkpoint"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has the same checkpoint 7 as" in err and str(b) in err
    # auto: the tie sends it to the dates, which differ
    assert cli.main(["report", str(b), str(a), "--trend", "--format", "json"]) == 0
    captured = capsys.readouterr()
    labels = [r["label"] for r in json.loads(captured.out)["trend"]]
    assert labels == ["dummy (response=x)", "dummy (response=y,pretrained=o/m-step7)"]
    assert "trend order: date (auto: no checkpoint order" in captured.err


def test_help_explains_trend(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--trend [{auto,checkpoint,date,given}]" in text
    for words in ("ckpt/checkpoint/step/iter", "auto (the default)", "not with csv", "exit 2"):
        assert words in text


# ---------------------------------------------------------------------------------------------- slow: real runs
def emo(*args: str, cache: Path) -> subprocess.CompletedProcess:
    return run_emo(cli_env(cache), *args, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three real lmms-eval runs (in parallel) with --log_samples, one folder each.  "ckpt-1000" is test_report_cli's
    "good" too (`shared_gate_runs.good_offline_run`, built once per session, in a folder of that name; read-only: the
    tests copy it before they change it)."""
    assert RUNS["ckpt-1000"] == f"response={shared_gate_runs.GOOD}" and TASKS == shared_gate_runs.TASKS
    root = tmp_path_factory.mktemp("trend_runs")
    procs = {}
    for name, model_args in RUNS.items():
        if name == "ckpt-1000":
            continue
        cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", model_args, "--tasks", TASKS,
               "--output_path", str(root / name), "--log_samples"]  # fmt: skip
        procs[name] = subprocess.Popen(cmd, env=cli_env(with_mme_sample(root / f"cache_{name}")),
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    shared = shared_gate_runs.good_offline_run(tmp_path_factory)  # while the two others run
    for proc in procs.values():
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-3000:]
    return {**{name: root / name for name in RUNS}, "ckpt-1000": shared, "cache": root / "cache_report"}


def _results_of(run: Path) -> dict:
    (path,) = run.rglob("*_results.json")
    return json.loads(path.read_text())["results"]


def _value(run: Path, task: str, metric: str) -> float | None:
    return _results_of(run)[task].get(f"{metric},none")


def _png_ok(path: Path) -> None:
    from PIL import Image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
    with Image.open(path) as img:
        img.verify()
    with Image.open(path) as img:
        assert img.size[0] >= 1000 and img.size[1] >= 600


def _trend_table(md: str, title: str) -> list[list[str]]:
    """The rows of one Trend table, cells stripped."""
    section = md.split("\n## Trend\n", 1)[1]
    block = section.split(f"### {title}\n", 1)[1].strip().split("\n\n", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()[2:]]


@pytest.mark.slow
def test_trend_orders_by_checkpoint_md_and_plot(runs: dict[str, Path], tmp_path: Path) -> None:
    md, png = tmp_path / "trend.md", tmp_path / "trend.png"
    res = emo("report", *(str(runs[n]) for n in GIVEN), "--trend", "--out", str(md), "--plot", str(png),
              "--resamples", "200", cache=runs["cache"])  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "emo-tasks report: trend order: checkpoint (auto: every run has a distinct checkpoint)" in res.stderr
    keys = re.findall(r"^emo-tasks report: trend checkpoint (\d+): ", res.stderr, flags=re.M)
    assert keys == ["50", "200", "1000"]
    text = md.read_text()
    assert text.index("## MVEI") < text.index("## Trend")  # the usual tables first, in trend order
    rows = _trend_table(text, "MVEI — acc_total (mvei_sample)")
    assert [r[0] for r in rows] == ["50", "200", "1000"]
    assert [r[4] for r in rows] == ["16", "16", "16"]
    for title, task, metric, digits in (
        ("MVEI — acc_total (mvei_sample)", "mvei_sample", "acc_total", 2),
        ("MME-Emotion — Rec-S (mme_emotion_sample)", "mme_emotion_sample", "rec_s", 2),
        ("MultiEmo-Bench — cheb (multiemo_sample) (lower is better)", "multiemo_sample", "cheb", 4),
    ):
        rows = _trend_table(text, title)
        values = [_value(runs[n], task, metric) for n in BY_CHECKPOINT]
        for row, value in zip(rows, values, strict=True):
            assert row[2].startswith(f"{value:.{digits}f} ["), (title, row)  # value with its CI
            delta = value - values[0]
            assert row[3] == f"{0.0 if round(delta, digits) == 0 else delta:+.{digits}f}", (title, row)
    assert [r[2] for r in _trend_table(text, "MME-Emotion — Rea-S (mme_emotion_sample)")] == ["n/a"] * 3
    _png_ok(png)


@pytest.mark.slow
def test_trend_json_checkpoint_and_given_order(runs: dict[str, Path]) -> None:
    res = emo("report", *(str(runs[n]) for n in GIVEN), "--trend", "--format", "json", "--resamples", "200",
              cache=runs["cache"])  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    records = doc["trend"]
    assert [r["key"] for r in records] == [50, 200, 1000] and {r["order"] for r in records} == {"checkpoint"}
    assert [Path(r["run_dir"]).name for r in records] == BY_CHECKPOINT
    assert [r["label"] for r in records] == [r["label"] for r in doc["runs"]]  # the leaderboard in the same order
    for task, metric in CHECKED:
        values = [_value(runs[n], task, metric) for n in BY_CHECKPOINT]
        for rec, value in zip(records, values, strict=True):
            got = rec["metrics"][f"{task}:{metric}"]
            assert got["value"] == value and got["delta"] == value - values[0], (task, metric, rec["label"])
            assert got["ci_low"] <= got["value"] <= got["ci_high"]
    assert {r["metrics"]["mme_emotion_sample:rea_s"]["delta"] for r in records} == {None}
    assert set(records[0]["metrics"]) >= {"mme_emotion_sample:cot_s", "multiemo_sample:precision_ours"}

    res = emo("report", *(str(runs[n]) for n in GIVEN), "--trend", "given", "--format", "json", "--resamples", "200",
              cache=runs["cache"])  # fmt: skip
    assert res.returncode == 0, res.stderr
    records = json.loads(res.stdout)["trend"]
    assert [Path(r["run_dir"]).name for r in records] == GIVEN and [r["key"] for r in records] == [1, 2, 3]
    first = _value(runs[GIVEN[0]], "multiemo_sample", "cheb")
    for rec, name in zip(records, GIVEN, strict=True):
        assert rec["metrics"]["multiemo_sample:cheb"]["delta"] == _value(runs[name], "multiemo_sample", "cheb") - first


def _set_date(run: Path, date: object) -> None:
    (path,) = run.rglob("*_results.json")
    data = json.loads(path.read_text())
    data["date"] = date
    path.write_text(json.dumps(data))


@pytest.mark.slow
def test_trend_by_date_when_no_checkpoint(runs: dict[str, Path], tmp_path: Path) -> None:
    """Folders without a checkpoint number: auto orders by date (a stamp, and an older file's epoch number);
    asking for checkpoints is refused naming the run; a date tie under `--trend date` too."""
    x = shutil.copytree(runs["ckpt-1000"], tmp_path / "x")
    y = shutil.copytree(runs["ckpt-200"], tmp_path / "y")
    _set_date(x, "20261201_130501")
    _set_date(y, datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp())
    png = tmp_path / "dates.png"
    res = emo("report", str(x), str(y), "--trend", "--format", "json", "--plot", str(png), "--resamples", "100",
              cache=runs["cache"])  # fmt: skip
    assert res.returncode == 0, res.stderr
    records = json.loads(res.stdout)["trend"]
    assert [Path(r["run_dir"]).name for r in records] == ["y", "x"]
    assert [r["key"] for r in records] == ["20260101_080000", "20261201_130501"] and records[0]["order"] == "date"
    assert "trend order: date (auto: no checkpoint order" in res.stderr
    _png_ok(png)

    res = emo("report", str(x), str(y), "--trend", "checkpoint", cache=runs["cache"])
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and f"({x}) has no checkpoint number" in res.stderr, res.stderr
    _set_date(y, "20261201_130501")
    res = emo("report", str(x), str(y), "--trend", "date", cache=runs["cache"])
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and f"({y}) has the same date" in res.stderr


# ---------------------------------------------------------------------------------------------- slow: mixed runs
#: which judge `emo-tasks judge --judge-model` scores each run with: ckpt-1000 changes it
JUDGES = {"base": "judge-a", "ckpt-200": "judge-a", "ckpt-1000": "judge-b"}


@pytest.fixture(scope="module")
def judged(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Copies of the three runs, each judged by `emo-tasks judge` against the loopback judge with the model of
    JUDGES (ratings depend on the judge model): RUN/judged/<setup>/, the result each command then reads."""
    root = tmp_path_factory.mktemp("trend_judged")
    cache = with_mme_sample(root / "cache")
    with LoopbackServer(responder=Judge(per_model=True), expected_api_key=API_KEY) as srv:
        for name, judge in JUDGES.items():
            shutil.copytree(runs[name], root / name)
            done = run_emo(cli_env(cache, srv), "judge", str(root / name), "--judge-model", judge, timeout=600)
            assert done.returncode == 0, done.stderr[-3000:]
    return {**{name: root / name for name in JUDGES}, "cache": cache}


def _judged_results(run: Path) -> dict:
    (path,) = run.glob("judged/*/*_results.json")
    return json.loads(path.read_text())["results"]


@pytest.mark.slow
def test_a_trend_across_judge_setups_is_refused_as_compare_refuses_it(judged: dict[str, Path]) -> None:
    order = [str(judged[n]) for n in ("ckpt-1000", "base", "ckpt-200")]
    res = emo("report", *order, "--trend", cache=judged["cache"])
    assert res.returncode == 2 and res.stdout == "", res.stdout + res.stderr
    assert res.stderr.count("\n") == 1, res.stderr
    line = res.stderr
    assert f"({judged['ckpt-200']}, checkpoint 200) -> " in line
    assert f"({judged['ckpt-1000']}, checkpoint 1000): " in line
    assert "checkpoint 50)" not in line  # base and ckpt-200 share a judge: no change there
    assert "judges: judge_models" in line and "'judge-a'" in line and "'judge-b'" in line and "--allow-mixed" in line
    for fmt in ("json", "md"):  # every format, and with an explicit order
        again = emo("report", *order, "--trend", "checkpoint", "--format", fmt, cache=judged["cache"])
        assert again.returncode == 2 and again.stderr == line
    gate = emo("compare", str(judged["ckpt-200"]), str(judged["ckpt-1000"]), cache=judged["cache"])
    assert gate.returncode == 2 and "judges: mme_emotion_sample_" in gate.stderr and "judge_models" in gate.stderr
    same = emo("report", str(judged["base"]), str(judged["ckpt-200"]), "--trend", cache=judged["cache"])
    assert same.returncode == 0 and "break" not in same.stdout, same.stderr


@pytest.mark.slow
def test_allow_mixed_draws_the_trend_with_a_break_and_a_note(judged: dict[str, Path], tmp_path: Path) -> None:
    order = [str(judged[n]) for n in ("ckpt-1000", "base", "ckpt-200")]
    png = tmp_path / "mixed.png"
    res = emo("report", *order, "--trend", "--allow-mixed", "--format", "json", "--plot", str(png),
              "--resamples", "100", cache=judged["cache"])  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "trend break 1 (--allow-mixed) before " in res.stderr and "judges: judge_models" in res.stderr
    records = json.loads(res.stdout)["trend"]
    assert [Path(r["run_dir"]).parent.parent.name for r in records] == BY_CHECKPOINT
    assert [r["segment"] for r in records] == [0, 0, 1] and records[0]["break"] is None is records[1]["break"]
    assert any(d.startswith("judges: judge_models") for d in records[2]["break"]["differences"])
    for task, metric in (("mme_emotion_sample", "rec_s"), ("mme_emotion_sample", "rea_s"), ("mvei_sample", "acc_total"),
                         ("multiemo_sample", "cheb")):  # fmt: skip
        values = [_judged_results(judged[n])[task][f"{metric},none"] for n in BY_CHECKPOINT]
        got = [r["metrics"][f"{task}:{metric}"] for r in records]
        assert [g["value"] for g in got] == values, (task, metric)
        # delta restarts at the break: ckpt-1000 is measured from itself, not from base (another judge)
        assert [g["delta"] for g in got] == [0, values[1] - values[0], 0], (task, metric)
    _png_ok(png)
    md = emo("report", *order, "--trend", "--allow-mixed", "--resamples", "100", cache=judged["cache"]).stdout
    assert "**Not comparable (--allow-mixed):** the trend breaks 1 time(s)" in md
    assert f"- break 1, before dummy (response={GOOD}) ({judged['ckpt-1000']}, checkpoint 1000): judges: " in md
    rows = _trend_table(md, "MVEI — acc_total (mvei_sample)")
    assert [r[0] for r in rows] == ["50", "200", "—", "1000"] and rows[2][1].startswith("**break 1**")


@pytest.mark.slow
def test_a_trend_across_data_versions_is_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    """A checkpoint run on other data (its MVEI sample log's targets: another row content, so another data hash)
    between two on the same data: refused naming it; --allow-mixed breaks the trend twice (to it, and back)."""
    other = shutil.copytree(runs["ckpt-200"], tmp_path / "ckpt-300")
    log = next(other.rglob("*_samples_mvei_sample.jsonl"))
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    lines[3]["target"] = lines[3]["target"].split(" #")[0] + " #" + "0" * 12
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    args = [str(runs["base"]), str(other), str(runs["ckpt-1000"])]
    res = emo("report", *args, "--trend", cache=runs["cache"])
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"({other}, checkpoint 300): data: another data hash" in res.stderr and "(mvei_sample)" in res.stderr
    assert f"({other}, checkpoint 300) -> " in res.stderr  # and back to the data of the others
    gate = emo("compare", str(runs["base"]), str(other), cache=runs["cache"])
    assert gate.returncode == 2 and "data: mvei_sample used different data (data hash" in gate.stderr
    mixed = emo("report", *args, "--trend", "--allow-mixed", "--format", "json", "--resamples", "50",
                cache=runs["cache"])  # fmt: skip
    assert mixed.returncode == 0, mixed.stderr
    assert [r["segment"] for r in json.loads(mixed.stdout)["trend"]] == [0, 1, 2]
