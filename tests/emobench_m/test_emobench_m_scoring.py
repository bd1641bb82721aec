"""EmoBench-M's rule-based scoring against the authors' own code (vendored in `official_eval.py`, pinned commit),
and by hand.  Pure and fast: no lmms-eval run."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from emo_tasks.emobench_m import scoring
from emo_tasks.emobench_m.protocol import scenarios

sys.path.insert(0, str(Path(__file__).parent))
import official_eval  # noqa: E402  (the authors' functions, vendored)

SCENARIOS = scenarios()


def _theirs_classification(tmp_path: Path, records: list[dict[str, str]]) -> dict[str, float]:
    src, out = tmp_path / "in.json", tmp_path / "out.json"
    src.write_text(json.dumps(records), encoding="utf-8")
    official_eval.evaluate_classification([str(src)], str(out))
    return json.loads(out.read_text(encoding="utf-8"))


def _theirs_joint(tmp_path: Path, records: list[dict[str, str]]) -> dict[str, float]:
    src, out = tmp_path / "joint.json", tmp_path / "joint_out.json"
    src.write_text(json.dumps(records), encoding="utf-8")
    official_eval.evaluate_joint(str(src), str(out))
    return json.loads(out.read_text(encoding="utf-8"))


def _answers(rng: random.Random, labels: list[str], n: int) -> list[str]:
    """Answers as models give them: the requested format, a bare label, a sentence, no label, empty."""
    out = []
    for _ in range(n):
        label = rng.choice(labels)
        out.append(rng.choice([f"{{'emotion': '{label}'}}", label.upper(), f"I think it is {label}.", "no idea", "",
                               "  ", f"  {label} "]))  # fmt: skip
    return out


@pytest.mark.parametrize("key", [k for k, s in SCENARIOS.items() if s.kind == scoring.CLASSIFICATION])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_classification_matches_the_authors_code(tmp_path: Path, key: str, seed: int) -> None:
    """Same predictions through their `evaluate_classification` and ours: every metric equal (to 1e-12: theirs
    sums with numpy), and the task metrics are the same numbers x 100."""
    sc, rng = SCENARIOS[key], random.Random(seed)
    golds = [rng.choice(sc.labels) for _ in range(60)]
    units = [
        scoring.score_sample(sc.kind, a, g, sc.labels)
        for a, g in zip(_answers(rng, list(sc.labels), 60), golds, strict=True)
    ]
    records = [{"video": f"{i}.mp4", "expected_value": u.gold, "predicted_value": u.predicted}
               for i, u in enumerate(units)]  # fmt: skip
    theirs = _theirs_classification(tmp_path, records)
    ours = scoring.official_classification([(r["expected_value"], r["predicted_value"]) for r in records])
    assert ours is not None and set(ours) == set(theirs)
    for k in theirs:
        assert ours[k] == pytest.approx(theirs[k], rel=1e-12, abs=1e-15), k
    task = scoring.task_metrics(units)
    for mine, their in (("accuracy", "accuracy"), ("precision", "precision"), ("recall", "recall"), ("f1", "f1_score")):
        assert task[mine] == pytest.approx(100 * theirs[their], rel=1e-12, abs=1e-12), mine
    assert task["n_scored"] == sum(1 for u in units if u.scored) < 60  # empty answers are left out, as theirs


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_joint_matches_the_authors_code(tmp_path: Path, seed: int) -> None:
    sc, rng = SCENARIOS["mc_eiu"], random.Random(seed)
    units = []
    for _ in range(80):
        ge, gi, pe, pi = (rng.choice(sc.labels), rng.choice(sc.intents), rng.choice(sc.labels), rng.choice(sc.intents))
        answer = rng.choice([f"{{'emotion label': '{pe}', 'intent label': '{pi}'}}", f"{pe} and {pi}", f"{pe}", "",
                             "hmm"])  # fmt: skip
        units.append(scoring.score_sample(sc.kind, answer, ge, sc.labels, sc.intents, gi))
    records = [{"modal_path": f"{i}.mp4", "expected_emotion": u.gold, "predicted_emotion": u.predicted,
                "expected_intent": u.gold_intent, "predicted_intent": u.predicted_intent}
               for i, u in enumerate(units)]  # fmt: skip
    theirs = _theirs_joint(tmp_path, records)
    ours = scoring.official_joint([(r["expected_emotion"], r["predicted_emotion"], r["expected_intent"],
                                    r["predicted_intent"]) for r in records])  # fmt: skip
    assert ours is not None and set(ours) == set(theirs)
    for k in theirs:
        assert ours[k] == pytest.approx(theirs[k], rel=1e-12, abs=1e-15), k
    task = scoring.task_metrics(units)
    assert task["accuracy"] == pytest.approx(100 * theirs["joint_accuracy"], rel=1e-12)
    assert task["f1"] == pytest.approx(100 * theirs["joint_f1"], rel=1e-12)
    assert task["n_scored"] == theirs["total"]


def test_weighted_metrics_by_hand() -> None:
    """a,a,b,c vs a,b,b,a: a P 1/2 R 1/2 F1 1/2 (support 2); b P 1/2 R 1 F1 2/3 (1); c 0 0 0 (1).
    Weighted: P (1 + 1/2) / 4 = 0.375, R 2/4 = 0.5 (= accuracy), F1 (1 + 2/3) / 4 = 5/12."""
    m = scoring.official_classification([("a", "a"), ("a", "b"), ("b", "b"), ("c", "a")])
    assert m == pytest.approx({"accuracy": 0.5, "precision": 0.375, "recall": 0.5, "f1_score": 5 / 12})


def test_the_authors_filter_and_ours() -> None:
    """An empty predicted value is left out (their rule); an answer naming no label keeps its text: wrong."""
    labels = ("positive", "negative")
    kept = scoring.score_sample("classification", "I cannot tell", "positive", labels)
    dropped = scoring.score_sample("classification", "   ", "positive", labels)
    right = scoring.score_sample("classification", "{'emotion': 'Positive'}", "positive", labels)
    assert (kept.scored, kept.parsed, kept.right, kept.predicted) == (True, False, False, "i cannot tell")
    assert (dropped.scored, dropped.parsed) == (False, False)
    m = scoring.task_metrics([kept, dropped, right])
    assert (m["accuracy"], m["coverage"], m["n_samples"], m["n_scored"]) == (50.0, pytest.approx(100 / 3), 3, 2)


@pytest.mark.parametrize(
    ("answer", "label"),
    [
        ("{'emotion': 'weak negative'}", "weak negative"),
        ('{"emotion": "neutral"}', "neutral"),
        ("Strong Positive.", "strong positive"),
        ("The speaker sounds weak negative overall", "weak negative"),  # not "negative": inside a longer label
        ("weak positive, not weak negative", "weak positive"),  # the first label named
        ("nonnegative", None),  # whole words only
        ("", None),
        (None, None),
    ],
)
def test_read_label(answer: str | None, label: str | None) -> None:
    assert scoring.read_label(answer, SCENARIOS["fgmsa"].labels) == label


def test_read_joint() -> None:
    sc = SCENARIOS["mc_eiu"]
    assert scoring.read_joint("{'emotion label': 'neutral', 'intent label': 'neutral'}", sc.labels, sc.intents) == (
        "neutral", "neutral")  # fmt: skip
    assert scoring.read_joint("Neutral emotion, the intent is consoling", sc.labels, sc.intents) == (
        "neutral", "consoling")  # fmt: skip
    assert scoring.read_joint("sad", sc.labels, sc.intents) == ("sad", None)


def test_group_pools_means_and_sums_counts() -> None:
    a = scoring.task_metrics([scoring.score_sample("classification", "x", "x", ("x", "y"))])
    b = scoring.task_metrics([scoring.score_sample("classification", "y", "x", ("x", "y"))] * 3)
    assert scoring.group_aggregate([a["accuracy"], b["accuracy"]], [1, 3]) == 25.0  # 1 right of 4, not (100+0)/2
    assert scoring.group_aggregate([a["n_samples"], b["n_samples"]], [1, 3]) == 4
    assert scoring.group_aggregate([a["f1"], b["f1"]], [1, 3]) is None  # weighted F1: per scenario only


def test_generation_bleu_is_nltks_and_missing_scorers_are_none() -> None:
    from nltk.translate.bleu_score import sentence_bleu

    ref = "the audience laughed because the phone was smashed beyond repair"
    pred = "the audience laughed because the phone was smashed and sold"
    u = scoring.score_sample("generation", pred, ref)
    assert u.bleu == sentence_bleu([ref.split()], pred.split()) > 0
    m = scoring.task_metrics([u])
    assert m["bleu"] == pytest.approx(100 * u.bleu) and m["accuracy"] is None and m["bert_score"] is None


def test_rouge_l_by_hand_is_lcs_f_on_porter_stems() -> None:
    """rouge-score lowercases, splits on non-alphanumerics and Porter-stems tokens longer than 3 characters:
    reference the/cat/are/run/quickli (5), prediction a/cat/run/quickli (4); their longest common subsequence is
    cat run quickli (3), so P = 3/4, R = 3/5 and F = 2PR / (P + R) = 2/3.  Without the stemmer only "quickly" would
    match (F = 2/9): the authors' `use_stemmer=True` is kept."""
    assert scoring.rouge_l("A cat runs quickly!", "The cats are running quickly.") == pytest.approx(2 / 3, abs=1e-12)
    assert scoring.rouge_l("no word shared", "The cats are running quickly.") == 0.0
    u = scoring.score_sample("generation", "A cat runs quickly!", "The cats are running quickly.")
    assert scoring.task_metrics([u])["rouge_l"] == pytest.approx(100 * 2 / 3, abs=1e-9)


def test_generation_metrics_match_the_authors_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Their `evaluate_generation` (vendored) and ours on the same predictions: the average BLEU and ROUGE-L over the
    answers with both texts (an empty one left out by both).  BERTScore is a stand-in (its weights cannot be
    downloaded here), so their `avg_bert` is not compared; ours is N/A without bert-score."""
    import numpy as np

    monkeypatch.setattr(official_eval, "bert_score", lambda preds, refs, lang: (None, None, np.array([0.5])))
    rng = random.Random(3)
    words = "the audience laughed because he she sold a smashed phone literal reply joke running runs cats".split()
    rows = [{"prediction": " ".join(rng.choices(words, k=rng.randint(3, 12))),
             "reference": " ".join(rng.choices(words, k=rng.randint(5, 14)))} for _ in range(12)]  # fmt: skip
    rows.append({"prediction": "", "reference": "the audience laughed"})
    src, out = tmp_path / "gen.json", tmp_path / "metrics.json"
    src.write_text(json.dumps(rows), encoding="utf-8")
    official_eval.evaluate_generation(str(src), str(out))
    theirs = json.loads(out.read_text(encoding="utf-8"))
    ours = scoring.task_metrics([scoring.score_sample("generation", r["prediction"], r["reference"]) for r in rows])
    assert theirs["total"] == ours["n_scored"] == 12
    assert ours["rouge_l"] == pytest.approx(100 * theirs["avg_rouge"], rel=1e-12, abs=1e-12) and ours["rouge_l"] > 0
    assert ours["bleu"] == pytest.approx(100 * theirs["avg_bleu"], rel=1e-12, abs=1e-12)
    assert ours["bert_score"] is None
