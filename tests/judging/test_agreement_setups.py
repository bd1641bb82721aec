"""`emo-tasks agreement RUN_A RUN_B` names the judge setup each side read, refuses a side that mixes setups, warns
when both sides are the same judge, gives no confidence interval from one pair, and fails with one line.

Why: a judge-vs-judge number is only meaningful when each side is one judge and the reader can see which one; a
bootstrap over a single pair yields a zero-width CI and a "significant" p that mean nothing.  The judged folders
are built the way `emo-tasks judge` writes them (`RUN/judged/<slug>/emo_tasks_judge/` logs with full summaries);
the folder names are deliberately uninformative or misleading, since the setup must come from the summaries.
Every scenario runs in-process (fast tier) and through `python -m emo_tasks` (slow tier).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import env_without_secrets
from test_judge_agreement import ANSWER, DATA, ER_LAB, FAILED, LEAF, SA, _log_row

from emo_tasks import cli
from emo_tasks.judging import agreement_report
from emo_tasks.mme_emotion.agreement import SETUP_FIELDS

GPT = {
    "judge_models": {"step": "gpt-4o", "judge": "gpt-4o"},
    "judge_protocol": "paper",
    "alpha": 0.5,
    "audio_clues": "released",
    "judge_endpoint": "api.openai.com",
    "judge_mode": "api",
    "api_models": {"step": {"gpt-4o-2024-11-20": 9}, "judge": {"gpt-4o-2024-11-20": 9}},
}
QWEN = {
    **GPT,
    "judge_models": {"step": "gpt-4o", "judge": "Qwen2.5-VL-72B"},
    "judge_endpoint": "gpu-node:8000",
    "api_models": {"step": {"gpt-4o-2024-11-20": 9}, "judge": {"Qwen/Qwen2.5-VL-72B-Instruct": 9}},
}


def write_judged(
    folder: Path, side: int, stamp: str, setup: dict | None, data: dict = DATA, emotion: str = "happy"
) -> Path:
    """One judged result as the judge stage writes it: per task a judge log (side 0 = A's ratings of `data`,
    1 = B's; every answer naming `emotion`) and, unless `setup` is None, a summary recording that setup."""
    logs = folder / "emo_tasks_judge"
    logs.mkdir(parents=True, exist_ok=True)
    for leaf in sorted({LEAF[k] for k, _ in data}):
        rows = [
            _log_row(key, row, pair[side], ANSWER.format(emotion))
            for (key, row), pair in data.items()
            if LEAF[key] == leaf and pair[side] is not None
        ]
        (logs / f"{leaf}_{stamp}_judge.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        if setup is not None:
            summary = {"benchmark": "MME-Emotion", "tasks": [leaf], "data_source": "released", **setup}
            (logs / f"{leaf}_{stamp}_summary.json").write_text(json.dumps(summary, indent=2))
    return folder


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return self.err.splitlines()


@pytest.fixture(params=["in_process", pytest.param("subprocess", marks=pytest.mark.slow)])
def agreement_cli(request: pytest.FixtureRequest, capsys: pytest.CaptureFixture, tmp_path: Path) -> Callable:
    """`emo-tasks agreement ARGS...` in this process (cli.main) or as the real console command."""

    def run(*args: object) -> Result:
        argv = ["agreement", *map(str, args)]
        if request.param == "in_process":
            code = cli.main(argv)
            out, err = capsys.readouterr()
            return Result(code, out, err)
        env = {**env_without_secrets(), "EMO_CACHE_DIR": str(tmp_path / "cache"), "EMO_PROGRESS": "0",
               "PYTHONIOENCODING": "utf-8"}  # fmt: skip
        res = subprocess.run([sys.executable, "-m", "emo_tasks", *argv], env=env, capture_output=True,
                             encoding="utf-8", timeout=120)  # fmt: skip
        return Result(res.returncode, res.stdout, res.stderr)

    return run


# ----------------------------------------------------------------------------------------- 1. name the setups
def test_each_side_states_the_setup_it_read(tmp_path: Path, agreement_cli: Callable) -> None:
    """The folder names say nothing (or lie): A's slug reads like Qwen, B's like GPT; the report follows the
    summaries."""
    a = write_judged(tmp_path / "run" / "judged" / "qwen-0f0f0f0f", 0, "20250301T120000", GPT)
    b = write_judged(tmp_path / "run" / "judged" / "gpt-4o-1a1a1a1a", 1, "20250302T120000", QWEN)
    res = agreement_cli(a, b, "--format", "json", "--resamples", "200")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["schema"] == "emo-tasks/judge-agreement/1" and doc["same_setup"] is False
    for side, setup, folder in (("a", GPT, a), ("b", QWEN, b)):
        got = doc["runs"][side]["setup"]
        assert {k: got[k] for k in SETUP_FIELDS} == {k: setup[k] for k in SETUP_FIELDS}
        assert got["api_models"] == {role: sorted(ids) for role, ids in setup["api_models"].items()}
        assert got["differs"] == []
        summaries = doc["runs"][side]["summaries"]
        assert set(summaries) == {ER_LAB, SA}
        assert all(Path(summaries[t]).parent == folder / "emo_tasks_judge" for t in summaries)
        assert all(Path(summaries[t]).name.endswith("_summary.json") for t in summaries)
    assert "warning" not in res.err

    res = agreement_cli(a, b, "--resamples", "200")
    assert res.code == 0, res.err
    header = res.out.split("\n\n", 1)[0].splitlines()
    assert header[0].startswith(f"A: {a}  (") and header[2].startswith(f"B: {b}  (")
    assert header[1] == (
        "   judge setup: judge models: step gpt-4o, judge gpt-4o; protocol: paper; alpha: 0.5; audio clues: "
        "released; endpoint: api.openai.com; judge mode: api; API reported: judge gpt-4o-2024-11-20; step "
        "gpt-4o-2024-11-20"
    )
    assert "judge models: step gpt-4o, judge Qwen2.5-VL-72B;" in header[3] and "endpoint: gpu-node:8000;" in header[3]
    assert "API reported: judge Qwen/Qwen2.5-VL-72B-Instruct; step gpt-4o-2024-11-20" in header[3]
    for side, folder, stamp in (("A", a, "20250301T120000"), ("B", b, "20250302T120000")):
        for task in (ER_LAB, SA):
            assert f"  {side} {task}: {folder / 'emo_tasks_judge' / f'{task}_{stamp}_judge.jsonl'}" in res.out


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"judge_models": {"step": "gpt-4o", "judge": "Qwen2.5-VL-72B"}}, "judge models step gpt-4o, judge gpt-4o"),
        ({"judge_protocol": "strict"}, "protocol paper (ER-Lab) vs strict (SA)"),
        ({"alpha": 0.7}, "alpha 0.5 (ER-Lab) vs 0.7 (SA)"),
        ({"judge_endpoint": "gpu-node:8000"}, "endpoint api.openai.com (ER-Lab) vs gpu-node:8000 (SA)"),
        ({"judge_mode": "offline"}, "judge mode api (ER-Lab) vs offline (SA)"),
    ],
    ids=["models", "protocol", "alpha", "endpoint", "mode"],
)
def test_a_side_mixing_setups_is_refused(tmp_path: Path, change: dict, named: str, agreement_cli: Callable) -> None:
    """One folder whose newest ER-Lab log is one judge's and newest SA log another's (a later rerun of SA):
    exit 2, one line naming the differing setups and asking for one judged folder per side."""
    run = tmp_path / "run"
    er_lab = {k: v for k, v in DATA.items() if k[0] == "ER-Lab"}
    sa = {k: v for k, v in DATA.items() if k[0] == "SA"}
    write_judged(run, 0, "20250301T120000", GPT, er_lab)
    write_judged(run, 0, "20250305T120000", {**GPT, **change}, sa)
    other = write_judged(tmp_path / "other", 1, "20250302T120000", QWEN)
    for argv, side in (((run, other), "A"), ((other, run), "B")):
        res = agreement_cli(*argv, "--format", "json")
        assert res.code == 2, res.err
        assert res.out == "" and len(res.err_lines) == 1, res.err
        line = res.err_lines[0]
        assert line.startswith(f"emo-tasks agreement: {side}: the judge logs read from {run} come from more than one ")
        assert named in line and "(ER-Lab)" in line and "(SA)" in line
        assert "pass one judged folder per side (RUN/judged/<one>)" in line


def test_a_field_one_summary_does_not_record_is_not_a_difference(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """An older summary without `judge_endpoint`, or a log without a summary, is unknown, not another judge."""
    run = tmp_path / "run"
    write_judged(run, 0, "20250301T120000", GPT, {k: v for k, v in DATA.items() if k[0] == "ER-Lab"})
    older = {k: v for k, v in GPT.items() if k not in ("judge_endpoint", "api_models")}
    write_judged(run, 0, "20250301T120000", older, {k: v for k, v in DATA.items() if k[0] == "SA"})
    bare = write_judged(tmp_path / "bare", 1, "20250302T120000", None)
    code = cli.main(["agreement", str(run), str(bare), "--format", "json", "--resamples", "100"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["runs"]["a"]["setup"]["judge_endpoint"] == "api.openai.com" and not doc["runs"]["a"]["setup"]["differs"]
    assert doc["runs"]["b"]["setup"] == {**dict.fromkeys(SETUP_FIELDS), "api_models": None, "differs": []}
    assert doc["runs"]["b"]["summaries"] == {ER_LAB: None, SA: None} and doc["same_setup"] is False


def test_the_same_setup_on_both_sides_warns(tmp_path: Path, agreement_cli: Callable) -> None:
    """Same models, protocol, alpha, clues, endpoint and mode: reported (exit 0) with one warning line; a
    different endpoint or alpha is another setup and gets no warning."""
    a = write_judged(tmp_path / "judged" / "x", 0, "20250301T120000", GPT)
    b = write_judged(tmp_path / "judged" / "y", 1, "20250302T120000", GPT)
    res = agreement_cli(a, b, "--format", "json", "--resamples", "100")
    assert res.code == 0, res.err
    assert json.loads(res.out)["same_setup"] is True
    warnings = [line for line in res.err_lines if "warning" in line]
    assert len(warnings) == 1 and warnings[0].startswith("emo-tasks agreement: warning: A and B record the same")
    assert "judge models: step gpt-4o, judge gpt-4o" in warnings[0] and "nondeterminism" in warnings[0]
    res = agreement_cli(a, b, "--resamples", "100")
    assert res.code == 0 and "A and B record the same judge setup" in res.out
    for change in ({"judge_endpoint": "azure.example.net"}, {"alpha": 0.7}):
        c = write_judged(tmp_path / "judged" / f"z{len(change)}{next(iter(change))}", 1, "20250303T120000",
                         {**GPT, **change})  # fmt: skip
        res = agreement_cli(a, c, "--format", "json", "--resamples", "100")
        assert res.code == 0 and "warning" not in res.err and json.loads(res.out)["same_setup"] is False, change


# ------------------------------------------------------------------------------------------- 2. no fake CI
ONE_PAIR_SA = {
    ("ER-Lab", 0): ([[1, 1], [1, 1]], [[1, 1], [0, 1]]),
    ("ER-Lab", 1): ([[0, 1], [1, 1]], [[1, 1], [1, 1]]),
    ("ER-Lab", 2): ([[1, 1], [0, 1]], [[0, 1], [0, 1]]),
    ("SA", 0): ([[1, 2], [1, 1]], [[1, 1], [0, 1]]),  # SA's only pair: B is 100 points lower on Rec-S
    ("SA", 1): ([[1, 1]], FAILED),
}


def test_one_pair_gives_no_ci_or_p(tmp_path: Path, agreement_cli: Callable) -> None:
    a = write_judged(tmp_path / "a", 0, "20250301T120000", GPT, ONE_PAIR_SA)
    b = write_judged(tmp_path / "b", 1, "20250302T120000", QWEN, ONE_PAIR_SA)
    res = agreement_cli(a, b, "--format", "json", "--resamples", "200")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    er, sa = doc["tasks"]
    assert (er["n_paired"], sa["n_paired"], doc["overall"]["n_paired"]) == (3, 1, 4)
    for metric, s in sa["scores"].items():
        assert s["n"] == 1 and s["delta"] is not None, metric
        assert (s["ci_low"], s["ci_high"], s["p_value"]) == (None, None, None), metric
        assert s["notes"] == ["no CI or p-value: fewer than 2 paired samples"]
    assert sa["scores"]["rec_s"]["delta"] == pytest.approx(-100.0)
    last = sa["last_step"]
    assert last["n"] == 1 and last["mean_offset"] == pytest.approx(-1.0)
    assert (last["spearman"], last["cohen_kappa"], last["icc"]) == (None, None, None)
    assert any("fewer than 2 rating pairs" in n for n in last["notes"])
    for blk in (er, doc["overall"]):  # 3 and 4 pairs: a real interval
        for s in blk["scores"].values():
            assert s["ci_low"] is not None and s["p_value"] is not None and s["notes"] == []

    res = agreement_cli(a, b, "--resamples", "200")
    assert res.code == 0, res.err
    sa_rows = [line.split() for line in res.out.splitlines() if line.startswith("SA ") and "-S " in line]
    assert len(sa_rows) == 3 and all(row[-2:] == ["n/a", "n/a"] for row in sa_rows), sa_rows
    assert "  - SA scores: no CI or p-value: fewer than 2 paired samples" in res.out
    assert "  - SA last step: spearman, cohen_kappa and icc undefined: fewer than 2 rating pairs" in res.out
    assert "[+0.00, +0.00]" not in res.out


def test_a_single_pair_overall(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = {("SA", 0): ([[1, 1], [1, 1]], [[1, 1], [1, 1]])}  # identical: the old output was CI [0, 0], p 1
    a = write_judged(tmp_path / "a", 0, "20250301T120000", GPT, data)
    b = write_judged(tmp_path / "b", 1, "20250302T120000", QWEN, data)
    assert cli.main(["agreement", str(a), str(b), "--format", "json"]) == 0
    overall = json.loads(capsys.readouterr().out)["overall"]
    assert all(
        s["ci_low"] is None and s["ci_high"] is None and s["p_value"] is None for s in overall["scores"].values()
    )
    assert cli.main(["agreement", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "p 1.0" not in out and "1.0000" not in out and "Overall scores: no CI or p-value" in out


def test_pure_measures_from_one_and_two_pairs() -> None:
    one = agreement_report.rating_agreement([0.5], [1.0])
    assert one["mean_offset"] == 0.5 and (one["spearman"], one["cohen_kappa"], one["icc"]) == (None, None, None)
    two = agreement_report.rating_agreement([0.0, 1.0], [0.0, 1.0])
    assert (two["spearman"], two["cohen_kappa"], two["icc"]) == pytest.approx((1.0, 1.0, 1.0))
    s = agreement_report.score_difference([50.0], [100.0], resamples=100, seed=0)
    assert (s["n"], s["a"], s["b"], s["delta"]) == (1, 50.0, 100.0, 50.0)
    assert (s["ci_low"], s["ci_high"], s["p_value"]) == (None, None, None) and s["notes"]
    s = agreement_report.score_difference([50.0, 0.0], [100.0, 0.0], resamples=100, seed=0)
    assert s["ci_low"] is not None and s["p_value"] is not None and s["notes"] == []
    assert agreement_report.score_difference([], [], resamples=100, seed=0)["ci_low"] is None


# ----------------------------------------------------------------------------------- 3. one line, its code
def test_a_log_line_that_is_not_json_names_file_and_line(tmp_path: Path, agreement_cli: Callable) -> None:
    """Line 1 holds an answer with U+2028 and U+0085 (valid JSON, written with ensure_ascii=False), line 2 is
    blank, line 3 is broken: the message says line 3 of that file."""
    a = write_judged(tmp_path / "a", 0, "20250301T120000", GPT)
    b = write_judged(tmp_path / "b", 1, "20250302T120000", QWEN)
    log = b / "emo_tasks_judge" / f"{SA}_20250302T120000_judge.jsonl"
    first = _log_row("SA", 0, [[1, 1]], "Step 1: smiles\u2028Step 2: so \u0085happy")
    log.write_text(json.dumps(first, ensure_ascii=False) + "\n\n{not json\n", encoding="utf-8")
    res = agreement_cli(a, b)
    assert res.code == 3 and res.out == ""
    assert res.err_lines == [res.err.rstrip("\n")] and "Traceback" not in res.err
    assert res.err.startswith(f"emo-tasks agreement: error: {log}:3: not valid JSON")


def test_a_newer_unreadable_log_beside_an_older_one_is_refused_naming_both(
    tmp_path: Path, agreement_cli: Callable
) -> None:
    """The one rule every command picks a judge log by (`reader.pick_judge_log`): B's newest SA log is cut off and an
    older one can be read; the older one is not taken in its place (the newer may be the judge's real result): exit
    2, one line naming both.  The newer one alone is unreadable input: exit 3, as before."""
    a = write_judged(tmp_path / "a", 0, "20250301T120000", GPT)
    b = write_judged(tmp_path / "b", 1, "20250302T120000", QWEN)
    logs = b / "emo_tasks_judge"
    older = logs / f"{SA}_20250302T120000_judge.jsonl"
    newer = logs / f"{SA}_20250303T120000_judge.jsonl"
    newer.write_text(older.read_text()[:30])
    res = agreement_cli(a, b)
    assert res.code == 2 and res.out == "", res.err
    assert res.err_lines == [res.err.rstrip("\n")] and "Traceback" not in res.err
    assert f"{newer.name} in {logs} cannot be read (line 1: not valid JSON" in res.err, res.err
    assert f"an older one, {older.name}, can" in res.err, res.err
    older.unlink()
    res = agreement_cli(a, b)
    assert res.code == 3 and res.err.startswith(f"emo-tasks agreement: error: {newer}:1: not valid JSON"), res.err


def test_line_separators_inside_an_answer_are_not_line_breaks(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = {("SA", r): ([[1, 1], [r % 2, 1]], [[1, 1], [1, 1]]) for r in range(3)}
    a = write_judged(tmp_path / "a", 0, "20250301T120000", GPT, data)
    b = write_judged(tmp_path / "b", 1, "20250302T120000", QWEN, data)
    for folder, side in ((a, 0), (b, 1)):
        log = folder / "emo_tasks_judge" / f"{SA}_{'20250301' if side == 0 else '20250302'}T120000_judge.jsonl"
        rows = [_log_row("SA", r, data[("SA", r)][side], "happy\u2028\u2029\u0085\x0c") for r in range(3)]
        log.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows), encoding="utf-8")
    assert cli.main(["agreement", str(a), str(b), "--format", "json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["overall"]["n_paired"] == 3


def _rewrite_row(log: Path, line: int, **changes: object) -> None:
    rows = log.read_text().splitlines()
    rows[line - 1] = json.dumps({**json.loads(rows[line - 1]), **changes})
    log.write_text("\n".join(rows) + "\n")


@pytest.mark.parametrize("case", ["reasoning", "recognition", "alpha", "task"])
def test_malformed_input_is_exit_3_naming_the_file(tmp_path: Path, case: str, capsys: pytest.CaptureFixture) -> None:
    a = write_judged(tmp_path / "a", 0, "20250301T120000", GPT)
    b = write_judged(tmp_path / "b", 1, "20250302T120000", QWEN)
    logs = b / "emo_tasks_judge"
    log = logs / f"{ER_LAB}_20250302T120000_judge.jsonl"
    if case == "reasoning":
        _rewrite_row(log, 2, reasoning="half")
        expected = f"{log}:2: a scored sample needs a finite numeric 'reasoning'"
    elif case == "recognition":
        log.write_text(log.read_text().replace('"recognition": 1.0', '"recognition": NaN', 1))
        expected = f"{log}:1: a scored sample needs a finite numeric 'recognition'"
    elif case == "alpha":
        summary = logs / f"{ER_LAB}_20250302T120000_summary.json"
        summary.write_text(json.dumps({**GPT, "alpha": 1.5}))
        expected = f"{summary}: alpha must be in [0, 1], got 1.5"
    else:
        _rewrite_row(log, 3, task="no-such-task")
        expected = f"{log}:3: needs a known 'task'"
    assert cli.main(["agreement", str(a), str(b)]) == 3
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"emo-tasks agreement: error: {expected}"), err


def test_refusals_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a = write_judged(tmp_path / "a", 0, "20250301T120000", GPT)
    assert cli.main(["agreement", str(a), str(a / "emo_tasks_judge")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "A and B are the same judged result" in err
    failed = write_judged(tmp_path / "f", 1, "20250302T120000", QWEN, {("SA", 0): ([[1, 1]], FAILED)})
    assert cli.main(["agreement", str(a), str(failed)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "run B has no scored sample (judge_failed 1)" in err


def test_a_path_with_a_line_break_still_gives_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a = write_judged(tmp_path / "a", 0, "20250301T120000", GPT)
    assert cli.main(["agreement", str(a), str(tmp_path / "gone\nfolder")]) == 3
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "gone\\nfolder: no such directory" in err, err
