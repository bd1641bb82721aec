"""Every bad argument of every command exits 3 with one line naming the flag (docs/cli.md#exit-codes; issue 32
items 6 and 7).

The flags come from the real parser (`emo_tasks.cli._parser`), so a flag added later is covered here too: one that
takes no value is skipped (saying so), and one that takes a value fails `test_each_flag_of_each_command...` until
a bad value for it is listed in BAD.  Most cases run `cli.main` in process (the parser is the same object the
console script builds); `test_the_console_script_...` runs a few through the installed `emo-tasks` script to prove
the wiring (sys.exit of main's code), since each process costs ~0.3 s of start-up.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env

from emo_tasks import cli

MISSING, FILE, FOLDER = "{missing}", "{file}", "{folder}"

#: One valid command line per command (placeholders filled per test): each case changes one argument of it.
VALID = {
    "judge": ["{run}"],
    "export": ["{run}", "--format", "mvei-official", "--out", "{new}/export"],
    "view": ["{run}", "--out", "{new}/site"],
    "report": ["{run}"],
    "compare": ["{run}", "{run2}"],
    "plan-gate": ["{run}", "--detect", "2", "--out", "{new}/subset.json"],
    "agreement": ["{judge}", "{human}"],
    "calibrate": ["{run}", "{run2}", "--out", "{new}/calibration.json"],
    "cache": ["export", "{run}"],  # its actions' own flags: tests/judges/test_cache_transfer.py
}

#: One bad value per argument: "COMMAND --flag" (or "COMMAND METAVAR" for a positional) -> the value.
BAD = {
    "judge RUN_DIR": MISSING,
    "judge --tasks": ",",
    "judge --out": FILE,
    "judge --run": "",
    "judge --max-failure-share": "abc",
    "judge --judge-model": "",
    "judge --step-model": " ",
    "judge --audio-model": "",
    "judge --price": "gpt-4o=2.5",
    "judge --batch-max-requests": "0",
    "judge --batch-max-mb": "-1",
    "judge --batch-poll": "nan",
    "judge --batch-fallback": "later",
    "judge --batch-file": FILE,
    "judge --batch-results": MISSING,
    "judge --batch-discount": "0",
    "export RUN_DIR": MISSING,
    "export --format": "csv",
    "export --out": FILE,
    "export --model-name": " ",
    "export --run": "",
    "view RUN": MISSING,
    "view --out": FILE,
    "view --run": "",
    "report RUN_DIR": MISSING,
    "report --run": "",
    "report --format": "xml",
    "report --out": FOLDER,
    "report --plot": "{new}/leaderboard.docx",
    "report --resamples": "0",
    "report --seed": "-1",
    "report --trend": "weekly",
    "report --calibration": MISSING,
    "compare BASE_RUN": MISSING,
    "compare NEW_RUN": MISSING,
    "compare --metric": "",
    "compare --max-drop": "nan",
    "compare --alpha": "1",
    "compare --base-run": "",
    "compare --new-run": "",
    "compare --max-failure-share": "1.5",
    "compare --min-coverage": "-0.1",
    "compare --resamples": "many",
    "compare --seed": "1.5",
    "compare --view": FILE,
    "compare --calibration": MISSING,
    "compare --judge-horizon": "-1",
    "plan-gate BASE_RUN": MISSING,
    "plan-gate --detect": "0",
    "plan-gate --power": "0.3",
    "plan-gate --alpha": "inf",
    "plan-gate --second": MISSING,
    "plan-gate --tasks": "",
    "plan-gate --seed": "x",
    "plan-gate --name": "",
    "plan-gate --run": "",
    "plan-gate --price": "m=1/nan",
    "plan-gate --out": FOLDER,
    "plan-gate --calibration": MISSING,
    "plan-gate --judge-horizon": "30.5",
    "agreement JUDGE_FILE|RUN_A": MISSING,
    "agreement HUMAN_FILE|RUN_B": MISSING,
    "agreement --icc-form": "ICC(9,9)",
    "agreement --format": "xml",
    "agreement --resamples": "-5",
    "agreement --seed": "-1",
    "calibrate REF CAND": MISSING,
    "calibrate --tolerance": "0",
    "calibrate --out": FOLDER,
    "calibrate --resamples": "0",
    "calibrate --seed": "-1",
    "cache ACTION": "purge",
}


def commands() -> dict[str, argparse.ArgumentParser]:
    """The real parser's subcommands."""
    parser = cli._parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def arguments() -> list[tuple[str, argparse.Action]]:
    """("COMMAND --flag" or "COMMAND METAVAR", action) for every argument of every command but --help."""
    out = []
    for name, parser in commands().items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            longest = max(action.option_strings, key=len) if action.option_strings else action.metavar or action.dest
            out.append((f"{name} {longest}", action))
    return out


@pytest.fixture
def places(tmp_path: Path) -> dict[str, str]:
    """Existing run folders (empty: every case must fail on its argument before a run is read), rating files, a
    file, a folder, a path that does not exist and a new folder's name."""
    for name in ("run", "run2", "folder"):
        (tmp_path / name).mkdir()
    (tmp_path / "file").write_text("not a folder\n")
    for name in ("judge", "human"):
        (tmp_path / f"{name}.jsonl").write_text('{"item": "a", "rating": 1}\n{"item": "b", "rating": 2}\n')
    return {
        "run": str(tmp_path / "run"),
        "run2": str(tmp_path / "run2"),
        "judge": str(tmp_path / "judge.jsonl"),
        "human": str(tmp_path / "human.jsonl"),
        "missing": str(tmp_path / "no-such-run"),
        "file": str(tmp_path / "file"),
        "folder": str(tmp_path / "folder"),
        "new": str(tmp_path / "new"),
    }


def fill(value: str, places: dict[str, str]) -> str:
    return value.format(**places) if "{" in value else value


def bad_command_line(key: str, action: argparse.Action, value: str, places: dict[str, str]) -> list[str]:
    """The command's valid line with this one argument bad: a positional replaced, an option appended (the last
    occurrence is the one a command uses; each occurrence is checked)."""
    command = key.split(" ", 1)[0]
    argv = [fill(a, places) for a in VALID[command]]
    if action.option_strings:
        return [command, *argv, key.split(" ", 1)[1], value]
    positionals = [a.dest for a in commands()[command]._actions if not a.option_strings]
    argv[positionals.index(action.dest)] = value
    return [command, *argv]


def run_main(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """`cli.main(argv)` in process: (exit code, stdout, stderr); argparse's own exits count as their code."""
    capsys.readouterr()
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def names_flag(err: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", err) is not None


def assert_bad_argument(code: int, out: str, err: str, flag: str, value: str | None = None) -> None:
    """Exit 3, nothing on stdout, one line on stderr that names the flag (and the value, when it has one)."""
    said = f"exit {code}, stdout {out!r}, stderr {err!r}"
    assert code == 3, said
    assert out == "" and len(err.splitlines()) == 1 and "Traceback" not in err, said
    assert err.startswith("emo-tasks"), said
    assert names_flag(err, flag), f"the message does not name {flag}: {said}"
    if value is not None and value.strip():
        assert value in err or repr(value) in err, f"the message does not show the value {value!r}: {said}"


@pytest.mark.parametrize("key", [key for key, _ in arguments()])
def test_each_flag_of_each_command_one_bad_value_exits_3_naming_it(
    key: str, places: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    action = dict(arguments())[key]
    if action.nargs == 0:
        pytest.skip(f"{key} takes no value ({type(action).__name__}): no value of it can be bad")
    if key not in BAD:
        pytest.fail(f"{key}: no bad value listed; add one to BAD in {Path(__file__).name} (and make it exit 3)")
    value = fill(BAD[key], places)
    code, out, err = run_main(bad_command_line(key, action, value, places), capsys)
    flag = key.split(" ", 1)[1]
    if action.option_strings:
        assert_bad_argument(code, out, err, flag, value)
    else:  # a positional: the message names the path at fault
        assert_bad_argument(code, out, err, value)


def test_every_bad_value_listed_is_an_argument_of_the_parser() -> None:
    """BAD holds no flag the parser no longer has (a renamed flag would otherwise go untested)."""
    known = {key for key, _ in arguments()}
    assert set(BAD) <= known, sorted(set(BAD) - known)


@pytest.mark.parametrize(
    "argv,names",
    [
        ([], "emo-tasks: error"),  # no command
        (["judgement", "{run}"], "argument command: invalid choice: 'judgement'"),  # an unknown command
        (["report"], "emo-tasks report: error: the following arguments are required: RUN_DIR"),  # no positional
        (["compare", "{run}"], "emo-tasks compare: error: the following arguments are required: NEW_RUN"),
        (["report", "{run}", "--bogus"], "emo-tasks report: error: unrecognized arguments: --bogus"),  # unknown flag
        (
            ["plan-gate", "{run}", "--detect", "2"],
            "emo-tasks plan-gate: error: the following arguments are required: --out",
        ),  # fmt: skip
        (["compare", "{run}", "{run2}", "--alpha"], "argument --alpha: expected one argument"),  # a value missing
        (["report", "{run}", "--format", "xml"], "argument --format: invalid choice: 'xml'"),  # a bad choice
        (["report", "{run}", "--resamples", "1e3"], "argument --resamples: '1e3': expected an integer >= 1"),
        (["compare", "{run}", "{run2}", "--max-drop", "two"], "argument --max-drop: 'two': expected a finite number"),
    ],
)
def test_argparse_usage_errors_exit_3_in_one_line(
    argv: list[str], names: str, places: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    code, out, err = run_main([fill(a, places) for a in argv], capsys)
    assert code == 3 and out == "" and len(err.splitlines()) == 1 and names in err, (code, out, err)


def test_help_still_exits_0(capsys: pytest.CaptureFixture) -> None:
    assert run_main(["--help"], capsys)[0] == 0
    code, out, _ = run_main(["plan-gate", "--help"], capsys)
    assert code == 0 and "--power" in out


@pytest.mark.parametrize(
    "flag,values",
    [
        ("--detect", ["0", "-1", "nan", "inf", "-inf", "abc", "srcc=", "srcc=0", "srcc=nan"]),
        ("--power", ["0", "-0.5", "nan", "inf", "1", "1.5", "0.49"]),
        ("--alpha", ["0", "-0.1", "nan", "inf", "1", "2"]),
    ],
)
def test_plan_gate_bad_detect_power_alpha_exit_3_blaming_that_flag(
    flag: str, values: list[str], places: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    """Item 6: exit 3 (not 2), and a bad --alpha is not blamed on --power (nor the reverse)."""
    for value in values:
        argv = ["plan-gate", places["run"], "--detect", "2", "--out", places["new"] + "/s.json", flag, value]
        code, out, err = run_main(argv, capsys)
        assert_bad_argument(code, out, err, flag, None if value.startswith("-inf") else value)
        for other in {"--detect", "--power", "--alpha"} - {flag}:
            assert not names_flag(err, other), (value, err)


@pytest.mark.parametrize("value", ["abc", "nan", "-0.1", "2", "inf", ""])
def test_judge_max_failure_share_one_code_for_every_bad_value(
    value: str, places: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    """Item 7's probe: "abc" exited 2 (argparse), nan, -0.1, 2 and inf 3."""
    code, out, err = run_main(["judge", places["run"], "--max-failure-share", value], capsys)
    assert_bad_argument(code, out, err, "--max-failure-share", value)


def test_valid_edges_are_still_accepted(places: dict[str, str], capsys: pytest.CaptureFixture) -> None:
    """The bounds are the ones the code supports: a share of 0 or 1, power 0.5, a zero drop, seed 0 parse; the
    run folder (empty) is then what fails, as before (exit 2: no run in it)."""
    run, run2 = places["run"], places["run2"]
    line = ["compare", run, run2, "--max-drop", "0", "--alpha", "0.5", "--min-coverage", "1", "--max-failure-share",
            "0", "--resamples", "1", "--seed", "0"]  # fmt: skip
    code, _, err = run_main(line, capsys)
    assert code == 2 and "no *_results.json" in err, err
    argv = ["plan-gate", run, "--detect", "0.001", "--detect", "srcc=5", "--power", "0.5", "--alpha", "0.999",
            "--seed", "-7", "--out", places["new"] + "/deep/s.json", "--price", "m=0/0"]  # fmt: skip
    code, _, err = run_main(argv, capsys)
    assert code == 2 and "argument" not in err, err


def test_the_console_script_exits_3_on_bad_arguments(places: dict[str, str]) -> None:
    """The installed `emo-tasks` script (sys.exit of main's code): a few cases, one per kind."""
    script = Path(sys.executable).with_name("emo-tasks")
    assert script.exists(), f"no console script {script}: pip install -e ."
    cases = [
        ([], "emo-tasks: error"),
        (["judge", places["run"], "--max-failure-share", "abc"], "argument --max-failure-share: 'abc'"),
        (
            ["plan-gate", places["run"], "--detect", "2", "--alpha", "2", "--out", places["new"] + "/s.json"],
            "argument --alpha: '2'",
        ),  # fmt: skip
        (["compare", places["run"], places["run2"], "--max-drop", "nan"], "argument --max-drop: 'nan'"),
        (["report", places["missing"]], "no-such-run"),
        (["export", places["run"], "--format", "csv", "--out", places["new"]], "argument --format: invalid choice"),
    ]
    env = cli_env(Path(places["new"]).with_name("cache"))
    for argv, names in cases:
        proc = subprocess.run([str(script), *argv], env=env, capture_output=True, text=True, timeout=120)
        said = (argv, proc.returncode, proc.stdout, proc.stderr)
        assert proc.returncode == 3 and proc.stdout == "" and len(proc.stderr.splitlines()) == 1, said
        assert names in proc.stderr, said


def test_every_command_has_a_row_in_the_exit_code_table() -> None:
    """docs/cli.md's table: one row per command of the parser (none missing, none stale), each saying that a bad
    argument is 3."""
    text = (Path(__file__).parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    section = text.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    header = next(line for line in section.splitlines() if line.startswith("| command |"))
    three = [c.strip() for c in header.strip("|").split("|")].index("3")
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `([\w-]+)` \|", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in line.strip().strip("|").split("|")]
    assert sorted(rows) == sorted(commands()), "docs/cli.md's exit-code table vs the parser's commands"
    for command, cells in rows.items():
        assert "bad argument" in cells[three], f"{command}: the 3 column does not say 'bad argument': {cells[three]}"
