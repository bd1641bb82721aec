"""MME-Emotion's judge output protocol: the step agent's `<step>` lists and the judge's `<score>` ratings.

The score parser reproduces the official MME-Emotion `cal_metrics.py` exactly by default:

- the **first** `<score>...</score>` block, matched on a single line (the official regex has no DOTALL flag, so a
  block broken over several lines counts as no block);
- inside it, every `: <num>/<den>` in order (integers; spaces allowed after the colon, not around the slash);
- value = num/den, and 0 when den is 0.

A sample whose judge output has no block, or a block with no rating, is left out of every average (official);
our result type says which of the two happened so callers can count them.  `lenient=True` is a named companion
(multi-line blocks, spaces around `/`, any tag case) for diagnostics, never the default.

A reasoning judge's or step agent's answer is read after its reasoning (`judges.reasoning.answer_part`): a block
that stands only inside `<think>…</think>` is not an answer; an answer cut off inside its reasoning has no block.
Text without a reasoning tag is read exactly as before (the official scripts see the same text).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from judges.reasoning import answer_part
from judges.request import Validator


class ParseStatus(str, Enum):
    PARSED = "parsed"
    NO_BLOCK = "no_block"
    MALFORMED = "malformed"  # the block is there but holds nothing usable


@dataclass(frozen=True)
class Rating:
    numerator: int
    denominator: int

    @property
    def value(self) -> float:
        """num/den; a zero denominator gives 0 (official rule)."""
        return 0.0 if self.denominator == 0 else self.numerator / self.denominator


@dataclass(frozen=True)
class ScoreParse:
    status: ParseStatus
    ratings: tuple[Rating, ...] = ()
    n_blocks: int = 0
    block: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is ParseStatus.PARSED

    @property
    def values(self) -> list[float]:
        return [r.value for r in self.ratings]


@dataclass(frozen=True)
class StepParse:
    status: ParseStatus
    steps: tuple[str, ...] = ()
    block: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is ParseStatus.PARSED

    def __len__(self) -> int:
        return len(self.steps)


_SCORE_OFFICIAL = re.compile(r"<score>(.*?)</score>")
_SCORE_LENIENT = re.compile(r"<score>(.*?)</score>", re.DOTALL | re.IGNORECASE)
_SCORE_ANY = re.compile(r"<score>.*?</score>", re.DOTALL | re.IGNORECASE)
_RATING_OFFICIAL = re.compile(r":\s*(\d+)/(\d+)")
_RATING_LENIENT = re.compile(r":\s*(\d+)\s*/\s*(\d+)")
_RATING_PER_TASK = re.compile(r": (\d)/1")  # the six single-label tasks' own cal_metrics.py

_STEP_BLOCK = re.compile(r"<step>(.*?)</step>", re.DOTALL | re.IGNORECASE)
_STEP_MARK = re.compile(r"(?:^|(?<=\s)|(?<=[.;>]))Step\s*\d+\s*[:.]", re.IGNORECASE)


def parse_scores(text: str | None, *, lenient: bool = False) -> ScoreParse:
    """Ratings from a judge answer such as `<score>Step 1: 1/1, Step 2: 0/1</score>`.

    Edge cases (official behaviour): no block -> NO_BLOCK; a block without any `: n/d` -> MALFORMED;
    several blocks -> the first is used (`n_blocks` tells how many there were); `2/3` -> 0.667; `1/0` -> 0.
    """
    text = answer_part(None if text is None else str(text)) or ""
    n_blocks = len(_SCORE_ANY.findall(text))
    match = (_SCORE_LENIENT if lenient else _SCORE_OFFICIAL).search(text)
    if match is None:
        return ScoreParse(ParseStatus.NO_BLOCK, n_blocks=n_blocks)
    block = match.group(1)
    pattern = _RATING_LENIENT if lenient else _RATING_OFFICIAL
    ratings = tuple(Rating(int(m.group(1)), int(m.group(2))) for m in pattern.finditer(block))
    status = ParseStatus.PARSED if ratings else ParseStatus.MALFORMED
    return ScoreParse(status, ratings, n_blocks=n_blocks, block=block)


def parse_steps(text: str | None) -> StepParse:
    """Steps from a step-agent answer such as `<step>Step 1: ... Step 2: the predicted emotion is sad.</step>`.

    The first `<step>` block is used (it may span lines).  Each step starts at a `Step N:` marker; text before
    the first marker is ignored.  No block -> NO_BLOCK; a block without any marker -> MALFORMED.
    """
    text = answer_part(None if text is None else str(text)) or ""
    match = _STEP_BLOCK.search(text)
    if match is None:
        return StepParse(ParseStatus.NO_BLOCK)
    block = match.group(1)
    marks = list(_STEP_MARK.finditer(block))
    if not marks:
        return StepParse(ParseStatus.MALFORMED, block=block)
    ends = [m.start() for m in marks[1:]] + [len(block)]
    steps = tuple(block[m.start() : end].strip() for m, end in zip(marks, ends, strict=True))
    return StepParse(ParseStatus.PARSED, steps, block=block)


def _validator(parse: Callable[[str], Any], tag: str, malformed: str, check: Callable[[Any], str | None]) -> Validator:
    """A `JudgeRequest.validate` that rejects an answer without a parsable `<tag>` block, then applies `check`."""

    def validate(text: str) -> str | None:
        parsed = parse(text)
        if parsed.status is ParseStatus.NO_BLOCK:
            return f"no <{tag}> block"
        if parsed.status is ParseStatus.MALFORMED:
            return malformed
        return check(parsed)

    return validate


def score_validator(expected_ratings: int | None = None) -> Validator:
    """A `JudgeRequest.validate` that accepts an answer only if its `<score>` block parses (officially) and,
    when `expected_ratings` is given, holds exactly that many ratings (the judge must rate every step)."""

    def count(parsed: ScoreParse) -> str | None:
        if expected_ratings is not None and len(parsed.ratings) != expected_ratings:
            return f"{len(parsed.ratings)} ratings for {expected_ratings} steps"
        return None

    return _validator(parse_scores, "score", "<score> block without ratings", count)


def step_validator() -> Validator:
    """A `JudgeRequest.validate` for the step agent: the answer must hold a `<step>` block with steps."""
    return _validator(parse_steps, "step", "<step> block without 'Step N:' markers", lambda parsed: None)


def per_task_rule_differs(text: str | None, last_step_rule: str) -> bool:
    """Whether the official *per-task* metric script of a single-label task (`last_step_rule` "binary"), which
    reads only `: d/1` ratings, reads this judge answer differently from the rule we (and the official FG-ER, ML-ER
    and Overall scripts) use, `:\\s*n/d`: e.g. `Step 1:1/1`, `1/2`, `Step 1: 10/1`.  Such a sample could make a
    per-task number differ from the per-task script's; it is counted (`n_rule_differs`), never hidden."""
    text = answer_part(text)
    if last_step_rule != "binary" or not text:
        return False
    block = _SCORE_OFFICIAL.search(text)
    if block is None:
        return False
    ours = [0.0 if int(d) == 0 else int(n) / int(d) for n, d in _RATING_OFFICIAL.findall(block.group(1))]
    theirs = [float(int(d)) for d in _RATING_PER_TASK.findall(block.group(1))]
    return ours != theirs
