"""Each benchmark's `view_samples` (what `emo-tasks view` shows of a sample) on small hand-made run folders (the
runs of `tests/results/test_export.py`, sample logs laid out as lmms-eval 0.7.3 writes them: no lmms-eval, fast).

Checked per benchmark: one view per unit, its values equal to what `read_samples` gives for the same unit (both
read the same files by the same functions), the evidence present, and a missing log giving [].  MME-Emotion also:
a judge-failed row's stage and reason, the doc id from the sample log, and another run's judge log in the same
folder not used (as `read_samples` refuses it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_export import DATE, MME_ROWS, MVEI_PAIRS, STAMP, _jsonl, make_mme_run, make_multiemo_run, make_mvei_run

from emo_tasks import benchmarks
from emo_tasks.benchmarks import SampleView

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # bpe_openai's own use of importlib.resources

ER_LAB = "mme_emotion_sample_er_lab"


def _views(key: str, run: Path, task: str) -> tuple[list[SampleView], dict[str, dict]]:
    """The benchmark's views of a task and, for comparison, its `read_samples` values."""
    bench = benchmarks.benchmark(key)
    results = run / f"{DATE}_results.json"
    views = benchmarks.load_object(bench.view_samples)(run, results, task)
    return views, bench.read_samples(run, results, task, {}).values


def _same_values(views: list[SampleView], values: dict[str, dict]) -> None:
    """Every view holds exactly its unit's values of `read_samples`, and every unit read has a view."""
    assert values, "read_samples found no values: the fixture is wrong"
    for v in views:
        assert v.values == {m: per[v.unit] for m, per in values.items() if v.unit in per}, v.unit
    assert {u for per in values.values() for u in per} <= {v.unit for v in views}


def test_every_benchmark_has_a_loadable_view() -> None:
    for bench in benchmarks.all_benchmarks():
        assert bench.view_samples, bench.key
        assert callable(benchmarks.load_object(bench.view_samples)), bench.key


# ------------------------------------------------------------------------------------------------ MME-Emotion
@pytest.fixture()
def mme_run(tmp_path: Path) -> Path:
    """The export's judged MME run, its ER-Lab sample log holding the records (doc_id 10 + row, the prompt)."""
    run = make_mme_run(tmp_path / "mme_run")
    lines = [
        {"doc_id": 10 + r["row"], "target": r["label"], "input": f"prompt {r['row']}",
         "rec_s": {"mme_task": "ER-Lab", "row": r["row"], "answer": r["answer"]}}
        for r in MME_ROWS if r["task"] == "ER-Lab"
    ]  # fmt: skip
    _jsonl(run / f"{DATE}_samples_{ER_LAB}.jsonl", lines)
    return run


def test_mme_one_view_per_row_with_the_judges_evidence(mme_run: Path) -> None:
    views, values = _views("mme", mme_run, ER_LAB)
    rows = [r for r in MME_ROWS if r["task"] == "ER-Lab"]
    assert [v.unit for v in views] == [(ER_LAB, r["row"]) for r in rows]
    _same_values(views, values)
    for v, r in zip(views, rows, strict=True):
        assert v.task == ER_LAB and v.doc_id == 10 + r["row"] and v.prompt == f"prompt {r['row']}"
        assert v.media == (r["video_id"],) and v.answers == (r["answer"],) and v.gold == r["label"]
        assert v.verdict == r["status"]
        assert v.predicted == (",".join(r["predicted_labels"]) or None)  # a confusion matrix's column
        assert {k: v.details[k] for k in ("judge_text", "step_text", "audio_clue")} == {
            k: r[k] for k in ("judge_text", "step_text", "audio_clue")
        }
        assert {"predicted_labels", "n_steps", "failed_stage", "failure_reason", "label_set"} <= set(v.details)
        steps, ratings = r["steps"], r["ratings"]
        assert [s["step"] for s in v.details["steps"] if s["step"] is not None] == steps
        assert [s["rating"] for s in v.details["steps"] if s["rating"] is not None] == [f"{n}/{d}" for n, d in ratings]
        assert ("steps_note" in v.details) == (len(steps) != len(ratings))
        # no MME-Emotion data in this test's cache: the video id stands for the frames, and the details say why
        assert v.details["frames"].startswith("no MME-Emotion data here for " + ER_LAB)
    # row 0: 2 extracted steps, 3 ratings (kept, the third one unpaired); row 1: paired one to one
    assert views[0].details["steps"] == [
        {"step": "Step 1: cue.", "rating": "1/1", "value": 1.0},
        {"step": "Step 2: The predicted emotion is happy.", "rating": "0/1", "value": 0.0},
        {"step": None, "rating": "1/1", "value": 1.0},
    ]
    assert views[0].details["steps_note"].startswith("2 extracted steps, 3 ratings")
    assert [s["value"] for s in views[1].details["steps"]] == [1.0, 0.0]
    assert views[0].values["rec_s"] == 100.0 and views[0].values["cot_s"] == 75.0  # alpha 0.5 from the summary
    failed = views[2]
    assert failed.verdict == "judge_failed" and failed.values.keys() == {"avg_token"}
    assert (failed.details["failed_stage"], failed.details["failure_reason"]) == ("judge", "malformed")


def test_mme_without_a_sample_log_has_no_doc_id(mme_run: Path) -> None:
    views, values = _views("mme", mme_run, "mme_emotion_sample_fg_er")
    assert [v.unit for v in views] == [("mme_emotion_sample_fg_er", 0), ("mme_emotion_sample_fg_er", 1)]
    assert [v.doc_id for v in views] == [None, None]  # its sample log holds no records to map rows by
    _same_values(views, values)


def test_mme_another_runs_log_is_not_used(mme_run: Path) -> None:
    """A newer judge log of another run (3 scored rows; this run's results say 2 scored, 1 failed) lies in the same
    folder: the views come from this run's log, as the values of `read_samples` do."""
    folder = mme_run / "emo_tasks_judge"
    other = [{**r, "status": "scored", "answer": "other", "recognition": 0.0, "reasoning": 0.0, "n_steps": 1}
             for r in MME_ROWS if r["task"] == "ER-Lab"]  # fmt: skip
    _jsonl(folder / "sample_mme_emotion_er_lab_20990101T000000_judge.jsonl", other)
    views, values = _views("mme", mme_run, ER_LAB)
    assert [v.answers[0] for v in views] == [r["answer"] for r in MME_ROWS if r["task"] == "ER-Lab"]
    assert [v.verdict for v in views] == ["scored", "scored", "judge_failed"]
    _same_values(views, values)
    # only another run's log: nothing to show (read_samples notes why)
    for log in folder.glob(f"*{STAMP}_judge.jsonl"):
        log.unlink()
    assert _views("mme", mme_run, ER_LAB) == ([], {})


def test_mme_missing_log_gives_nothing(mme_run: Path, tmp_path: Path) -> None:
    assert _views("mme", mme_run, "mme_emotion_sample_ir")[0] == []
    assert _views("mme", tmp_path / "empty", ER_LAB)[0] == []


# ------------------------------------------------------------------------------------------------ MVEI
def test_mvei_one_view_per_pair(tmp_path: Path) -> None:
    run = make_mvei_run(tmp_path / "mvei_run")
    log = run / f"{DATE}_samples_mvei_sample.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    lines[0]["input_media"] = ["/data/mvei/images/p0.png", "images/p0.png"]  # as lmms-eval 0.7.3 logs the image
    lines[0]["input"] = "the prompt of p0"
    lines[1]["doc"] = {"image_name": "images/p1.png"}  # an lmms-eval that keeps `doc`
    _jsonl(log, lines)
    views, values = _views("mvei", run, "mvei_sample")
    assert [v.unit for v in views] == [p[0] for p in MVEI_PAIRS]
    _same_values(views, values)
    for i, (v, (_, dim, label, answers)) in enumerate(zip(views, MVEI_PAIRS, strict=True)):
        rec = lines[i]["acc_total"]
        assert v.doc_id == i and v.answers == tuple(answers) and v.gold == label
        assert v.verdict == ("correct" if rec["right"] else "incorrect")
        assert v.predicted == rec["final"] and v.predicted in ("correct", "incorrect", "give_up")
        assert v.details == {"dimension": dim, "decisions": rec["decisions"],
                             "strict_decisions": rec["strict_decisions"], "final": rec["final"]}  # fmt: skip
    assert [v.verdict for v in views] == ["correct", "correct", "correct", "incorrect"]
    assert views[0].media == ("/data/mvei/images/p0.png", "images/p0.png") and views[0].prompt == "the prompt of p0"
    assert views[1].media == ("images/p1.png",) and views[2].media == () and views[2].prompt is None


def test_mvei_missing_log_gives_nothing(tmp_path: Path) -> None:
    run = make_mvei_run(tmp_path / "mvei_run")
    (run / f"{DATE}_samples_mvei_sample.jsonl").rename(run / "19990101_000000_samples_mvei_sample.jsonl")
    assert _views("mvei", run, "mvei_sample")[0] == []  # another run's log is not this run's


# ------------------------------------------------------------------------------------------------ MultiEmo
def _multiemo_run(run: Path) -> Path:
    """A MultiEmo sample run of two images of the bundled sample, its log as lmms-eval 0.7.3 writes it: no `doc`
    (the votes come from the data), the image in `input_media`; the second image's fear answer gives no score."""
    from emo_tasks.multiemo.registry import reference_images
    from emo_tasks.multiemo.scoring import EMOTIONS

    ids = list(reference_images("sample"))[:2]
    lines = []
    for n, image_id in enumerate(ids):
        for i, e in enumerate(EMOTIONS):
            score = None if (n, e) == (1, "fear") else float(10 * i + 5 * n)
            rec = {"image_id": image_id, "emotion": e, "answer": f"Score: {score}. Reason: {e}.",
                   "predicted_score": score, "parse_status": "parsed" if score is not None else "missing",
                   "data_source": "sample"}  # fmt: skip
            lines.append({"doc_id": 8 * n + i, "input_media": [f"/x/{image_id}.png"], "precision_ours": rec})
    make_multiemo_run(run)
    _jsonl(run / f"{DATE}_samples_multiemo_sample.jsonl", lines)
    return run


def test_multiemo_one_view_per_image(tmp_path: Path) -> None:
    from emo_tasks.multiemo.registry import reference_images
    from emo_tasks.multiemo.scoring import EMOTIONS

    run = _multiemo_run(tmp_path / "me_run")
    data = reference_images("sample")
    views, values = _views("multiemo", run, "multiemo_sample")
    assert [v.unit for v in views] == list(data)[:2] and [v.doc_id for v in views] == [0, 8]
    _same_values(views, values)
    for n, v in enumerate(views):
        img = data[v.unit]
        assert v.media == (img["image_path"],)
        assert len(v.answers) == 8 and v.answers[0] == f"Score: {5.0 * n}. Reason: amusement."
        assert v.details["votes"] == dict(zip(EMOTIONS, img["votes"], strict=True))
        assert v.details["n_annotators"] == img["n_annotators"]
        assert v.details["dominant_votes"] and set(v.details["dominant_votes"]) <= set(EMOTIONS)
    first, second = views
    assert first.details["scores"]["sadness"] == 70.0 and first.details["dominant_predicted"] == ["sadness"]
    assert first.values["precision_ours"] in (0.0, 100.0)
    assert second.details["scores"]["fear"] is None and second.details["dominant_predicted"] is None
    assert second.details["parse_status"]["fear"] == "missing"
    assert "precision_ours" not in second.values  # incomplete: left out, as read_samples leaves it out


def test_multiemo_doc_in_the_log_and_missing_log(tmp_path: Path) -> None:
    run = make_multiemo_run(tmp_path / "me_run")  # the votes in the logged doc
    views, values = _views("multiemo", run, "multiemo_sample")
    assert len(views) == 1 and views[0].unit == "img1" and views[0].doc_id == 0 and views[0].media == ()
    _same_values(views, values)
    assert views[0].details["dominant_predicted"] == views[0].details["dominant_votes"] == ["amusement", "awe"]
    (run / f"{DATE}_samples_multiemo_sample.jsonl").unlink()
    assert _views("multiemo", run, "multiemo_sample") == ([], {})


def test_mme_predicted_is_the_labels_the_answer_names(mme_run: Path) -> None:
    """`predicted` (a confusion matrix's column) joins the predicted labels as the gold label writes several."""
    import json

    (log,) = (mme_run / "emo_tasks_judge").glob("*_judge.jsonl")
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    named = {r["row"]: ["Anger", "Sadness"][: 1 + r["row"] % 2] for r in rows if r["row"] % 3}
    for r in rows:
        r["predicted_labels"] = named.get(r["row"], [])
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    views, _ = _views("mme", mme_run, ER_LAB)
    assert views and {v.unit[1]: v.predicted for v in views} == {
        r["row"]: ",".join(named[r["row"]]) if r["row"] in named else None for r in rows if r["task"] == "ER-Lab"
    }
    assert {"Anger", "Anger,Sadness"} <= {v.predicted for v in views}
