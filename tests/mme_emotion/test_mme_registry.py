"""Reading one MME-Emotion task's per-sample values back from a run folder (`results.read_samples`), on a small
hand-written folder: newest log wins, logs covering several tasks, alpha from the summary, notes for what is
missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emo_tasks.judging.tokens import count_tokens
from emo_tasks.mme_emotion.registry import BENCHMARK, judge_logs, read_samples
from emo_tasks.results.reader import JudgeLogRefused

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # bpe_openai's own use of importlib.resources


def _row(task: str, row: int, status: str, answer: str, **kw) -> dict:
    base = {"task": task, "row": row, "video_id": f"v{row}.mp4", "label": "anger", "answer": answer,
            "status": status, "recognition": None, "reasoning": None, "n_steps": None,
            "strict_recognition": None}  # fmt: skip
    return {**base, **kw}


def _write(folder: Path, name: str, rows: list[dict], summary: dict | str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}_judge.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if summary is not None:
        text = summary if isinstance(summary, str) else json.dumps(summary)
        (folder / f"{name}_summary.json").write_text(text)


ER_LAB_NEW = [
    _row("ER-Lab", 0, "scored", "Answer: anger", recognition=1.0, reasoning=0.5, n_steps=3, strict_recognition=1.0),
    _row("ER-Lab", 1, "judge_failed", "I cannot tell."),
    _row("ER-Lab", 2, "scored", "", recognition=0.0, reasoning=None, n_steps=1, strict_recognition=0.0),
]
SAMPLE_ROWS = [
    _row("ER-Lab", 0, "offline", "Answer: sad", recognition=0.0, strict_recognition=0.0),
    _row("ML-ER", 0, "offline", "Answer: anger", recognition=0.5, strict_recognition=0.25),
    _row("ML-ER", 1, "offline", "Answer: fear, anger", recognition=1.0, strict_recognition=1.0),
]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    folder = tmp_path / "run" / "emo_tasks_judge"
    old = [_row("ER-Lab", 0, "scored", "old", recognition=0.0, reasoning=0.0, n_steps=1, strict_recognition=0.0)]
    _write(folder, "mme_emotion_er_lab_20250101T000000", old, {"alpha": 0.5})
    _write(folder, "mme_emotion_er_lab_20250102T000000", ER_LAB_NEW, {"alpha": 0.3, "judge_mode": "api"})
    _write(folder, "sample_mme_emotion_er_lab+mme_emotion_ml_er_20250101T000000", SAMPLE_ROWS, "{not json")
    (folder / "mme_emotion_sa_20250101T000000_judge.jsonl").write_text('{"task": "SA"}\n{broken\n')
    (folder / "notes.txt").write_text("not a log")
    return tmp_path / "run"


def test_newest_log_per_task(run: Path) -> None:
    logs = {task: path.name for task, path in judge_logs(run).items()}
    assert logs == {
        "mme_emotion_er_lab": "mme_emotion_er_lab_20250102T000000_judge.jsonl",
        "mme_emotion_sample_er_lab": "sample_mme_emotion_er_lab+mme_emotion_ml_er_20250101T000000_judge.jsonl",
        "mme_emotion_sample_ml_er": "sample_mme_emotion_er_lab+mme_emotion_ml_er_20250101T000000_judge.jsonl",
        "mme_emotion_sa": "mme_emotion_sa_20250101T000000_judge.jsonl",
    }


def test_values_summary_and_alpha(run: Path) -> None:
    got = read_samples(run, run / "results.json", "mme_emotion_er_lab", {})
    t = "mme_emotion_er_lab"
    assert got.notes == []
    assert got.summary == {"alpha": 0.3, "judge_mode": "api"}
    tokens = count_tokens([r["answer"] for r in ER_LAB_NEW])
    assert got.values == {
        "rec_s": {(t, 0): 100.0, (t, 2): 0.0},
        "rea_s": {(t, 0): 50.0, (t, 2): 0.0},
        "cot_s": {(t, 0): 0.3 * 100.0 + (1 - 0.3) * 50.0, (t, 2): 0.0},
        "rec_s_strict": {(t, 0): 100.0, (t, 2): 0.0},
        "avg_step": {(t, 0): 3.0, (t, 2): 1.0},
        "avg_token": {(t, i): float(n) for i, n in enumerate(tokens)},
    }
    assert tokens[1] > 0 and tokens[2] == 0


def test_a_log_covering_two_tasks_is_split(run: Path) -> None:
    (run / "emo_tasks_judge" / "sample_mme_emotion_er_lab+mme_emotion_ml_er_20250101T000000_summary.json").unlink()
    got = read_samples(run, run / "results.json", "mme_emotion_sample_ml_er", {})
    t = "mme_emotion_sample_ml_er"
    assert got.notes == [] and got.summary == {}
    assert got.values["rec_s"] == {(t, 0): 50.0, (t, 1): 100.0}
    assert got.values["rec_s_strict"] == {(t, 0): 25.0, (t, 1): 100.0}
    assert set(got.values) == {"rec_s", "rec_s_strict", "avg_token"}  # offline: no reasoning, CoT or steps
    er = read_samples(run, run / "results.json", "mme_emotion_sample_er_lab", {})
    assert er.values["rec_s"] == {("mme_emotion_sample_er_lab", 0): 0.0}


def test_a_bad_summary_makes_its_log_unreadable(run: Path) -> None:
    """The summary beside a log is read one way (`reader.read_summary`): one that is not a JSON object makes the
    log unreadable (its alpha is unknown), a note and no values, never values with a default alpha."""
    name = "sample_mme_emotion_er_lab+mme_emotion_ml_er_20250101T000000"
    summary = run / "emo_tasks_judge" / f"{name}_summary.json"
    for text, why in (("{not json", "not readable JSON ("), ("[0.3]", "expected a JSON object")):
        summary.write_text(text)
        for t in ("mme_emotion_sample_ml_er", "mme_emotion_sample_er_lab"):
            got = read_samples(run, run / "results.json", t, {})
            assert got.values == {} and len(got.notes) == 1
            assert got.notes[0].startswith(f"{t}: could not read {name}_judge.jsonl (")
            assert f"{summary}: {why}" in got.notes[0] and got.notes[0].endswith("; no CIs")


def test_missing_and_unreadable_logs_are_notes(run: Path) -> None:
    missing = read_samples(run, run / "results.json", "mme_emotion_ir", {})
    assert missing.values == {} and missing.summary is None
    assert missing.notes == [
        "mme_emotion_ir: no MME-Emotion judge log (emo_tasks_judge/*mme_emotion_ir*_judge.jsonl), so no confidence "
        "intervals; rerun lmms-eval with --output_path DIR (the judge writes it there)"
    ]
    sample_missing = read_samples(run, run / "results.json", "mme_emotion_sample_ir", {})
    assert "(emo_tasks_judge/*mme_emotion_ir*_judge.jsonl)" in sample_missing.notes[0]
    broken = read_samples(run, run / "results.json", "mme_emotion_sa", {})
    assert broken.values == {} and len(broken.notes) == 1
    assert broken.notes[0].startswith("mme_emotion_sa: could not read mme_emotion_sa_20250101T000000_judge.jsonl (")
    assert broken.notes[0].endswith("); no CIs")
    nothing = read_samples(run.parent / "empty", run / "results.json", "mme_emotion_er_lab", {})
    assert nothing.values == {} and len(nothing.notes) == 1


def test_no_tokenizer_costs_avg_token_only(run: Path, monkeypatch) -> None:
    import emo_tasks.judging.tokens

    def unavailable(texts):
        raise emo_tasks.judging.tokens.TokenizerUnavailable("bpe-openai is not installed")

    monkeypatch.setattr(emo_tasks.judging.tokens, "count_tokens", unavailable)
    got = read_samples(run, run / "results.json", "mme_emotion_er_lab", {})
    assert got.notes == ["mme_emotion_er_lab: avg_token per sample not available (bpe-openai is not installed)"]
    assert "avg_token" not in got.values and got.values["rec_s"]


def test_benchmark_description() -> None:
    assert BENCHMARK.owns("mme_emotion_sample_ir") and BENCHMARK.owns("mme_emotion_all")
    assert not BENCHMARK.owns("mvei_sample")
    assert len(BENCHMARK.tasks) == 16 and BENCHMARK.groups == ("mme_emotion_all", "mme_emotion_sample")
    assert BENCHMARK.titles["mme_emotion_fg_er"] == BENCHMARK.titles["mme_emotion_sample_fg_er"] == "FG-ER"
    assert list(dict.fromkeys(BENCHMARK.titles.values())) == [
        "ER-Lab", "ER-Wild", "Noise-ER", "FG-ER", "ML-ER", "SA", "FG-SA", "IR",
    ]  # fmt: skip


def _results(path: Path, rows: int, scored: int, failed: int) -> Path:
    doc = {"results": {"mme_emotion_er_lab": {"n_scored,none": scored, "n_judge_failed,none": failed}},
           "n-samples": {"mme_emotion_er_lab": {"original": rows, "effective": rows}}}  # fmt: skip
    path.write_text(json.dumps(doc))
    return path


def test_the_log_must_agree_with_the_runs_own_counts(run: Path) -> None:
    """A folder can hold judge logs of earlier runs: only a log whose rows agree with the results file's counts
    (rows, scored, judge-failed) is this run's; none agreeing costs the CIs, never takes another run's values."""
    t = "mme_emotion_er_lab"
    newest = read_samples(run, _results(run / "a_results.json", 3, 2, 1), t, {})
    assert newest.values["rec_s"] == {(t, 0): 100.0, (t, 2): 0.0} and newest.summary["alpha"] == 0.3
    older = read_samples(run, _results(run / "b_results.json", 1, 1, 0), t, {})  # the run the older log is of
    assert older.values["rec_s"] == {(t, 0): 0.0} and older.summary == {"alpha": 0.5}
    none = read_samples(run, _results(run / "c_results.json", 5, 5, 0), t, {})
    assert none.values == {} and none.summary is None
    assert none.notes == [f"{t}: no judge log in {run / 'emo_tasks_judge'} is this run's "
                          "(mme_emotion_er_lab_20250102T000000_judge.jsonl: 3 rows, the run's results say 5; "
                          "mme_emotion_er_lab_20250101T000000_judge.jsonl: 1 rows, the run's results say 5); "
                          "the logs there belong to other runs, so no confidence intervals"]  # fmt: skip


def test_a_newer_log_that_cannot_be_read_is_never_skipped(run: Path) -> None:
    """The one rule (`reader.pick_judge_log`): a log that cannot be read cannot be proven to be another run's, so an
    older log is never taken past it (refused, naming both); one older than the run's own is never read."""
    t, folder = "mme_emotion_er_lab", run / "emo_tasks_judge"
    (folder / "mme_emotion_er_lab_20241231T000000_judge.jsonl").write_text("{broken\n")  # older than every other
    newest = _results(run / "a_results.json", 3, 2, 1)  # the run of the newest readable log (20250102)
    assert read_samples(run, newest, t, {}).values["rec_s"] == {(t, 0): 100.0, (t, 2): 0.0}
    (folder / "mme_emotion_er_lab_20250103T000000_judge.jsonl").write_text("{broken\n")
    for results, own in ((newest, "20250102"), (_results(run / "b_results.json", 1, 1, 0), "20250101")):
        with pytest.raises(JudgeLogRefused) as refused:
            read_samples(run, results, t, {})
        msg = str(refused.value)
        assert msg.startswith(f"{t}: the judge log mme_emotion_er_lab_20250103T000000_judge.jsonl in {folder} cannot "
                              "be read (line 1: not a JSON object")  # fmt: skip
        assert f"an older one, mme_emotion_er_lab_{own}T000000_judge.jsonl, can" in msg and "\n" not in msg
    none = read_samples(run, _results(run / "c_results.json", 5, 5, 0), t, {})  # no readable log is this run's
    assert none.values == {} and none.notes[0].startswith(f"{t}: could not read mme_emotion_er_lab_20250103T000000_")


def test_the_log_must_hold_the_runs_answers_and_a_partial_judgement_counts_its_rows(run: Path) -> None:
    """Counts alone can agree by chance: the log's answers must be the run's sample log's, row by row.  A partial
    judgement (`emo-tasks judge --partial`) is judged on the rows it judged, not on the rows the run answered."""
    t = "mme_emotion_er_lab"
    results = _results(run / "20250103_000000_results.json", 3, 2, 1)
    log = run / "20250103_000000_samples_mme_emotion_er_lab.jsonl"
    answers = [r["answer"] for r in ER_LAB_NEW]
    log.write_text("".join(json.dumps({"doc_id": i, "rec_s": {"row": i, "answer": a}}) + "\n"
                           for i, a in enumerate(answers)))  # fmt: skip
    assert read_samples(run, results, t, {}).values["rec_s"] == {(t, 0): 100.0, (t, 2): 0.0}
    log.write_text(log.read_text().replace("I cannot tell.", "Something else."))
    other = read_samples(run, results, t, {})
    assert other.values == {} and "1 of 3 rows differ from the answers of its sample log" in other.notes[0]

    partial = json.loads(_results(run / "d_results.json", 5, 2, 1).read_text())
    partial["emo_tasks_judge"] = {"partial": {t: {"judged": 3, "of": 5, "missing_doc_ids": [3, 4]}}}
    (run / "d_results.json").write_text(json.dumps(partial))
    assert read_samples(run, run / "d_results.json", t, {}).values["rec_s"] == {(t, 0): 100.0, (t, 2): 0.0}


def test_the_registrys_group_members_are_the_group_yamls_task_lists() -> None:
    """`Benchmark.members` (what `emo-tasks calibrate` pools into a group's shift) is what lmms-eval runs as the
    group: read from the group YAMLs themselves (their `!function` tags skipped)."""
    import yaml

    from emo_tasks.mme_emotion.registry import BENCHMARK

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    folder = Path(__file__).resolve().parents[2] / "emo_tasks" / "mme_emotion"
    assert set(BENCHMARK.members) == set(BENCHMARK.groups)
    for group, leaves in BENCHMARK.members.items():
        doc = yaml.load((folder / f"{group}.yaml").read_text(), Loader=Loader)
        assert doc["group"] == group and tuple(doc["task"]) == leaves
