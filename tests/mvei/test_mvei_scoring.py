"""MVEI scoring: the published keyword parser, the strict parser, the 3-sample majority and the metrics.

Every expected value is a hand-computed literal.  The official-parser table pins the published rule's known
weaknesses ("not correct" -> Correct, "this is a cat" -> Correct) on purpose: that rule is the parity default.
"""

from __future__ import annotations

import dataclasses

import pytest

from emo_tasks.mvei.scoring import (
    CORRECT,
    DIMENSIONS,
    GIVE_UP,
    INCORRECT,
    LABELS,
    TABLE,
    PairResult,
    answer_segment,
    is_consistent,
    is_right,
    majority,
    parse_official,
    parse_strict,
    score_pairs,
    score_sample,
    task_metrics,
)

C, N, G = CORRECT, INCORRECT, GIVE_UP  # N: "no", the statement is incorrect
SP, EI, SC, PS = DIMENSIONS


def test_constants() -> None:
    assert (CORRECT, INCORRECT, GIVE_UP) == ("correct", "incorrect", "give_up")
    assert LABELS == ("correct", "incorrect")
    assert DIMENSIONS == (
        "sentiment polarity",
        "emotion interpretation",
        "scene context",
        "perception subjectivity",
    )


# ------------------------------------------------------------------------------------------------ answer segment
@pytest.mark.parametrize(
    ("text", "segment"),
    [
        (None, ""),
        ("", ""),
        ("Correct", "Correct"),
        ("<think>hmm</think><answer> Incorrect </answer>", " Incorrect "),
        ("<ANSWER>first</Answer> and <answer>second</answer>", "first"),  # first complete block, any-case tags
        ("<answer>line one\nline two</answer>", "line one\nline two"),  # DOTALL
        ("<answer>Correct", "Correct"),  # unclosed: after the tag
        ("<answer>x <answer>Incorrect", "Incorrect"),  # unclosed: after the LAST tag
        ("<think>a</think>b</think> Correct", " Correct"),  # after the LAST </think>
        ("<think>a</THINK>Correct", "Correct"),
        ("<answer>x</think> Correct", " Correct"),  # the later of the last <answer> / </think> wins (authors' code)
        ("</think>y<answer> Incorrect", " Incorrect"),
        ("<think>long reasoning", "<think>long reasoning"),  # no closing tag: whole text
        ("<answer>B</answer>", "B"),
    ],
)
def test_answer_segment(text: str | None, segment: str) -> None:
    assert answer_segment(text) == segment


# ------------------------------------------------------------------------------------------------ parsers
# (answer, official decision, strict decision)
ANSWER_TABLE = [
    ("Correct", C, C),
    ("Correct. The warm light and smiling faces support the statement.", C, C),
    ("Incorrect", N, N),
    ("incorrect.", N, N),
    ("The statement is correct.", C, C),
    ("not correct", C, N),  # published rule: contains "correct", not "incorrect" -> Correct (documented weakness)
    ("<think>The mood looks incorrect at first.</think> Correct", C, C),  # only the text after </think> counts
    ("<answer>Incorrect</answer>", N, N),
    ("<answer>B</answer>", N, N),
    ("A", C, C),
    ("(b)", N, N),
    ("B.", N, N),
    ("a", C, C),
    ("this is a cat", C, G),  # published quirk: the article "a" is read as option A
    ("", G, G),
    ("   ", G, G),
    (None, G, G),
    ("Unsure", G, G),
    ("<think>long reasoning", G, G),  # no closing tag: the whole text, with no verdict and no isolated letter
    ("<answer>Correct", C, C),
    ("I'm not sure it is correct", C, G),
    ("Correct. Although some might say incorrect", N, C),  # official sees "incorrect" first; strict: verdict at start
    ("It could be correct or incorrect", N, G),
]


@pytest.mark.parametrize(("text", "official", "strict"), ANSWER_TABLE)
def test_parse_official(text: str | None, official: str, strict: str) -> None:
    assert parse_official(text) == official


@pytest.mark.parametrize(("text", "official", "strict"), ANSWER_TABLE)
def test_parse_strict(text: str | None, official: str, strict: str) -> None:
    assert parse_strict(text) == strict


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A or B", C),  # A is tested before B
        ("b", N),
        ("Option B", N),
        ("Anger", C),  # any uppercase A counts in the authors' rule (a documented weakness)
        ("Bright and cheerful", N),  # any uppercase B, when no A
        ("nothing here", G),
        ("CORRECT!", C),
        ("The statement is INCORRECT", N),
        ("Correctly describes the scene", C),  # substring match
        ("<answer>\n  </answer> Correct", G),  # empty answer block wins over text outside it
    ],
)
def test_parse_official_more(text: str, expected: str) -> None:
    assert parse_official(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # negations of "correct" / "accurate" / "align"
        ("The statement isn't correct.", N),
        ("The statement is not correct.", N),
        ("It is not entirely correct.", N),
        ("That doesn\u2019t seem right; it isn\u2019t correct", N),  # typographic apostrophe
        ("This cannot be correct.", N),
        ("The statement is not accurate.", N),
        ("The statement is inaccurate.", N),
        ("The statement does not align with the image.", N),
        ("The statement doesn't align with the image.", N),
        ("Not correct: the scene is calm.", N),
        # hedges without a verdict at the start
        ("Maybe correct", G),
        ("It might be correct.", G),
        ("Possibly incorrect", G),
        ("Hard to say, but correct", G),
        ("I cannot determine whether it is correct.", G),
        ("I can't determine this.", G),
        ("It is unclear.", G),
        ("The statement is not incorrect.", G),  # double negative: no clear verdict
        # hedges or mixed verdicts with a verdict at the start
        ("Correct, although I'm not sure.", C),
        ("Incorrect, maybe the viewer feels calm but the statement says rage.", N),
        ("**Incorrect**. One might think it is correct.", N),
        ("Not correct, possibly.", N),
        ("Correct or incorrect? Hard to say.", C),
        # mixed verdicts without one at the start
        ("The first clause is correct but the emotion is incorrect.", G),
        ("It is correct that it is bright, but the statement is inaccurate.", G),
        # repeated positive verdicts stay positive
        ("Correct. The statement is correct.", C),
        ("The answer: correct", C),
        # letters: only a segment that is exactly one letter
        ("(A)", C),
        ("A)", C),
        ("b.", N),
        (" ( B ) ", N),
        ("A.B", G),
        ("Option B", G),
        ("AB", G),
        ("A or B", G),
        ("The statement aligns with the image.", G),  # no verdict word
    ],
)
def test_parse_strict_more(text: str, expected: str) -> None:
    assert parse_strict(text) == expected


def test_parse_strict_reads_only_the_answer_segment() -> None:
    assert parse_strict("<think>It is incorrect? No.</think>Correct") == C
    assert parse_strict("<answer>Not correct</answer> Correct") == N
    assert parse_strict("<think>long reasoning that says correct") == C  # whole text when </think> is missing


# ------------------------------------------------------------------------------------------------ majority
@pytest.mark.parametrize(
    ("decisions", "expected"),
    [
        ((C, C, C), C),
        ((N, N, N), N),
        ((C, N, C), C),  # 2-1 for correct
        ((N, C, N), N),  # 2-1 for incorrect
        ((C, N, N), N),
        ((C, N, G), G),  # 1-1-1: no majority
        ((G, G, C), G),  # give-up can win outright
        ((C, G, G), G),
        ((C, C, G), C),
        ((C, N), G),  # 1-1 tie with two answers
        ((N,), N),
        ((C,), C),
        ((G,), G),
        ((), G),
        ((C, C, N, N, G), G),  # 2-2-1: tie at the top
        ((C, C, N, G, G, G), G),
    ],
)
def test_majority(decisions: tuple[str, ...], expected: str) -> None:
    assert majority(decisions) == expected
    assert majority(list(decisions)) == expected


@pytest.mark.parametrize("bad", [("A",), (C, "Correct"), (C, C, None), ("give up",)])
def test_majority_rejects_unknown_values(bad: tuple) -> None:
    with pytest.raises(ValueError, match="unknown decision"):
        majority(bad)


def test_majority_rejects_a_bare_string() -> None:
    with pytest.raises(TypeError):
        majority("correct")


def test_is_consistent() -> None:
    assert is_consistent((C, C, C)) is True
    assert is_consistent((G, G, G)) is True
    assert is_consistent((N,)) is True
    assert is_consistent((C, C, N)) is False
    assert is_consistent((G, C)) is False
    assert is_consistent(()) is False


def test_is_right() -> None:
    assert is_right(C, C) is True
    assert is_right(N, N) is True
    assert is_right(C, N) is False
    assert is_right(N, C) is False
    assert is_right(G, C) is False
    assert is_right(G, N) is False
    with pytest.raises(ValueError, match="'maybe'"):
        is_right("maybe", C)
    with pytest.raises(ValueError, match="'Correct'"):
        is_right(C, "Correct")


def test_pair_result_properties() -> None:
    p = PairResult(PS, C, (C, C, N), (G, G, N))
    assert p.final == C
    assert p.final_strict == G
    assert p.right is True
    q = PairResult(SP, N, (C, N, C), (N, N, N))
    assert (q.final, q.final_strict, q.right) == (C, N, False)
    tie = PairResult(SC, C, (C, N, G), (C, N, G))
    assert (tie.final, tie.final_strict, tie.right) == (G, G, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.label = N  # type: ignore[misc]


# ------------------------------------------------------------------------------------------------ score_pairs
# 9 pairs over all four dimensions and both labels.  Per pair: final, right?, consistent?, strict disagreements.
HAND_PAIRS = [
    PairResult(SP, C, (C, C, C), (C, C, C)),  # final C  right    consistent  0
    PairResult(SP, N, (C, N, C), (N, N, N)),  # final C  wrong    -           2
    PairResult(SP, N, (N, N, G), (N, N, N)),  # final I  right    -           1
    PairResult(EI, C, (N, N, C), (N, N, G)),  # final I  wrong    -           1
    PairResult(EI, N, (N, N, G), (N, N, G)),  # final I  right    -           0
    PairResult(SC, C, (C, N, G), (C, N, G)),  # final G  wrong    -           0
    PairResult(SC, N, (G, G, N), (G, G, G)),  # final G  wrong    -           1
    PairResult(PS, C, (C, C, N), (G, G, N)),  # final C  right    -           2
    PairResult(PS, N, (N, C, N), (N, N, N)),  # final I  right    -           1
]


def test_score_pairs_hand_computed() -> None:
    s = score_pairs(HAND_PAIRS)
    expected = {
        "acc_total": 500 / 9,  # 5 right of 9
        "acc_sentiment_polarity": 200 / 3,  # 2 of 3
        "acc_emotion_interpretation": 50.0,  # 1 of 2
        "acc_scene_context": 0.0,  # two give-ups
        "acc_perception_subjectivity": 100.0,
        "positive_ratio": 300 / 9,  # finals C: pairs 1, 2, 8
        "give_up_ratio": 200 / 9,  # finals G: pairs 6, 7
        "self_consistency": 100 / 9,  # only pair 1
        "strict_parser_disagreement": 800 / 27,  # 8 of 27 individual answers
    }
    assert set(s) == set(expected) | {
        "n_pairs",
        "n_answers",
        "n_sentiment_polarity",
        "n_emotion_interpretation",
        "n_scene_context",
        "n_perception_subjectivity",
        "n_give_up",
        "n_positive",
    }
    for key, value in expected.items():
        assert s[key] == pytest.approx(value, abs=1e-9), key
    assert s["acc_total"] == pytest.approx(55.5556, abs=1e-4)
    assert s["strict_parser_disagreement"] == pytest.approx(29.6296, abs=1e-4)
    assert (s["n_pairs"], s["n_answers"], s["n_give_up"], s["n_positive"]) == (9, 27, 2, 3)
    assert (
        s["n_sentiment_polarity"],
        s["n_emotion_interpretation"],
        s["n_scene_context"],
        s["n_perception_subjectivity"],
    ) == (3, 2, 2, 2)
    assert all(isinstance(s[k], int) for k in s if k.startswith("n_"))


def test_score_pairs_from_raw_answers() -> None:
    """End to end from answer texts: the official parser's "not correct" -> Correct shows up as a disagreement."""
    raw = [
        (SP, C, ["Correct", "Correct.", "<answer>A</answer>"]),  # C C C | C C C
        (EI, N, ["not correct", "Incorrect", "Incorrect."]),  # C I I | I I I  -> 1 disagreement
        (SC, N, ["this is a cat", "Unsure", "(b)"]),  # C G I | G G I  -> 1-1-1 tie: G; 1 disagreement
        (PS, C, ["I'm not sure it is correct", "Correct", ""]),  # C C G | G C G -> C; 1 disagreement
    ]
    pairs = [
        PairResult(d, lab, tuple(parse_official(a) for a in ans), tuple(parse_strict(a) for a in ans))
        for d, lab, ans in raw
    ]
    assert [p.final for p in pairs] == [C, N, G, C]
    assert [p.final_strict for p in pairs] == [C, N, G, G]
    s = score_pairs(pairs)
    assert s["acc_total"] == pytest.approx(75.0)
    assert (s["acc_sentiment_polarity"], s["acc_emotion_interpretation"]) == (100.0, 100.0)
    assert (s["acc_scene_context"], s["acc_perception_subjectivity"]) == (0.0, 100.0)
    assert s["positive_ratio"] == pytest.approx(50.0)
    assert s["give_up_ratio"] == pytest.approx(25.0)
    assert s["self_consistency"] == pytest.approx(25.0)
    assert s["strict_parser_disagreement"] == pytest.approx(300 / 12)


def test_score_pairs_all_correct_answers() -> None:
    """A model that says Correct to everything: positive ratio 100, accuracy = share of correct-labelled pairs."""
    # SP: C I C, EI: C I C, SC: C I, PS: I C -> 6 correct-labelled pairs of 10
    labels = [(SP, C), (SP, N), (SP, C), (EI, C), (EI, N), (EI, C), (SC, C), (SC, N), (PS, N), (PS, C)]
    answers = ("Correct", "Correct.", "The statement is correct.")
    pairs = [
        PairResult(d, lab, tuple(parse_official(a) for a in answers), tuple(parse_strict(a) for a in answers))
        for d, lab in labels
    ]
    s = score_pairs(pairs)
    assert s["positive_ratio"] == 100.0
    assert s["give_up_ratio"] == 0.0
    assert s["acc_total"] == pytest.approx(60.0)
    assert s["acc_sentiment_polarity"] == pytest.approx(200 / 3)  # C, I, C
    assert s["acc_emotion_interpretation"] == pytest.approx(200 / 3)  # C, I, C
    assert s["acc_scene_context"] == 50.0
    assert s["acc_perception_subjectivity"] == 50.0
    assert s["self_consistency"] == 100.0
    assert s["strict_parser_disagreement"] == 0.0
    assert (s["n_positive"], s["n_give_up"], s["n_pairs"], s["n_answers"]) == (10, 0, 10, 30)


def test_score_pairs_all_give_up() -> None:
    pairs = [PairResult(d, lab, (G, G, G), (G, G, G)) for d in DIMENSIONS for lab in LABELS]
    s = score_pairs(pairs)
    assert s["give_up_ratio"] == 100.0
    assert s["positive_ratio"] == 0.0
    assert s["acc_total"] == 0.0
    for d in DIMENSIONS:
        assert s[f"acc_{d.replace(' ', '_')}"] == 0.0
    assert (s["n_give_up"], s["n_positive"], s["n_pairs"]) == (8, 0, 8)
    assert s["self_consistency"] == 100.0


def test_score_pairs_empty_dimension_is_none() -> None:
    pairs = [PairResult(SP, C, (C, C, C), (C, C, C)), PairResult(SP, N, (C, C, N), (C, C, N))]
    s = score_pairs(pairs)
    assert s["acc_sentiment_polarity"] == 50.0
    assert s["acc_total"] == 50.0
    assert s["acc_emotion_interpretation"] is None
    assert s["acc_scene_context"] is None
    assert s["acc_perception_subjectivity"] is None
    assert (s["n_emotion_interpretation"], s["n_scene_context"], s["n_perception_subjectivity"]) == (0, 0, 0)
    assert s["n_sentiment_polarity"] == 2


def test_score_pairs_no_pairs() -> None:
    s = score_pairs([])
    for key, value in s.items():
        if key.startswith("n_"):
            assert value == 0, key
        else:
            assert value is None, key
    assert len(s) == 17


def test_score_pairs_pair_without_answers() -> None:
    """A pair with no answers is a give-up and not self-consistent; it adds no individual answers."""
    s = score_pairs([PairResult(SC, N, (), ()), PairResult(SC, N, (N,), (C,))])
    assert s["give_up_ratio"] == 50.0
    assert s["acc_scene_context"] == 50.0
    assert s["self_consistency"] == 50.0
    assert s["strict_parser_disagreement"] == 100.0
    assert s["n_answers"] == 1


def test_score_pairs_single_sample_per_pair() -> None:
    """One answer per pair (sampling off): the final decision is that answer."""
    pairs = [PairResult(SP, C, (C,), (C,)), PairResult(EI, N, (C,), (G,)), PairResult(SC, N, (G,), (G,))]
    s = score_pairs(pairs)
    assert s["acc_total"] == pytest.approx(100 / 3)
    assert s["positive_ratio"] == pytest.approx(200 / 3)
    assert s["give_up_ratio"] == pytest.approx(100 / 3)
    assert s["self_consistency"] == 100.0
    assert s["strict_parser_disagreement"] == pytest.approx(100 / 3)


@pytest.mark.parametrize("dimension", ["Sentiment Polarity", "sentiment_polarity", "colour", ""])
def test_score_pairs_unknown_dimension(dimension: str) -> None:
    with pytest.raises(ValueError, match=f"dimension '{dimension}'"):
        score_pairs([PairResult(SP, C, (C,), (C,)), PairResult(dimension, C, (C,), (C,))])


@pytest.mark.parametrize("label", ["Correct", "A", "true", ""])
def test_score_pairs_unknown_label(label: str) -> None:
    with pytest.raises(ValueError, match=f"label '{label}'"):
        score_pairs([PairResult(EI, label, (C,), (C,))])


def test_score_pairs_rejects_bad_decisions() -> None:
    with pytest.raises(ValueError, match="unknown decision 'A'"):
        score_pairs([PairResult(EI, C, (C, "A"), (C, C))])
    with pytest.raises(ValueError, match="unknown decision 'Correct'"):
        score_pairs([PairResult(EI, C, (C, C), (C, "Correct"))])
    with pytest.raises(ValueError, match="2 official but 3 strict"):
        score_pairs([PairResult(EI, C, (C, C), (C, C, C))])


# ------------------------------------------------------------------------------------------------ per sample, table
def test_score_sample_parses_every_answer_with_both_rules() -> None:
    pair = score_sample(["Correct", "not correct", "<answer>B</answer>"], SC, N)
    assert pair == PairResult(SC, N, (C, C, N), (C, N, N))
    assert (pair.final, pair.right) == (C, False)
    pair = score_sample(["I am unsure, maybe", "", None], SP, C)
    assert pair.decisions == (G, G, G) and pair.strict_decisions == (G, G, G)
    assert (pair.final, pair.right) == (G, False)


def test_task_metrics_is_every_table_metric_of_score_pairs() -> None:
    pairs = [PairResult(SC, C, (C, C, N), (C, C, N)), PairResult(SP, N, (G, G, C), (G, N, C))]
    metrics = task_metrics(pairs)
    assert metrics == score_pairs(pairs)
    assert set(TABLE.names) <= metrics.keys()
    assert metrics["acc_total"] == 50.0 and metrics["give_up_ratio"] == 50.0 and metrics["n_pairs"] == 2


def test_per_sample_values_by_hand() -> None:
    units = {
        "p1": PairResult(SC, C, (C, C, N), (C, C, N)),  # final correct, right
        "p2": PairResult(SP, N, (C, G, G), (C, G, G)),  # final give_up, wrong
        "p3": PairResult(SC, N, (C, C, C), (C, C, C)),  # final correct, wrong
    }
    assert TABLE.per_sample_values(units) == {
        "acc_total": {"p1": 100.0, "p2": 0.0, "p3": 0.0},
        "acc_sentiment_polarity": {"p2": 0.0},
        "acc_scene_context": {"p1": 100.0, "p3": 0.0},
        "positive_ratio": {"p1": 100.0, "p2": 0.0, "p3": 100.0},
        "give_up_ratio": {"p1": 0.0, "p2": 100.0, "p3": 0.0},
    }
    # their means are the task's metrics
    metrics = task_metrics(list(units.values()))
    for name, values in TABLE.per_sample_values(units).items():
        assert sum(values.values()) / len(values) == pytest.approx(metrics[name])
