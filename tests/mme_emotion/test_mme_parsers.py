"""MME-Emotion's judge output protocol (`<step>` / `<score>`), pinned on the official MME-Emotion edge cases."""

from __future__ import annotations

import random
import re

import pytest

from emo_tasks.mme_emotion.parsers import ParseStatus, parse_scores, parse_steps, score_validator, step_validator


def official_reference(text: str) -> list[float] | None:
    """The published cal_metrics.py rule restated independently: first single-line block, `: n/d`, d=0 -> 0."""
    m = re.search("<score>(.*?)</score>", text)
    if m is None:
        return None
    out = []
    for n, d in re.findall(r":\s*(\d+)/(\d+)", m.group(1)):
        out.append(0.0 if int(d) == 0 else int(n) / int(d))
    return out


def test_simple_block() -> None:
    p = parse_scores("<score>Step 1: 1/1, Step 2: 0/1, Step 3: 1/1</score>")
    assert p.status is ParseStatus.PARSED
    assert p.values == [1.0, 0.0, 1.0]
    assert [(r.numerator, r.denominator) for r in p.ratings] == [(1, 1), (0, 1), (1, 1)]


def test_no_block() -> None:
    p = parse_scores("Step 1: 1/1, Step 2: 0/1")
    assert p.status is ParseStatus.NO_BLOCK
    assert p.ratings == () and not p.ok


@pytest.mark.parametrize("text", [None, "", "   ", "<score></score>", "<score>all good</score>"])
def test_empty_or_ratingless(text: str | None) -> None:
    p = parse_scores(text)
    expected = ParseStatus.NO_BLOCK if not text or not text.strip() else ParseStatus.MALFORMED
    assert p.status is expected
    assert p.values == []


def test_zero_denominator_is_zero() -> None:
    assert parse_scores("<score>Step 1: 1/1, Step 2: 3/0</score>").values == [1.0, 0.0]


def test_fractional_last_step() -> None:
    p = parse_scores("<score>Step 1: 1/1, Step 2: 2/3</score>")
    assert p.values[-1] == pytest.approx(2 / 3)
    assert parse_scores("<score>Step 1: 0/2 </score>").values == [0.0]


def test_extra_spaces() -> None:
    p = parse_scores("  <score>  Step 1:    1/1 ,  Step 2:\t0/1   </score>  ")
    assert p.values == [1.0, 0.0]
    # Spaces around the slash are not matched by the official rule: that rating is skipped ...
    assert parse_scores("<score>Step 1: 1 / 1, Step 2: 0/1</score>").values == [0.0]
    # ... the named lenient companion sees it.
    assert parse_scores("<score>Step 1: 1 / 1, Step 2: 0/1</score>", lenient=True).values == [1.0, 0.0]


def test_several_blocks_first_wins() -> None:
    text = "<score>Step 1: 0/1</score> on reflection <score>Step 1: 1/1, Step 2: 1/1</score>"
    p = parse_scores(text)
    assert p.values == [0.0]
    assert p.n_blocks == 2


def test_multiline_block_is_no_block_officially() -> None:
    text = "<score>Step 1: 1/1,\nStep 2: 0/1</score>"
    assert parse_scores(text).status is ParseStatus.NO_BLOCK
    assert parse_scores(text, lenient=True).values == [1.0, 0.0]


def test_matches_independent_reference_on_random_text() -> None:
    rng = random.Random(1234)
    atoms = ["<score>", "</score>", "Step 1: ", ": ", "1/1", "0/1", "2/3", "3/0", " ", ",", "\n", "x", "1 / 2", ":7/8"]
    for _ in range(3000):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 14)))
        ref = official_reference(text)
        got = parse_scores(text)
        if ref is None:
            assert got.status is ParseStatus.NO_BLOCK, text
        elif not ref:
            assert got.status is ParseStatus.MALFORMED, text
        else:
            assert got.status is ParseStatus.PARSED and got.values == pytest.approx(ref), text


def test_steps_parse() -> None:
    text = (
        "<step>Step 1: Observe the setting. Step 2: Analyze the furrowed brows.\n"
        "Step 3: Based on the analysis, the predicted emotion is neutral.</step>"
    )
    p = parse_steps(text)
    assert p.status is ParseStatus.PARSED
    assert len(p) == 3
    assert p.steps[0] == "Step 1: Observe the setting."
    assert p.steps[-1].endswith("the predicted emotion is neutral.")


def test_single_step_and_none_prediction() -> None:
    p = parse_steps("<step>Step 1: The predicted emotion is None.</step>")
    assert p.steps == ("Step 1: The predicted emotion is None.",)


def test_steps_no_block_and_malformed() -> None:
    assert parse_steps("Step 1: happy").status is ParseStatus.NO_BLOCK
    assert parse_steps("<step>happy</step>").status is ParseStatus.MALFORMED
    assert parse_steps(None).status is ParseStatus.NO_BLOCK


def test_steps_word_inside_sentence_is_not_a_marker() -> None:
    p = parse_steps("<step>Step 1: A misstep: 2 things. Step 2: predicted emotion is sad.</step>")
    assert len(p) == 2


def test_validators() -> None:
    v = score_validator(expected_ratings=2)
    assert v("<score>Step 1: 1/1, Step 2: 0/1</score>") is None
    assert v("<score>Step 1: 1/1</score>") == "1 ratings for 2 steps"
    assert v("no block") == "no <score> block"
    assert v("<score>fine</score>") == "<score> block without ratings"
    assert score_validator()("<score>Step 1: 1/1</score>") is None
    sv = step_validator()
    assert sv("<step>Step 1: happy</step>") is None
    assert sv("happy") == "no <step> block"


@pytest.mark.parametrize(
    ("text", "rule", "differs"),
    [
        ("<score>Step 1: 1/1, Step 2: 0/1</score>", "binary", False),
        ("<score>Step 1:1/1, Step 2: 0/1</score>", "binary", True),  # no space after the colon
        ("<score>Step 1: 1/2</score>", "binary", True),  # not a d/1 rating
        ("<score>Step 1: 1/0</score>", "binary", True),
        ("<score>Step 1: 1/2</score>", "fraction", False),  # FG-ER / ML-ER scripts read n/d as we do
        ("no block at all", "binary", False),
        (None, "binary", False),
    ],
)
def test_per_task_rule_differences(text: str | None, rule: str, differs: bool) -> None:
    from emo_tasks.mme_emotion.parsers import per_task_rule_differs

    assert per_task_rule_differs(text, rule) is differs
