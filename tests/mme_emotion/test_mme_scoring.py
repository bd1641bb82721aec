"""MME-Emotion scoring: the official `cal_metrics.py` formulas, group pooling, judge-free label matching, and the
per-sample / per-task functions and metric table built on them (pure: no network, no files).

Expected numbers are hand-computed literals.  The official metric logic is re-implemented here independently (from
`eval_cot/Overall/metrics/cal_metrics.py` of github.com/FunAudioLLM/MME-Emotion, MIT) and our parser + scoring are
checked against it on a fixed list of judge answers.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
import re

import pytest

from emo_tasks.mme_emotion import scoring
from emo_tasks.mme_emotion.judge import TRUNCATED, Judgement
from emo_tasks.mme_emotion.parsers import Rating, parse_scores, parse_steps
from emo_tasks.mme_emotion.protocol import TaskSpec
from emo_tasks.mme_emotion.scoring import (
    TABLE,
    Count,
    MicroMean,
    SampleResult,
    SampleScore,
    aggregate,
    category_breakdown,
    cot_score,
    failure_counts,
    final_answer_segment,
    find_labels,
    group_aggregate,
    micro_mean,
    offline_recognition,
    per_category,
    rating_value,
    reasoning,
    recognition,
    score_ratings,
    score_sample,
    strict_recognition,
    task_metrics,
)
from emo_tasks.mme_emotion.settings import MMESettings

FG_ER_LABELS = [
    "Excitement", "Engagement", "Fatigue", "Disquietment", "Anticipation", "Fear", "Affection", "Confidence",
    "Happiness", "Disconnection", "Annoyance", "Pain", "Sympathy", "Embarrassment", "Suffering", "Pleasure",
    "Sadness", "Sensitivity", "Peace", "Anger", "Esteem", "Doubt/Confusion", "Disapproval", "Surprise", "Aversion",
    "Yearning",
]  # fmt: skip
FG_SA_LABELS = [
    "very strong negative", "strong negative", "negative", "weak negative", "neutral", "weak positive", "positive",
    "strong positive", "very strong positive",
]  # fmt: skip


# ------------------------------------------------------------------------------------------------ per sample
def test_sample_three_ratings() -> None:
    s = score_ratings([1, 0, 1])
    assert s == SampleScore(recognition=1.0, reasoning=0.5, steps=3)
    assert recognition([1, 0, 1]) == 1.0
    assert reasoning([1, 0, 1]) == 0.5


def test_sample_last_rating_is_recognition() -> None:
    s = score_ratings([1, 1, 0])
    assert (s.recognition, s.reasoning, s.steps) == (0.0, 1.0, 3)


def test_single_rating_earns_no_reasoning_credit() -> None:
    # official: reasoning_scores = scores[:-1] if len(scores) > 1 else [] -> 0.0
    assert reasoning([1]) == 0.0
    assert score_ratings([1]) == SampleScore(1.0, 0.0, 1)


def test_fractional_single_rating() -> None:
    assert score_ratings([0.5]) == SampleScore(0.5, 0.0, 1)


def test_fractional_reasoning_mean() -> None:
    s = score_ratings([1, 0, 0, 0.25])
    assert s.recognition == 0.25
    assert s.reasoning == pytest.approx(1 / 3, abs=1e-12)
    assert s.steps == 4


def test_no_ratings() -> None:
    assert score_ratings([]) is None
    with pytest.raises(ValueError):
        recognition([])
    with pytest.raises(ValueError):
        reasoning([])


# ------------------------------------------------------------------------------------------------ CoT-S
@pytest.mark.parametrize(
    ("alpha", "expected"),
    [(0.0, 40.0), (0.25, 50.0), (0.5, 60.0), (1.0, 80.0)],
)
def test_cot_score_alpha(alpha: float, expected: float) -> None:
    assert cot_score(80.0, 40.0, alpha) == pytest.approx(expected, abs=1e-12)


def test_cot_score_default_alpha_is_half() -> None:
    assert scoring.DEFAULT_ALPHA == 0.5
    assert cot_score(80.0, 40.0) == 60.0


@pytest.mark.parametrize(("rec", "rea"), [(None, 40.0), (80.0, None), (None, None)])
def test_cot_score_missing_part(rec: float | None, rea: float | None) -> None:
    assert cot_score(rec, rea) is None


@pytest.mark.parametrize("alpha", [-0.01, 1.01, 2.0, math.nan])
def test_cot_score_alpha_out_of_range(alpha: float) -> None:
    with pytest.raises(ValueError):
        cot_score(80.0, 40.0, alpha)


# ------------------------------------------------------------------------------------------------ MicroMean
def test_micro_mean_value_and_parts() -> None:
    m = MicroMean(1.0, 3)
    assert float(m) == pytest.approx(0.3333333333333333, abs=1e-15)
    assert m.total == 1.0
    assert m.count == 3
    assert isinstance(m, float)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_micro_mean_pickle_keeps_parts(protocol: int) -> None:
    back = pickle.loads(pickle.dumps(MicroMean(250.0, 6), protocol=protocol))
    assert type(back) is MicroMean
    assert (back.total, back.count) == (250.0, 6)
    assert float(back) == pytest.approx(41.666666666666664, abs=1e-12)


def test_micro_mean_deepcopy_keeps_parts() -> None:
    nested = {"rec": [MicroMean(250.0, 6)]}
    back = copy.deepcopy(nested)["rec"][0]
    assert type(back) is MicroMean
    assert (back.total, back.count) == (250.0, 6)
    shallow = copy.copy(MicroMean(3.0, 2))
    assert (shallow.total, shallow.count) == (3.0, 2)


def test_micro_mean_json_is_plain_float() -> None:
    assert json.dumps(MicroMean(1.0, 4)) == "0.25"
    assert json.loads(json.dumps({"x": MicroMean(1.0, 3)})) == {"x": 0.3333333333333333}


@pytest.mark.parametrize("count", [0, -1])
def test_micro_mean_count_must_be_positive(count: int) -> None:
    with pytest.raises(ValueError):
        MicroMean(1.0, count)


def test_micro_mean_helper() -> None:
    assert micro_mean([]) is None
    assert micro_mean(iter(())) is None
    m = micro_mean([1, 0, 1], scale=100.0)
    assert type(m) is MicroMean
    assert (m.total, m.count) == (200.0, 3)
    assert float(m) == pytest.approx(66.66666666666667, abs=1e-12)


def test_count_survives_pickle_and_deepcopy() -> None:
    assert type(pickle.loads(pickle.dumps(Count(7)))) is Count
    assert type(copy.deepcopy(Count(7))) is Count
    assert copy.deepcopy(Count(7)) == 7


# ------------------------------------------------------------------------------------------------ group pooling
def test_group_pools_micro_means() -> None:
    # Task A: 4 docs, 2 scored, Rec total 150 (mean 75).  Task B: 4 docs, 4 scored, Rec total 100 (mean 25).
    a, b = MicroMean(150.0, 2), MicroMean(100.0, 4)
    pooled = group_aggregate([a, b], [4, 4])
    assert type(pooled) is MicroMean
    assert (pooled.total, pooled.count) == (250.0, 6)
    assert float(pooled) == pytest.approx(41.666666666666664, abs=1e-12)
    # lmms-eval's size-weighted mean of the same two task scores: (75*4 + 25*4) / 8 = 50, not the micro-average.
    assert group_aggregate([75.0, 25.0], [4, 4]) == pytest.approx(50.0, abs=1e-12)
    assert abs(float(pooled) - 50.0) > 8
    # They agree only when every doc was scored (sizes == counts): (75*2 + 25*4) / 6.
    assert group_aggregate([75.0, 25.0], [2, 4]) == pytest.approx(41.666666666666664, abs=1e-12)


def test_group_ignores_sizes_for_micro_means() -> None:
    pooled = group_aggregate([MicroMean(150.0, 2), MicroMean(100.0, 4)], [1000, 1], weight_by_size=False)
    assert (pooled.total, pooled.count) == (250.0, 6)


def test_group_sums_counts() -> None:
    total = group_aggregate([Count(3), None, Count(4)], [10, 10, 10])
    assert type(total) is Count
    assert total == 7


def test_group_skips_none_and_nan() -> None:
    pooled = group_aggregate([None, MicroMean(3.0, 2), MicroMean(1.0, 2)], [5, 2, 2])
    assert (pooled.total, pooled.count) == (4.0, 4)
    assert group_aggregate([math.nan, 2.0, 4.0], [100, 1, 3]) == pytest.approx(3.5, abs=1e-12)


def test_group_all_missing() -> None:
    assert group_aggregate([None, None], [3, 4]) is None
    assert group_aggregate([], []) is None


def test_group_plain_floats() -> None:
    assert group_aggregate([10.0, 40.0], [1, 3]) == pytest.approx(32.5, abs=1e-12)
    assert group_aggregate([10.0, 40.0], [1, 3], weight_by_size=False) == pytest.approx(25.0, abs=1e-12)


# ------------------------------------------------------------------------------------------------ aggregate
def _three_samples() -> list[SampleScore]:
    # [1,0,1] -> (1, 0.5, 3); [0,1] -> (1, 0, 2); [1,1,0.5] -> (0.5, 1, 3)
    return [score_ratings([1, 0, 1]), score_ratings([0, 1]), score_ratings([1, 1, 0.5])]


def test_aggregate_hand_case() -> None:
    agg = aggregate(_three_samples())
    # Rec-S = 100 * (1 + 1 + 0.5) / 3; Rea-S = 100 * (0.5 + 0 + 1) / 3; CoT-S = (83.33 + 50) / 2; steps 8/3
    assert agg.rec_s == pytest.approx(83.33333333333333, abs=1e-9)
    assert (agg.rec_s.total, agg.rec_s.count) == (250.0, 3)
    assert agg.rea_s == pytest.approx(50.0, abs=1e-9)
    assert (agg.rea_s.total, agg.rea_s.count) == (150.0, 3)
    assert agg.cot_s == pytest.approx(66.66666666666667, abs=1e-9)
    assert agg.avg_step == pytest.approx(2.6666666666666665, abs=1e-9)
    assert (agg.avg_step.total, agg.avg_step.count) == (8.0, 3)
    assert agg.n_scored == 3


def test_aggregate_alpha() -> None:
    agg = aggregate(_three_samples(), alpha=0.3)
    assert agg.cot_s == pytest.approx(0.3 * 250 / 3 + 0.7 * 50, abs=1e-9)  # 25 + 35
    assert agg.cot_s == pytest.approx(60.0, abs=1e-9)


def test_aggregate_empty() -> None:
    agg = aggregate([])
    assert (agg.rec_s, agg.rea_s, agg.cot_s, agg.avg_step, agg.n_scored) == (None, None, None, None, 0)


def test_group_cot_equals_cot_of_pooled_parts() -> None:
    a = aggregate(_three_samples())  # rec total 250, rea total 150, n 3
    b = aggregate([score_ratings([0]), score_ratings([1, 1])])  # rec total 100, rea total 100, n 2
    cot = group_aggregate([a.cot_s, b.cot_s], [3, 2])
    # pooled Rec-S = 350/5 = 70, Rea-S = 250/5 = 50 -> CoT-S 60
    assert cot == pytest.approx(60.0, abs=1e-9)
    assert group_aggregate([a.rec_s, b.rec_s], [3, 2]) == pytest.approx(70.0, abs=1e-9)


def test_aggregate_rejects_alpha_out_of_range() -> None:
    with pytest.raises(ValueError):
        aggregate([SampleScore(1.0, 0.5, 3)], alpha=1.5)


# ------------------------------------------------------------------------------------------------ per category
def test_per_category_keyed_by_ground_truth_string_sorted() -> None:
    rows = [
        ("anger,fear", score_ratings([1, 0.5])),  # rec 0.5, rea 1
        ("Sad", score_ratings([1, 1, 1])),  # rec 1, rea 1
        ("anger", score_ratings([0])),  # rec 0, rea 0
        ("anger,fear", score_ratings([0, 0, 1])),  # rec 1, rea 0
    ]
    out = per_category(rows)
    assert list(out) == ["Sad", "anger", "anger,fear"]
    assert out["anger,fear"] == {"rec_s": 75.0, "rea_s": 50.0, "cot_s": 62.5, "avg_step": 2.5, "n_scored": 2}
    assert out["Sad"] == {"rec_s": 100.0, "rea_s": 100.0, "cot_s": 100.0, "avg_step": 3.0, "n_scored": 1}
    assert out["anger"] == {"rec_s": 0.0, "rea_s": 0.0, "cot_s": 0.0, "avg_step": 1.0, "n_scored": 1}
    assert type(out["anger,fear"]["rec_s"]) is float  # plain, not MicroMean


def test_per_category_alpha() -> None:
    out = per_category([("x", score_ratings([1, 0.5]))], alpha=1.0)
    assert out["x"]["cot_s"] == 50.0


# ------------------------------------------------------------------------------------------------ official parity
def _official_parse_score(score_str: str) -> list[float] | None:
    """cal_metrics.py parse_score: first single-line <score> block, every ': n/d', den 0 -> 0."""
    match = re.search(r"<score>(.*?)</score>", score_str)
    if not match:
        return None
    out = []
    for m in re.finditer(r":\s*(\d+)/(\d+)", match.group(1)):
        num, den = int(m.group(1)), int(m.group(2))
        out.append(0.0 if den == 0 else num / den)
    return out


def _official_metrics(judge_answers: list[str | None]) -> dict[str, object]:
    """cal_metrics.py process_data + save_results on the concatenated answers (x100 as printed)."""
    acc = rea = steps = 0.0
    count = 0
    used = []
    for i, answer in enumerate(judge_answers):
        scores = _official_parse_score(str(answer))
        if not scores:
            continue
        used.append(i)
        acc += scores[-1]
        rest = scores[:-1] if len(scores) > 1 else []
        rea += sum(rest) / len(rest) if rest else 0.0
        steps += len(scores)
        count += 1
    return {"rec": 100 * acc / count, "rea": 100 * rea / count, "steps": steps / count, "count": count, "used": used}


JUDGE_ANSWERS: list[str | None] = [
    "<score>Step 1: 1/1, Step 2: 0/1, Step 3: 1/1</score>",  # 0: [1,0,1]
    "<score>Step 1: 1/1</score>",  # 1: [1]
    "The prediction is partly right.\n<score>Step 1: 1/1, Step 2: 2/3</score>",  # 2: [1, 2/3]
    "<score>Step 1: 1/0, Step 2: 1/1</score>",  # 3: den 0 -> [0, 1]
    "<score>Step 1: 0/1, Step 2: 1/1</score> or maybe <score>Step 1: 1/1</score>",  # 4: first block [0, 1]
    "<score>Step 1: 1/1,\nStep 2: 0/1</score>",  # 5: block on two lines -> no block (skipped)
    "Step 1: 1/1, Step 2: 1/1",  # 6: no block (skipped)
    "<score>Step 1:1/1, Step 2:0/1</score>",  # 7: no space after colon -> [1, 0]
    "<score></score>",  # 8: empty block (skipped)
    "<score>Step 1: 1 / 1</score>",  # 9: spaces around the slash -> no rating (skipped)
    "<score>Step 1: 1/1, Step 2: 1/1,\nStep 3: 0/1</score> then <score>Step 1: 0/2</score>",  # 10: [0]
    "<SCORE>Step 1: 1/1</SCORE>",  # 11: upper-case tag (skipped)
    "<score>Step 1: 1/1, Step 2: 1/1, Step 3: 0/1, Step 4: 1/4</score>",  # 12: [1,1,0,0.25]
    None,  # 13: judge failure, official str(None) -> no block (skipped)
    "<score>Step 1:   1/2 Step 2: 3/2</score>",  # 14: [0.5, 1.5] (no clamping)
    "<score>Step 1: 1/1 <score>Step 2: 0/1</score>",  # 15: nested open tag -> [1, 0]
]
OFFICIAL_USED = [0, 1, 2, 3, 4, 7, 10, 12, 14, 15]


def _ours(answers: list[str | None]) -> list[SampleScore | None]:
    return [score_ratings(parse_scores(a).values) for a in answers]


def test_reference_reimplementation_hand_numbers() -> None:
    # Pin the reference itself with hand-computed totals: rec sum 77/12, rea sum 14/3, 21 steps over 10 samples.
    ref = _official_metrics(JUDGE_ANSWERS)
    assert ref["used"] == OFFICIAL_USED
    assert ref["count"] == 10
    assert ref["rec"] == pytest.approx(64.16666666666667, abs=1e-9)
    assert ref["rea"] == pytest.approx(46.666666666666664, abs=1e-9)
    assert ref["steps"] == pytest.approx(2.1, abs=1e-12)


def test_parse_and_score_match_official_per_sample() -> None:
    ours = _ours(JUDGE_ANSWERS)
    assert [i for i, s in enumerate(ours) if s is not None] == OFFICIAL_USED
    for i, answer in enumerate(JUDGE_ANSWERS):
        official = _official_parse_score(str(answer))
        if not official:
            assert ours[i] is None, i
            continue
        assert parse_scores(answer).values == pytest.approx(official, abs=1e-9), i
        rest = official[:-1]
        assert ours[i].recognition == pytest.approx(official[-1], abs=1e-9), i
        assert ours[i].reasoning == pytest.approx(sum(rest) / len(rest) if rest else 0.0, abs=1e-9), i
        assert ours[i].steps == len(official), i


def test_aggregate_matches_official() -> None:
    ref = _official_metrics(JUDGE_ANSWERS)
    agg = aggregate([s for s in _ours(JUDGE_ANSWERS) if s is not None])
    assert agg.n_scored == ref["count"]
    assert agg.rec_s == pytest.approx(ref["rec"], abs=1e-9)
    assert agg.rea_s == pytest.approx(ref["rea"], abs=1e-9)
    assert agg.avg_step == pytest.approx(ref["steps"], abs=1e-9)
    assert agg.cot_s == pytest.approx(0.5 * ref["rec"] + 0.5 * ref["rea"], abs=1e-9)
    assert agg.cot_s == pytest.approx(55.416666666666664, abs=1e-9)


def test_overall_is_micro_average_over_concatenated_tasks() -> None:
    task_a, task_b = JUDGE_ANSWERS[:8], JUDGE_ANSWERS[8:]
    agg_a = aggregate([s for s in _ours(task_a) if s is not None])
    agg_b = aggregate([s for s in _ours(task_b) if s is not None])
    assert (agg_a.n_scored, agg_b.n_scored) == (6, 4)
    assert agg_a.rec_s == pytest.approx(77.77777777777777, abs=1e-9)  # 100 * (14/3) / 6
    assert agg_b.rec_s == pytest.approx(43.75, abs=1e-9)  # 100 * 1.75 / 4
    ref = _official_metrics(task_a + task_b)
    sizes = [len(task_a), len(task_b)]
    for field, key in (("rec_s", "rec"), ("rea_s", "rea"), ("avg_step", "steps")):
        pooled = group_aggregate([getattr(agg_a, field), getattr(agg_b, field)], sizes)
        assert pooled == pytest.approx(ref[key], abs=1e-9), field
    pooled_cot = group_aggregate([agg_a.cot_s, agg_b.cot_s], sizes)
    assert pooled_cot == pytest.approx(0.5 * ref["rec"] + 0.5 * ref["rea"], abs=1e-9)
    # The mean of the task scores (what a plain-float group would give with equal sizes) is not the official number.
    assert (float(agg_a.rec_s) + float(agg_b.rec_s)) / 2 == pytest.approx(60.76388888888889, abs=1e-9)
    assert abs(group_aggregate([float(agg_a.rec_s), float(agg_b.rec_s)], sizes) - ref["rec"]) > 3


def test_parse_steps_on_official_examples() -> None:
    example_1 = (
        "<step>Step 1: Observe the setting and characters in the video, noting any relevant details such as location "
        "and participants' appearance. Step 2: Analyze the facial expressions and movements, such as furrowed brows "
        "and downturned eyes, looking for indicators of specific emotions. Step 3: Consider verbal and non-verbal "
        "cues, including mouth movements and gaze direction, that signify communication and emotional responses. "
        "Step 4: Synthesize observations to understand the overall emotional state conveyed by the participant. "
        "Step 5: Based on the analysis, determine that the predicted emotion is neutral.</step>"
    )
    parsed = parse_steps(example_1)
    assert parsed.ok and len(parsed) == 5
    assert parsed.steps[-1] == "Step 5: Based on the analysis, determine that the predicted emotion is neutral."
    single = parse_steps("<step>Step 1: The predicted emotion is None.</step>")
    assert single.steps == ("Step 1: The predicted emotion is None.",)


# ------------------------------------------------------------------------------------------------ find_labels
def test_find_labels_case_insensitive() -> None:
    assert find_labels("The person looks HAPPY.", ["sad", "happy"]) == ["happy"]
    assert find_labels("she is sad", ["Sad", "Happy"]) == ["Sad"]


def test_find_labels_whole_words() -> None:
    assert find_labels("He seems unhappy.", ["happy", "sad"]) == []
    assert find_labels("saddest day", ["sad"]) == []
    assert find_labels("happy!", ["happy"]) == ["happy"]
    assert find_labels("(sad)", ["sad"]) == ["sad"]


def test_find_labels_longest_first_no_double_count() -> None:
    assert find_labels("Answer: weak positive", FG_SA_LABELS) == ["weak positive"]
    assert find_labels("very strong negative", FG_SA_LABELS) == ["very strong negative"]
    assert find_labels("strong negative, then positive", FG_SA_LABELS) == ["strong negative", "positive"]
    assert find_labels("weak positive or positive", FG_SA_LABELS) == ["weak positive", "positive"]


def test_find_labels_with_slash() -> None:
    assert find_labels("I'd say doubt/confusion.", FG_ER_LABELS) == ["Doubt/Confusion"]
    assert find_labels("some doubt here", FG_ER_LABELS) == []


def test_find_labels_order_of_appearance_and_once() -> None:
    text = "fear first, then anger, fear again and Anger."
    assert find_labels(text, ["anger", "fear", "sad"]) == ["fear", "anger"]


def test_find_labels_empty() -> None:
    assert find_labels("", ["happy"]) == []
    assert find_labels("happy", []) == []


# ------------------------------------------------------------------------------------------------ final answer
def test_final_answer_segment_last_marker_wins() -> None:
    answer = "Answer: sad\nOn reflection...\nFinal answer: happy "
    assert final_answer_segment(answer) == "happy"
    assert final_answer_segment("step 1 ... ANSWER : Anger") == "Anger"


def test_final_answer_segment_without_marker() -> None:
    assert final_answer_segment("The face is tense.\nangry\n\n   \n") == "angry"


def test_final_answer_segment_empty() -> None:
    assert final_answer_segment("") == ""
    assert final_answer_segment("\n \n") == ""


# ------------------------------------------------------------------------------------------------ offline recognition
ER_LABELS = ["happy", "sad", "angry", "neutral"]


def test_offline_single_label_exact_match() -> None:
    m = offline_recognition("The mouth curves up.\nAnswer: happy", ER_LABELS, ["happy"], multi_label=False)
    assert (m.value, m.predicted, m.correct, m.n_gold) == (1.0, ("happy",), 1, 1)


def test_offline_single_label_wrong() -> None:
    m = offline_recognition("Answer: sad", ER_LABELS, ["happy"], multi_label=False)
    assert (m.value, m.predicted, m.correct) == (0.0, ("sad",), 0)


def test_offline_single_label_two_labels_is_no_answer() -> None:
    m = offline_recognition("Answer: happy or sad", ER_LABELS, ["happy"], multi_label=False)
    assert m.value == 0.0
    assert m.predicted == ("happy", "sad")
    assert m.correct == 1


def test_offline_case_insensitive() -> None:
    m = offline_recognition("answer: HAPPY", ["Happy", "Sad"], ["happy"], multi_label=False)
    assert m.value == 1.0
    assert m.predicted == ("Happy",)


def test_offline_uses_final_segment_only() -> None:
    m = offline_recognition("It could be sad at first.\nAnswer: happy", ER_LABELS, ["sad"], multi_label=False)
    assert (m.value, m.predicted) == (0.0, ("happy",))


def test_offline_multi_label_c_over_k() -> None:
    labels = ["anger", "fear", "sad", "happy"]
    m = offline_recognition("Answer: anger, sad", labels, ["anger", "fear"], multi_label=True)
    assert (m.value, m.predicted, m.correct, m.n_gold) == (0.5, ("anger", "sad"), 1, 2)
    full = offline_recognition("Answer: fear and anger", labels, ["anger", "fear"], multi_label=True)
    assert full.value == 1.0
    none = offline_recognition("Answer: neutral", labels, ["anger", "fear"], multi_label=True)
    assert (none.value, none.predicted) == (0.0, ())


def test_offline_multi_label_listing_everything_gets_k_over_k() -> None:
    # the official C/K rule rewards over-prediction: all 26 labels for a 2-label row -> 2/2
    m = offline_recognition("Answer: " + ", ".join(FG_ER_LABELS), FG_ER_LABELS, ["Peace", "Fear"], multi_label=True)
    assert m.value == 1.0
    assert len(m.predicted) == 26
    assert strict_recognition(m.correct, m.n_gold, len(m.predicted)) == pytest.approx(2 / 26, abs=1e-12)


# ------------------------------------------------------------------------------------------------ strict recognition
def test_strict_recognition() -> None:
    assert strict_recognition(2, 2, 26) == pytest.approx(0.07692307692307693, abs=1e-12)
    assert strict_recognition(1, 2, 2) == 0.5  # P <= K: C/K
    assert strict_recognition(1, 2, 1) == 0.5
    assert strict_recognition(1, 2, 4) == 0.25  # C/P
    assert strict_recognition(1, 3, 0) == pytest.approx(1 / 3, abs=1e-12)  # P = 0 falls back to K
    assert strict_recognition(0, 0, 3) == 0.0


# ------------------------------------------------------------------------------------------------ score_sample
BINARY = TaskSpec(key="T", task="mme_emotion_t", file_stem="T", title="T", target="emotion", label_separator=None,
                  last_step_rule="binary", step={}, judge={})  # fmt: skip
FRACTION = TaskSpec(key="M", task="mme_emotion_m", file_stem="M", title="M", target="emotion", label_separator=",",
                    last_step_rule="fraction", step={}, judge={})  # fmt: skip


def _item(label: str, answer: str, label_set: list[str], spec: TaskSpec = BINARY) -> dict:
    return {"label": label, "labels": spec.gold_labels(label), "label_set": label_set, "answer": answer}


def _judged(ratings: list[tuple[int, int]], steps: list[str], **kw) -> Judgement:
    return Judgement(task="T", row=0, video_id="v", label="x", answer="a", ratings=ratings, steps=steps, **kw)


def _settings(**values: str) -> MMESettings:
    return MMESettings.from_env({"EMO_CACHE_DIR": "/nonexistent/cache", **values}, "sample")


API = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}


def test_score_sample_judged_binary_task() -> None:
    j = _judged([(1, 1), (0, 1), (1, 1)], ["Step 1: x.", "Step 2: y.", "Step 3: The predicted emotion is sad."])
    r = score_sample(BINARY, _item("sad", "Answer: sad", ER_LABELS), j)
    assert r == SampleResult("sad", "scored", 1.0, 0.5, 3, 1.0, ("sad",))
    assert r.score == SampleScore(1.0, 0.5, 3)


def test_score_sample_judged_fraction_task_strict_is_c_over_max_k_p() -> None:
    labels = ["anger", "fear", "sad", "happy"]
    j = _judged([(1, 1), (2, 2)], ["Step 1: x.", "Step 2: anger, fear, sad and happy."])
    r = score_sample(FRACTION, _item("anger,fear", "...", labels, FRACTION), j)
    assert (r.status, r.recognition, r.reasoning, r.n_steps) == ("scored", 1.0, 1.0, 2)
    assert r.predicted_labels == ("anger", "fear", "sad", "happy")
    assert r.strict_recognition == 0.5  # C=2 of max(K=2, P=4)


def test_score_sample_zero_denominator_and_step_text_fallback() -> None:
    j = _judged([(1, 0), (1, 2)], [], step_text="the predicted emotion is fear")
    r = score_sample(FRACTION, _item("anger,fear", "...", ["anger", "fear"], FRACTION), j)
    assert (r.recognition, r.reasoning, r.n_steps) == (0.5, 0.0, 2)  # 1/0 counts 0 (official)
    assert r.predicted_labels == ("fear",) and r.strict_recognition == 0.5  # last step = the whole step text
    assert rating_value(1, 0) == Rating(1, 0).value == 0.0 and rating_value(2, 3) == Rating(2, 3).value


def test_score_sample_failed_judgement_has_no_numbers() -> None:
    j = _judged([], ["Step 1: x."])
    j.fail("judge", "invalid_answer", "1 ratings for 2 steps")
    assert score_sample(BINARY, _item("sad", "a", ER_LABELS), j) == SampleResult("sad", "judge_failed")
    assert SampleResult("sad", "judge_failed").score is None


def test_a_judge_answer_cut_off_in_its_reasoning_is_a_failure_counted_apart_as_truncated() -> None:
    cut, wrong = _judged([], ["Step 1: x."]), _judged([], ["Step 1: x."])
    cut.fail("judge", TRUNCATED, "cut off inside its reasoning")
    wrong.fail("judge", "invalid_answer", "1 ratings for 2 steps")
    samples = [score_sample(BINARY, _item("sad", "a", ER_LABELS), j) for j in (cut, wrong)]
    assert samples[0] == SampleResult("sad", "judge_failed", truncated=True) and not samples[1].truncated
    m = task_metrics(samples, _settings(**API))
    assert (m["n_judge_failed"], m["n_judge_truncated"]) == (2, 1) and type(m["n_judge_truncated"]) is Count
    offline = task_metrics([SampleResult("a", "offline", 1.0, None, None, 1.0)], _settings(EMO_JUDGE="offline"))
    assert offline["n_judge_truncated"] == 0 and type(offline["n_judge_truncated"]) is Count  # no judge, no cut
    assert task_metrics([], _settings(EMO_JUDGE="defer"))["n_judge_truncated"] is None  # judged later


def test_score_sample_offline() -> None:
    r = score_sample(BINARY, _item("happy", "The mouth curves up.\nAnswer: happy", ER_LABELS))
    assert r == SampleResult("happy", "offline", 1.0, None, None, 1.0, ("happy",))
    assert r.score is None  # offline samples are not judge scores
    m = score_sample(FRACTION, _item("Peace,Fear", "Answer: " + ", ".join(FG_ER_LABELS), FG_ER_LABELS, FRACTION))
    assert m.recognition == 1.0 and m.strict_recognition == pytest.approx(2 / 26, abs=1e-15)


# ------------------------------------------------------------------------------------------------ task_metrics
def _api_samples() -> list[SampleResult]:
    return [
        SampleResult("sad", "scored", 1.0, 0.5, 3, 1.0),
        SampleResult("sad", "scored", 0.5, 0.0, 2, 0.25),
        SampleResult("happy", "judge_failed"),
        SampleResult("happy", "scored", 0.0, 1.0, 4, 0.0),
    ]


def test_task_metrics_api_hand_case() -> None:
    m = task_metrics(_api_samples(), _settings(**API), token_counts=[10, 20, 30, 40])
    assert list(m) == list(TABLE.names)
    # Rec-S 100*(1+0.5+0)/3 = 50, Rea-S 100*(0.5+0+1)/3 = 50, CoT-S 50, strict 100*1.25/3, steps 9/3
    assert (m["rec_s"].total, m["rec_s"].count) == (150.0, 3)
    assert (m["rea_s"].total, m["rea_s"].count) == (150.0, 3)
    assert (m["cot_s"].total, m["cot_s"].count) == (150.0, 3)
    assert (m["rec_s_strict"].total, m["rec_s_strict"].count) == (125.0, 3)
    assert (m["avg_step"].total, m["avg_step"].count) == (9.0, 3)
    assert (m["avg_token"].total, m["avg_token"].count) == (100.0, 4)  # over every sample, failed ones too
    assert type(m["n_scored"]) is Count and m["n_scored"] == 3
    assert type(m["n_judge_failed"]) is Count and m["n_judge_failed"] == 1


def test_task_metrics_alpha_comes_from_settings() -> None:
    m = task_metrics(_api_samples()[:2], _settings(**API, EMO_MME_ALPHA="0.3"))
    # rec total 150, rea total 50 over 2: CoT total 0.3*150 + 0.7*50 = 80
    assert m["cot_s"].total == pytest.approx(80.0, abs=1e-12) and m["cot_s"].count == 2
    assert m["avg_token"] is None  # no token counts (tokenizer unavailable)


def test_task_metrics_offline() -> None:
    samples = [SampleResult("a", "offline", 1.0, None, None, 1.0), SampleResult("b", "offline", 0.5, None, None, 0.25)]
    m = task_metrics(samples, _settings(EMO_JUDGE="offline"), token_counts=[3, 5])
    assert (m["rec_s"].total, m["rec_s"].count) == (150.0, 2)
    assert (m["rec_s_strict"].total, m["rec_s_strict"].count) == (125.0, 2)
    assert (m["rea_s"], m["cot_s"], m["avg_step"]) == (None, None, None)
    assert float(m["avg_token"]) == 4.0
    assert (m["n_scored"], m["n_judge_failed"]) == (2, 0) and type(m["n_judge_failed"]) is Count


def test_task_metrics_with_nothing_scored() -> None:
    m = task_metrics([SampleResult("a", "judge_failed")], _settings(**API))
    assert [m[k] for k in ("rec_s", "rea_s", "cot_s", "rec_s_strict", "avg_step")] == [None] * 5
    assert (m["n_scored"], m["n_judge_failed"]) == (0, 1)


def test_group_pools_task_metrics_as_micro_averages() -> None:
    settings = _settings(**API)
    a = task_metrics(_api_samples(), settings, [1, 1, 1, 1])  # rec 150/3
    b = task_metrics([SampleResult("x", "scored", 1.0, 1.0, 1, 1.0)], settings, [5])  # rec 100/1
    sizes = [4, 1]
    pooled = {k: group_aggregate([a[k], b[k]], sizes) for k in TABLE.names}
    assert (pooled["rec_s"].total, pooled["rec_s"].count) == (250.0, 4)  # 62.5, not (50*4 + 100)/5 = 60
    assert float(pooled["cot_s"]) == 62.5 and float(pooled["avg_token"]) == 9 / 5
    assert type(pooled["n_scored"]) is Count and (pooled["n_scored"], pooled["n_judge_failed"]) == (4, 1)


def test_category_breakdown_and_failure_counts() -> None:
    out = category_breakdown(_api_samples(), _settings(**API))
    assert out == {
        "happy": {"rec_s": 0.0, "rea_s": 100.0, "cot_s": 50.0, "avg_step": 4.0, "n_scored": 1},
        "sad": {"rec_s": 75.0, "rea_s": 25.0, "cot_s": 50.0, "avg_step": 2.5, "n_scored": 2},
    }
    assert category_breakdown(_api_samples(), _settings(EMO_JUDGE="offline")) == {}
    assert failure_counts([("judge", "timeout"), ("step_agent", "http_400"), ("judge", "timeout")]) == {
        "judge:timeout": 2, "step_agent:http_400": 1,
    }  # fmt: skip


# ------------------------------------------------------------------------------------------------ metric table
def test_table_names_directions_and_headline() -> None:
    assert TABLE.names == ("rec_s", "rea_s", "cot_s", "rec_s_strict", "avg_step", "avg_token", "n_scored",
                           "n_judge_failed", "n_judge_truncated")  # fmt: skip
    assert TABLE.lower_is_better == {"avg_token", "n_judge_failed", "n_judge_truncated"}
    assert [m.name for m in TABLE.headline] == ["rec_s", "rea_s", "cot_s"]
    assert {m.name: m.display for m in TABLE if m.title} == {
        "rec_s": "Rec-S", "rea_s": "Rea-S", "cot_s": "CoT-S", "avg_step": "Avg Step", "avg_token": "Avg Token",
    }  # fmt: skip
    assert {m.name for m in TABLE if m.outcome} == {"rec_s", "rea_s", "cot_s", "rec_s_strict"}
    assert {m.name for m in TABLE if m.per_sample is None} == {"n_scored", "n_judge_failed", "n_judge_truncated"}
    # the report: Markdown tables as before (no strict column), the overall plot panel, why offline values are null
    assert [m.name for m in TABLE if m.in_table] == ["rec_s", "rea_s", "cot_s", "avg_step", "avg_token"]
    assert [m.name for m in TABLE if m.plot] == ["rec_s", "rea_s", "cot_s"]
    assert {m.name for m in TABLE if m.null_reason} == {"rea_s", "cot_s", "avg_step"}


def test_table_per_sample_values_over_judge_log_rows() -> None:
    rows = {
        ("t", 0): {"status": "scored", "recognition": 0.5, "reasoning": 0.25, "n_steps": 3,
                   "strict_recognition": 0.25, "alpha": 0.3, "answer_tokens": 12},
        ("t", 1): {"status": "offline", "recognition": 1.0, "reasoning": None, "n_steps": None,
                   "strict_recognition": 1.0, "answer_tokens": 4},
        ("t", 2): {"status": "judge_failed", "recognition": None, "answer_tokens": 7},
        ("t", 3): {"status": "scored", "recognition": 1.0, "reasoning": None, "n_steps": None,
                   "strict_recognition": None},
    }  # fmt: skip
    values = TABLE.per_sample_values(rows)
    assert values["rec_s"] == {("t", 0): 50.0, ("t", 1): 100.0, ("t", 3): 100.0}
    assert values["rea_s"] == {("t", 0): 25.0, ("t", 3): 0.0}
    assert values["cot_s"] == {("t", 0): 0.3 * 50.0 + 0.7 * 25.0, ("t", 3): 0.5 * 100.0 + 0.5 * 0.0}
    assert values["rec_s_strict"] == {("t", 0): 25.0, ("t", 1): 100.0}
    assert values["avg_step"] == {("t", 0): 3.0, ("t", 3): 0.0}
    assert values["avg_token"] == {("t", 0): 12.0, ("t", 1): 4.0, ("t", 2): 7.0}
    assert set(values) == {"rec_s", "rea_s", "cot_s", "rec_s_strict", "avg_step", "avg_token"}
