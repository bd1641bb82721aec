"""The command line's argument checks: a bad argument is exit 3 for every command and every flag, in one line.

Why: argparse exits 2 on its own usage errors, and 2 means "refused / not comparable" in our exit-code table
(docs/cli.md#exit-codes), so a CI job with a typo in a flag would read as "these runs cannot be compared".  And a
value that parses but means nothing (`--alpha nan`, `--max-drop inf`, `--resamples 0`, `--min-coverage 2`) must
not reach the statistics: nan compares false with everything, so a gate given `--max-drop nan` would pass every
run.  So every command's parser is a `Parser` (a usage error: exit 3, `emo-tasks <command>: error: argument --flag:
...` on one line), and every value-taking flag has a typed check below that names the value and what is accepted.
The checks run while the arguments are parsed, before any run is read.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

#: The exit code of a bad argument, for every command (docs/cli.md#exit-codes).
EXIT_BAD_ARGUMENT = 3
#: The exit codes of `report`, `compare`, `plan-gate` and `agreement` (the regression gate's, for CI): ok / pass, a
#: significant drop beyond --max-drop, not comparable, an error (docs/cli.md#exit-codes).
EXIT_PASS, EXIT_REGRESSION, EXIT_NOT_COMPARABLE, EXIT_ERROR = 0, 1, 2, 3
#: `compare` / `plan-gate --fail-on-judge-shutdown`: passed (written), but the reference run's judge shuts down within
#: --judge-horizon days (docs/ci.md)
EXIT_JUDGE_SHUTDOWN = 4

_NAME_MAX = 255  # bytes of one path component (ext4, xfs, btrfs, APFS)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


class Parser(argparse.ArgumentParser):
    """argparse, except that a usage error is a bad argument: exit 3 (argparse's own code, 2, means "refused"
    here), one line naming the command, and unknown arguments are the subcommand's usage error (named by it)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_ARGUMENT, f"{self.prog}: error: {_one_line(message)} (see --help)\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class Once(argparse.Action):
    """A flag that may be given once: argparse's default keeps the last value silently, and a second file the
    user meant to add would replace the first unseen.  A repeat is a bad argument (exit 3) naming both values;
    `why` (the action's `const`) says what to do instead."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        before = getattr(namespace, self.dest, None)
        if before is not None and before != self.default:
            raise argparse.ArgumentError(
                self, f"given twice ({before!r}, then {values!r}): this command takes one{self.const or ''}"
            )
        setattr(namespace, self.dest, values)


def bad(text: str, accepted: str) -> argparse.ArgumentTypeError:
    """argparse prefixes `argument --flag: `, so the line says the flag, the value and what is accepted."""
    return argparse.ArgumentTypeError(f"{text!r}: expected {accepted}")


def _bound(x: float, low: float | None, high: float | None, low_open: bool, high_open: bool) -> bool:
    if low is not None and (x <= low if low_open else x < low):
        return False
    return high is None or (x < high if high_open else x <= high)


def _range(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high:g}"
    return ""


def number(
    low: float | None = None, high: float | None = None, *, low_open: bool = False, high_open: bool = False
) -> Callable[[str], float]:
    """A finite float within the bounds (nan and inf never: they compare false, or true, with everything)."""
    accepted = " ".join(("a finite number", _range(low, high, low_open, high_open))).strip()

    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise bad(text, accepted) from None
        if not (math.isfinite(x) and _bound(x, low, high, low_open, high_open)):
            raise bad(text, accepted)
        return x

    parse.__name__ = "number"
    return parse


def integer(low: int | None = None) -> Callable[[str], int]:
    """An integer (not 1.5, not 1e3), at least `low`."""
    accepted = "an integer" + (f" >= {low}" if low is not None else "")

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise bad(text, accepted) from None
        if low is not None and n < low:
            raise bad(text, accepted)
        return n

    parse.__name__ = "integer"
    return parse


#: A share of samples or judgements (--max-failure-share, --min-coverage).
share = number(0, 1)
#: A significance level (compare's and plan-gate's --alpha): 0 flags nothing, 1 everything (emo_tasks.gate.power).
alpha = number(0, 1, low_open=True, high_open=True)
#: plan-gate's --power: what `emo_tasks.gate.required_rows` plans for (below 0.5 a plan is no gate).
power = number(0.5, 1, high_open=True)
#: A drop tolerated in the metric's units (compare's --max-drop); a negative one would call a gain a regression.
drop = number(0)
#: Bootstrap resamples.
resamples = integer(1)
#: A numpy bootstrap seed (numpy takes no negative seed).
seed = integer(0)


def per_metric(specs: Sequence[str], what: str) -> dict[str | None, float]:
    """`D` (every metric, in its own units) and `METRIC=D` (that metric) -> {metric or None: D}, each D a finite
    number > 0; ValueError naming the spec otherwise.  One rule for plan-gate's --detect and calibrate's
    --tolerance (`what`: the value's name in the message, "drop" / "tolerance")."""
    out: dict[str | None, float] = {}
    for spec in specs:
        metric, _, value = spec.rpartition("=")
        try:
            d = float(value)
        except ValueError:
            raise ValueError(f"{spec!r}: expected D or METRIC=D (a {what} in the metric's units)") from None
        if not d > 0 or d != d or d == float("inf"):
            raise ValueError(f"{spec!r}: the {what} must be a finite number > 0")
        out[metric or None] = d
    return out


def per_metric_arg(what: str, example: str) -> Callable[[str], str]:
    """An argparse type for one `D` / `METRIC=D` (`per_metric`'s rule), so a bad value is exit 3 as it is parsed."""

    def parse(spec: str) -> str:
        try:
            per_metric([spec], what)
        except ValueError:
            raise bad(spec, f"D or METRIC=D, a finite {what} > 0 in the metric's units (e.g. {example})") from None
        return spec

    parse.__name__ = "per_metric"
    return parse


def _checked(kind: str, ok: Callable[[str], bool], what: str) -> Callable[[str], str]:
    """An argparse type that keeps the value as given when `ok` says it is one, else names it and `what`."""

    def parse(value: str) -> str:
        if not ok(value):
            raise bad(value, what)
        return value

    parse.__name__ = kind
    return parse


def text(what: str) -> Callable[[str], str]:
    """A value that must say something: an empty `--run ''` or `--judge-model ''` would silently mean "not given"."""
    return _checked("text", lambda value: bool(value.strip()), what)


def names(what: str) -> Callable[[str], str]:
    """A comma-separated list naming at least one thing (`--tasks ,` would mean every task)."""
    return _checked("names", lambda value: any(part.strip() for part in value.split(",")), what)


def existing(what: str) -> Callable[[str], str]:
    """A path that exists (a run folder or a results file read as one); '' would mean the current folder."""

    def parse(value: str) -> str:
        if not value or not Path(value).exists():
            raise argparse.ArgumentTypeError(f"{value!r}: no such file or folder; expected {what}")
        return value

    parse.__name__ = "existing"
    return parse


def path_problem(path: Path, folder: bool = True, parents: bool = True) -> str | None:
    """Why `path` cannot be written as a folder (or, `folder` False, a file), phrased to follow the path ("<path> is
    an existing file; ..." / "<path>: <ancestor> is a file, ..."), or None.  The cheap checks, made before any input
    is read, so a long run of a command is not lost on its last step; `parents`: missing folders above it may be
    made.  One rule for every output path of every command (`export.check_out` adds that the folder is writable)."""
    for part in path.parts:
        if len(os.fsencode(part)) > _NAME_MAX:
            return f": the name {part[:32]}... is longer than {_NAME_MAX} bytes"
    if path.exists() and path.is_dir() != folder:
        return " is an existing file; name a folder" if folder else " is an existing folder; name a file"
    if not parents and not path.parent.is_dir():
        return f": {path.parent} is not an existing folder"
    ancestor = path.parent if not folder else path
    while not ancestor.exists():
        if ancestor.is_symlink():
            return f": {ancestor} is a broken symbolic link"
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f": {ancestor} is a file, not a folder"
    return None


def out_folder(what: str) -> Callable[[str], str]:
    """A folder to write into (made when missing): not an existing file, not below a file."""

    def parse(value: str) -> str:
        why = path_problem(Path(value), folder=True) if value else ": an empty path"
        if why:
            raise argparse.ArgumentTypeError(f"{value!r}{why} (expected {what})")
        return value

    parse.__name__ = "out_folder"
    return parse


def out_file(what: str, parents: bool = False, plot: bool = False) -> Callable[[str], str]:
    """A file to write: not an existing folder, in an existing folder (or, `parents`, one that can be made);
    `plot`: a format matplotlib writes (by the file's extension)."""

    def parse(value: str) -> str:
        path = Path(value)
        why = path_problem(path, folder=False, parents=parents) if value else ": an empty path"
        if not why and plot and path.suffix:
            from matplotlib.backend_bases import FigureCanvasBase

            formats = FigureCanvasBase.get_supported_filetypes()
            if path.suffix[1:].lower() not in formats:
                why = f": matplotlib writes no {path.suffix} files ({', '.join('.' + f for f in sorted(formats))})"
        if why:
            raise argparse.ArgumentTypeError(f"{value!r}{why} (expected {what})")
        return value

    parse.__name__ = "out_file"
    return parse
