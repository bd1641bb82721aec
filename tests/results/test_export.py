"""`emo_tasks.results.export`: the official MME-Emotion tree, EmObserver's MVEI file and the MultiEmo table, from small
hand-made run folders (results.json, judge logs and summaries, sample logs written here: no lmms-eval, fast).

Hand-computed numbers (alpha 0.5):
- ER-Lab: r0 `1/1, 0/1, 1/1` (happy: rec 1, rea 0.5, 3 steps), r1 `1/1, 0/1` (sad: rec 0, rea 1, 2 steps), r2 a
  judge failure (score null, skipped): count 2, Rec 50.0, Rea 75.0, CoT 62.5, Avg Step 2.5.
- ER-Wild: r0 `1/1, 1/1` (angry -> anger), r1 `Step 1:1/1, Step 2:0/1` (no space: the official `: (\\d)/1` reads
  nothing, so the per-task script skips it; ours reads rec 0, rea 1): n_rule_differs 1; the metrics file states
  the project's count 2, Rec 50.0, Rea 100.0, CoT 75.0; the per-task script would print count 1, 100.0/100.0.
- FG-ER: `1/1, 1/2` (rec 0.5, rea 1) and `0/1, 2/2` (rec 1, rea 0): count 2, Rec 75.0, Rea 50.0, CoT 62.5, 2.0.
- Overall (`:\\s*n/d` over all 6 scored): rec 3.5/6 = 58.3, rea 4.5/6 = 75.0, CoT 66.7, steps 13/6 = 2.2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from emo_tasks.mme_emotion import export as mme_export
from emo_tasks.multiemo import export as multiemo_export
from emo_tasks.mvei import export as mvei_export
from emo_tasks.mvei import scoring as mvei_scoring
from emo_tasks.results import export

STAMP = "20260101T000000"
DATE = "20260101_000000"
JUDGED = "sample_mme_emotion_er_lab+mme_emotion_er_wild+mme_emotion_fg_er"


def _score(*ratings: str) -> str:
    return "Ratings:\n<score>" + ", ".join(f"Step {i + 1}: {r}" for i, r in enumerate(ratings)) + "</score>"


def _row(task: str, row: int, label: str, text: str | None, ratings: list, rec=None, rea=None, n=None, **kw) -> dict:
    status = kw.pop("status", "scored")
    return {
        "task": task,
        "row": row,
        "video_id": f"{task}/v{row}.mp4",
        "label": label,
        "answer": f"answer {task} {row}",
        "status": status,
        "failed_stage": kw.get("failed_stage"),
        "failure_reason": kw.get("failure_reason"),
        "failure_detail": None,
        "audio_clue": "calm voice",
        "step_text": f"<step>Step 1: cue. Step 2: The predicted emotion is {label}.</step>",
        "steps": ["Step 1: cue.", f"Step 2: The predicted emotion is {label}."],
        "judge_text": text,
        "ratings": ratings,
        "recognition": rec,
        "reasoning": rea,
        "n_steps": n,
        "strict_recognition": rec,
        "predicted_labels": [],
        "cached": {},
    }


MME_ROWS = [
    _row("ER-Lab", 0, "happy", _score("1/1", "0/1", "1/1"), [[1, 1], [0, 1], [1, 1]], 1.0, 0.5, 3),
    _row("ER-Lab", 1, "sad", _score("1/1", "0/1"), [[1, 1], [0, 1]], 0.0, 1.0, 2),
    _row(
        "ER-Lab",
        2,
        "happy",
        "no rating here",
        [],
        status="judge_failed",
        failed_stage="judge",
        failure_reason="malformed",
    ),  # fmt: skip
    _row("ER-Wild", 0, "angry", _score("1/1", "1/1"), [[1, 1], [1, 1]], 1.0, 1.0, 2),
    _row("ER-Wild", 1, "angry", "<score>Step 1:1/1, Step 2:0/1</score>", [[1, 1], [0, 1]], 0.0, 1.0, 2),
    _row("FG-ER", 0, "happiness;excitement", _score("1/1", "1/2"), [[1, 1], [1, 2]], 0.5, 1.0, 2),
    _row("FG-ER", 1, "happiness;excitement", _score("0/1", "2/2"), [[0, 1], [2, 2]], 1.0, 0.0, 2),
]
PROJECT = {  # what the run's results.json says (the project's numbers)
    "mme_emotion_sample_er_lab": {"rec_s": 50.0, "rea_s": 75.0, "cot_s": 62.5, "avg_step": 2.5, "n": (2, 1)},
    "mme_emotion_sample_er_wild": {"rec_s": 50.0, "rea_s": 100.0, "cot_s": 75.0, "avg_step": 2.0, "n": (2, 0)},
    "mme_emotion_sample_fg_er": {"rec_s": 75.0, "rea_s": 50.0, "cot_s": 62.5, "avg_step": 2.0, "n": (2, 0)},
    "mme_emotion_sample": {"rec_s": 350 / 6, "rea_s": 75.0, "cot_s": 200 / 3, "avg_step": 13 / 6, "n": (6, 1)},
}
SUMMARY = {
    "benchmark": "MME-Emotion",
    "data_source": "sample",
    "judge_mode": "api",
    "judge_protocol": "official",
    "judge_models": {"step": "gpt-4.1-2025-04-14", "judge": "gpt-4o-2024-11-20"},
    "api_models": {"judge": {"gpt-4o-2024-11-20": 7}, "step": {"gpt-4.1-2025-04-14": 7}},
    "alpha": 0.5,
    "prompt_hashes": {"step": "aaaa", "judge": "bbbb"},
}


def _results(run: Path, results: dict[str, dict]) -> None:
    rows = {}
    for task, vals in results.items():
        rows[task] = {"alias": task, **{f"{k},none": v for k, v in vals.items()}}
    data = {
        "results": rows,
        "configs": {t: {"task": t, "dataset_name": "x/sample"} for t in results},
        "config": {"model": "openai", "model_args": "model_version=eval-model,base_url=http://x"},
        "date": DATE,
        "lmms_eval_version": "0.7.3",
    }
    run.mkdir(parents=True, exist_ok=True)
    (run / f"{DATE}_results.json").write_text(json.dumps(data))


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_mme_run(run: Path, project: dict[str, dict] = PROJECT) -> Path:
    """A judged MME-Emotion run in `run`: results.json with `project`'s tasks, one judge log (all of MME_ROWS) and
    its summary, and a sample log per leaf task of `project`."""
    res = {}
    for task, p in project.items():
        res[task] = {k: v for k, v in p.items() if k != "n"} | {"n_scored": p["n"][0], "n_judge_failed": p["n"][1]}
    _results(run, res)
    _jsonl(run / "emo_tasks_judge" / f"{JUDGED}_{STAMP}_judge.jsonl", MME_ROWS)
    (run / "emo_tasks_judge" / f"{JUDGED}_{STAMP}_summary.json").write_text(json.dumps(SUMMARY))
    for task in [t.removeprefix("mme_emotion_sample_") for t in project if t != "mme_emotion_sample"]:
        lines = [{"doc_id": i, "target": f"label{i} #{task}"} for i in range(3)]
        _jsonl(run / f"{DATE}_samples_mme_emotion_sample_{task}.jsonl", lines)
    return run


@pytest.fixture()
def mme_run(tmp_path: Path) -> Path:
    return make_mme_run(tmp_path / "mme_run")


ER_LAB_METRICS = """Model: My Model
Alpha: 0.5

=== Overall Metrics ===
Total Count: 2
Recognition Score: 50.0
Reasoning Score: 75.0
CoT Score: 62.5
Avg Step: 2.5

=== Category Metrics ===
Category: happy
  Recognition Score: 100.0
  Reasoning Score: 50.0
  CoT Score: 75.0
  Avg Step: 3.0
----------------------------------------
Category: sad
  Recognition Score: 0.0
  Reasoning Score: 100.0
  CoT Score: 50.0
  Avg Step: 2.0
----------------------------------------
"""
ER_WILD_METRICS_HEAD = """Model: My Model
Alpha: 0.5

=== Overall Metrics ===
Total Count: 2
Recognition Score: 50.0
Reasoning Score: 100.0
CoT Score: 75.0
Avg Step: 2.0

=== Category Metrics ===
Category: anger
"""
FG_ER_METRICS = """Model: My Model
Alpha: 0.5

=== Overall Metrics ===
Total Count: 2
Recognition Score: 75.0
Reasoning Score: 50.0
CoT Score: 62.5
Avg Steps: 2.0

"""
OVERALL_METRICS = """Model: My Model
Alpha: 0.5

=== Overall Metrics ===
Total Count: 6
Recognition Score: 58.3
Reasoning Score: 75.0
CoT Score: 66.7
Avg Steps: 2.2

"""


def _mme_paths(out: Path) -> dict[str, Path]:
    return {
        "ER-Lab": out / "eval_cot/ER-Lab/results/ER_Lab_My_Model_eval.json",
        "ER-Wild": out / "eval_cot/ER-Wild/results/ER_SL_Wild_My_Model_eval.json",
        "FG-ER": out / "eval_cot/FG-ER/results/FG_ER_My_Model_eval.json",
    }


def test_mme_metrics_files_hand_computed(mme_run: Path, tmp_path: Path) -> None:
    out = mme_export.export_mme_official(mme_run, tmp_path / "out", "My Model")
    m = out / "eval_cot"
    assert (m / "ER-Lab/metrics/results/ER_Lab_My_Model_metrics.txt").read_text() == ER_LAB_METRICS
    assert (m / "ER-Wild/metrics/results/ER_SL_Wild_My_Model_metrics.txt").read_text().startswith(ER_WILD_METRICS_HEAD)
    assert (m / "FG-ER/metrics/results/FG_ER_My_Model_metrics.txt").read_text() == FG_ER_METRICS
    assert (m / "Overall/metrics/results/Overall_My_Model_metrics.txt").read_text() == OVERALL_METRICS


def test_mme_summary_rule_differs_and_failures(mme_run: Path, tmp_path: Path) -> None:
    out = mme_export.export_mme_official(mme_run, tmp_path / "out", "My Model")
    summary = json.loads((out / "summary.json").read_text())
    tasks = summary["tasks"]
    assert list(tasks) == ["ER-Lab", "ER-Wild", "FG-ER"]  # the official order
    assert {k: t["n_rule_differs"] for k, t in tasks.items()} == {"ER-Lab": 0, "ER-Wild": 1, "FG-ER": 0}
    assert {k: (t["n_scored"], t["n_failed"]) for k, t in tasks.items()} == {
        "ER-Lab": (2, 1), "ER-Wild": (2, 0), "FG-ER": (2, 0)}  # fmt: skip
    assert all(t["matches_project"] for t in tasks.values())
    script = tasks["ER-Wild"]["per_task_script"]  # the per-task rule skips r1: stated, not hidden
    assert script == {"rec_s": 100.0, "rea_s": 100.0, "cot_s": 100.0, "avg_step": 2.0, "count": 1}
    assert tasks["ER-Lab"]["per_task_script"] == tasks["ER-Lab"]["metrics_file"]
    assert summary["overall"]["matches_project"] and summary["overall"]["lmms_eval_task"] == "mme_emotion_sample"
    failures = json.loads((out / "judge_failures.json").read_text())
    assert [(f["task"], f["row"], f["failure_reason"]) for f in failures] == [("ER-Lab", 2, "malformed")]
    eval_lab = json.loads(_mme_paths(out)["ER-Lab"].read_text())
    assert [e["score"] is None for e in eval_lab] == [False, False, True]
    readme = (out / "README.md").read_text()
    assert "## Submitting to a leaderboard" in readme and "ER-Wild 1" in readme


def test_mme_schema(mme_run: Path, tmp_path: Path) -> None:
    out = mme_export.export_mme_official(mme_run, tmp_path / "out", "My Model")
    expected = set()
    for key, prefix in (("ER-Lab", "ER_Lab"), ("ER-Wild", "ER_SL_Wild"), ("FG-ER", "FG_ER")):
        expected |= {
            f"responses/{prefix}_My_Model.json",
            f"extract_step/{key}/results/{prefix}_My_Model_step.json",
            f"eval_cot/{key}/results/{prefix}_My_Model_eval.json",
            f"eval_cot/{key}/metrics/results/{prefix}_My_Model_metrics.txt",
        }
    expected |= {"eval_cot/Overall/metrics/results/Overall_My_Model_metrics.txt", "judge_failures.json"}
    expected |= {"provenance.json", "summary.json", "README.md"}
    assert {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} == expected
    assert set(json.loads((out / "summary.json").read_text())["files"]) == expected
    for path in out.rglob("*.json"):
        data = json.loads(path.read_text())
        kind = {"responses": "mme_response", "extract_step": "mme_step", "eval_cot": "mme_eval"}.get(
            path.relative_to(out).parts[0]
        )
        if kind:
            assert isinstance(data, list) and data
            assert [p for rec in data for p in export.check_schema(rec, kind, mme_export.SCHEMAS)] == []
    for rec in json.loads((out / "judge_failures.json").read_text()):
        assert export.check_schema(rec, "mme_failure", mme_export.SCHEMAS) == []
    for t in json.loads((out / "summary.json").read_text())["tasks"].values():
        assert export.check_schema(t, "mme_summary_task", mme_export.SCHEMAS) == []
    _check_provenance(out, "mme-official", {"mme_emotion_sample_er_lab", "mme_emotion_sample_er_wild",
                                            "mme_emotion_sample_fg_er"})  # fmt: skip
    prov = json.loads((out / "provenance.json").read_text())
    lab = prov["tasks"]["mme_emotion_sample_er_lab"]
    assert lab["alpha"] == 0.5 and lab["judge_models"] == SUMMARY["judge_models"]
    assert lab["api_models"] == SUMMARY["api_models"] and lab["prompt_hashes"] == SUMMARY["prompt_hashes"]
    assert (lab["n_scored"], lab["n_failed"]) == (2, 1) and len(lab["data_hash"]) == 16
    assert prov["model_args"].startswith("model_version=eval-model")


def _check_provenance(out: Path, fmt: str, tasks: set[str]) -> None:
    prov = json.loads((out / "provenance.json").read_text())
    assert export.check_schema(prov, "provenance") == []
    assert prov["format"] == fmt and prov["schema"] == export.SCHEMA and set(prov["tasks"]) == tasks
    for t in prov["tasks"].values():
        assert export.check_schema(t, "provenance_task") == []


def test_mme_round_trip(mme_run: Path, tmp_path: Path) -> None:
    """export -> our reader of the official files -> the run's numbers (where the rules agree)."""
    out = mme_export.export_mme_official(mme_run, tmp_path / "out", "My Model")
    rules = {k: "fraction" for k in ("ER-Lab", "ER-Wild", "FG-ER")}  # the project's rule
    pooled = []
    for key, path in _mme_paths(out).items():
        entries = json.loads(path.read_text())
        pooled += entries
        if key not in rules:
            continue
        stats = mme_export.official_mme_metrics(entries, rules[key], 0.5)
        task = "mme_emotion_sample_" + key.lower().replace("-", "_")
        t = stats["total"]
        got = {"rec_s": 100 * t["acc"], "rea_s": 100 * t["reason"], "cot_s": 100 * t["cot"], "avg_step": t["step"]}
        for metric, value in got.items():
            assert value == pytest.approx(PROJECT[task][metric])
        prefix = mme_export.OFFICIAL_TASKS[key][0]
        text = (out / f"eval_cot/{key}/metrics/results/{prefix}_My_Model_metrics.txt").read_text()
        got = mme_export.read_metrics_text(text)
        assert {k: got[k] for k in ("rec_s", "rea_s", "cot_s", "avg_step")} == {
            k: round(PROJECT[task][k], 1) for k in ("rec_s", "rea_s", "cot_s", "avg_step")
        }
    overall = mme_export.official_mme_metrics(pooled, "fraction", 0.5)["total"]
    assert 100 * overall["acc"] == pytest.approx(PROJECT["mme_emotion_sample"]["rec_s"])
    assert overall["step"] == pytest.approx(PROJECT["mme_emotion_sample"]["avg_step"])


def test_official_rules() -> None:
    assert mme_export.official_ratings("<score>Step 1: 1/1, Step 2: 0/1</score>", "digit") == [1.0, 0.0]
    assert mme_export.official_ratings("<score>Step 1:1/1</score>", "digit") == []
    assert mme_export.official_ratings("<score>Step 1: 2/3</score>", "digit") == []
    assert mme_export.official_ratings("<score>Step 1: 2/3, Step 2: 1/0</score>", "fraction") == [2 / 3, 0.0]
    assert mme_export.official_ratings("<score>Step 1: 1/1\n</score>", "fraction") is None  # no DOTALL, as theirs
    assert mme_export.official_ratings(None, "fraction") is None


#: Local git mirrors of the authors' repositories (their scripts are run unchanged, never copied into this repo):
#: EMO_OFFICIAL_MIRRORS=<folder holding FunAudioLLM+MME-Emotion/repo and wdqqdw+EmObserver/repo>; skipped without.
_MIRRORS = Path(os.environ.get("EMO_OFFICIAL_MIRRORS") or "/nonexistent")
_MIRROR = _MIRRORS / "FunAudioLLM+MME-Emotion" / "repo"


@pytest.mark.skipif(not _MIRROR.is_dir() or not shutil.which("git"), reason="no local mirror of the official repo")
def test_mme_official_scripts_unchanged(mme_run: Path, tmp_path: Path) -> None:
    """The authors' per-task cal_metrics.py, run unchanged on our files, write our metrics files byte for byte
    where no rule difference is counted, and the summary's `per_task_script` numbers where one is (ER-Wild)."""
    out = mme_export.export_mme_official(mme_run, tmp_path / "out", "My Model")
    tasks = json.loads((out / "summary.json").read_text())["tasks"]
    for key, path in _mme_paths(out).items():
        script = tmp_path / f"cal_{key}.py"
        src = subprocess.run(["git", "--git-dir", str(_MIRROR), "show", f"HEAD:eval_cot/{key}/metrics/cal_metrics.py"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        script.write_text(src)
        txt = tmp_path / f"{key}.txt"
        subprocess.run([sys.executable, str(script), "--input_json", str(path), "--output_txt", str(txt),
                        "--model_name", "My Model", "--alpha", "0.5"], check=True, capture_output=True)  # fmt: skip
        prefix = mme_export.OFFICIAL_TASKS[key][0]
        ours = (out / f"eval_cot/{key}/metrics/results/{prefix}_My_Model_metrics.txt").read_text()
        if tasks[key]["n_rule_differs"] == 0:
            assert txt.read_text() == ours, key
        else:
            got = mme_export.read_metrics_text(txt.read_text())
            assert got == {**tasks[key]["per_task_script"], "count": float(tasks[key]["per_task_script"]["count"])}


def test_mme_not_judged(tmp_path: Path) -> None:
    run = tmp_path / "r"
    _results(run, {"mme_emotion_sample_er_lab": {"rec_s": 1.0}})
    with pytest.raises(export.ExportError, match="judge log"):
        mme_export.export_mme_official(run, tmp_path / "o", "m")
    offline = [{**r, "status": "offline"} for r in MME_ROWS if r["task"] == "ER-Lab"]
    _jsonl(run / "emo_tasks_judge" / f"sample_mme_emotion_er_lab_{STAMP}_judge.jsonl", offline)
    with pytest.raises(export.ExportError, match="no sample was scored"):
        mme_export.export_mme_official(run, tmp_path / "o", "m")


# ------------------------------------------------------------------------------------------------ MVEI
MVEI_PAIRS = [  # pair_id, dimension, label, three answers (the first differs from the majority in p2)
    ("p0", "sentiment polarity", "correct", ["Correct", "Correct", "Incorrect"]),
    ("p1", "emotion interpretation", "incorrect", ["Incorrect", "Incorrect", "Incorrect"]),
    ("p2", "scene context", "correct", ["I cannot tell", "Correct", "Correct"]),
    ("p3", "perception subjectivity", "incorrect", ["Correct", "Correct", "Correct"]),
]


def make_mvei_run(run: Path) -> Path:
    """A judged MVEI sample run in `run` (MVEI_PAIRS): results.json and the sample log."""
    lines, rights = [], {}
    for i, (pid, dim, label, answers) in enumerate(MVEI_PAIRS):
        pair = mvei_scoring.score_sample(answers, dim, label)
        rec = {"pair_id": pid, "dimension": dim, "label": label, "answers": answers,
               "decisions": list(pair.decisions), "strict_decisions": list(pair.strict_decisions),
               "final": pair.final, "right": pair.right, "data_source": "sample"}  # fmt: skip
        rights[pid] = pair.right
        lines.append({"doc_id": i, "target": f"{label} #{pid}", "filtered_resps": answers, "acc_total": rec})
    assert rights == {"p0": True, "p1": True, "p2": True, "p3": False}
    _results(run, {"mvei_sample": {"acc_total": 75.0, "positive_ratio": 75.0, "give_up_ratio": 0.0}})
    _jsonl(run / f"{DATE}_samples_mvei_sample.jsonl", lines)
    return run


@pytest.fixture()
def mvei_run(tmp_path: Path) -> Path:
    return make_mvei_run(tmp_path / "mvei_run")


def test_mvei_export_schema_and_numbers(mvei_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = {
        i: {"pair_id": p[0], "image_name": f"images/{p[0]}.png", "statement": f"s{i}"} for i, p in enumerate(MVEI_PAIRS)
    }
    monkeypatch.setattr(mvei_export, "_mvei_docs", lambda run, task: docs)
    path = mvei_export.export_mvei_official(mvei_run, tmp_path / "out", "m")
    assert path.name == "Std_MVEI_results.json"
    data = json.loads(path.read_text())
    assert list(data) == ["p0", "p1", "p2", "p3"]
    for i, (pid, dim, label, answers) in enumerate(MVEI_PAIRS):
        rec = data[pid]
        assert export.check_schema(rec, "mvei_record", mvei_export.SCHEMAS) == []
        assert rec == {"image_path": f"images/{pid}.png", "prompt": f"s{i}", "ground_truth": label,
                       "other_info": {"statement_meta": {"class": dim}}, "generations": answers}  # fmt: skip
    # first generations: p0 right, p1 right, p2 gives up, p3 wrong -> 2/4; A: p0, p3 -> 0.5; C: p2 -> 0.25
    official = mvei_export.official_mvei_metrics(data)
    assert official == {"acc_total": 0.5, "acc_sentiment_polarity": 1.0, "acc_emotion_interpretation": 1.0,
                        "acc_scene_context": 0.0, "acc_perception_subjectivity": 0.0, "positive_ratio": 0.5,
                        "give_up_ratio": 0.25}  # fmt: skip
    summary = json.loads((path.parent / "summary.json").read_text())
    assert summary["official_first_generation"] == official and summary["project_majority"]["acc_total"] == 75.0
    readme = (path.parent / "README.md").read_text()
    assert "| acc_total | 50.00 | 75.00 |" in readme and "## Submitting to a leaderboard" in readme
    _check_provenance(path.parent, "mvei-official", {"mvei_sample"})


_EMOBSERVER = _MIRRORS / "wdqqdw+EmObserver" / "repo"


@pytest.mark.skipif(not _EMOBSERVER.is_dir() or not shutil.which("git"), reason="no local mirror of EmObserver")
def test_mvei_authors_evaluator_unchanged(mvei_run: Path, tmp_path: Path) -> None:
    path = mvei_export.export_mvei_official(mvei_run, tmp_path / "out", "m")
    src = subprocess.run(["git", "--git-dir", str(_EMOBSERVER), "show", "HEAD:evaluate/metrics_calculators/mvei.py"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    (tmp_path / "authors_mvei.py").write_text(src)
    code = "import json,sys,authors_mvei as m; print(json.dumps(m.MVEIEvaluator().evaluate(sys.argv[1])))"
    proc = subprocess.run([sys.executable, "-c", code, str(path)], cwd=tmp_path, capture_output=True, text=True,
                          check=True)  # fmt: skip
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert theirs == json.loads((path.parent / "summary.json").read_text())["official_first_generation"]


def test_mvei_without_data_stays_scorable(mvei_run: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(mvei_export, "_mvei_docs", lambda run, task: {})
    path = mvei_export.export_mvei_official(mvei_run, tmp_path / "out", "m")
    data = json.loads(path.read_text())
    assert data["p0"]["image_path"] is None and data["p0"]["prompt"] is None
    assert mvei_export.official_mvei_metrics(data)["acc_total"] == 0.5
    assert json.loads((path.parent / "summary.json").read_text())["notes"]


# ------------------------------------------------------------------------------------------------ MultiEmo
MULTIEMO_DOC = {"votes": [10, 0, 10, 0, 0, 0, 0, 0], "n_annotators": 20, "original_label": "awe"}


def make_multiemo_run(run: Path, with_doc: bool = True) -> Path:
    """A judged MultiEmo sample run of one image in `run`; `with_doc`: its sample log holds the doc (the votes),
    else the export reads them from the data (`multiemo.registry.reference_images`)."""
    from emo_tasks.multiemo.scoring import EMOTIONS

    scores = [90, 10, 90, 0, 0, 0, 0, 5]
    lines = [
        {"doc_id": i, "target": f"{e} #x",
         **({"doc": MULTIEMO_DOC} if with_doc else {}),
         "precision_ours": {"image_id": "img1", "emotion": e, "predicted_score": float(scores[i]),
                            "parse_status": "parsed", "data_source": "sample"}}
        for i, e in enumerate(EMOTIONS)
    ]  # fmt: skip
    _results(run, {"multiemo_sample": {"precision_ours": 100.0, "n_images": 1}})
    _jsonl(run / f"{DATE}_samples_multiemo_sample.jsonl", lines)
    return run


def test_multiemo_table(tmp_path: Path) -> None:
    from emo_tasks.multiemo.scoring import EMOTIONS

    run = make_multiemo_run(tmp_path / "me_run")
    path = multiemo_export.export_multiemo_table(run, tmp_path / "out", "m")
    rows = path.read_text().splitlines()
    header = rows[0].split(",")
    assert header == ["image_id", *(f"score_{e}" for e in EMOTIONS), *(f"votes_{e}" for e in EMOTIONS),
                      "n_annotators", "original_label", "dominant_predicted", "dominant_votes"]  # fmt: skip
    row = dict(zip(header, rows[1].split(","), strict=True))
    assert row["dominant_predicted"] == "amusement;awe" and row["dominant_votes"] == "amusement;awe"
    assert row["score_amusement"] == "90.0" and row["votes_awe"] == "10" and row["n_annotators"] == "20"
    md = (path.parent / "multiemo_metrics.md").read_text()
    assert "| precision_ours | 100 |" in md
    _check_provenance(path.parent, "multiemo-table", {"multiemo_sample"})


# ------------------------------------------------------------------------------------------------ CLI entry
def test_main_export(mme_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ok = Namespace(run=str(mme_run), format="mme-official", out=str(tmp_path / "o"), model_name=None)
    assert export.main_export(ok) == 0
    assert (tmp_path / "o/eval_cot/ER-Lab/results/ER_Lab_eval-model_eval.json").exists()  # name from model_args
    assert export.main_export(Namespace(run=str(tmp_path / "nope"), format="mme-official", out="x",
                                        model_name="m")) == 3  # fmt: skip
    assert "no such run folder" in capsys.readouterr().err
    assert export.main_export(Namespace(run=str(mme_run), format="csv", out="x", model_name="m")) == 3
    assert export.main_export(Namespace(run=str(mme_run), format="mvei-official", out="x", model_name="m")) == 3
    assert "no MVEI task" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ end to end
@pytest.mark.slow
def test_loopback_judged_sample_run_exports(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The bundled samples, judged in-process by the loopback judge: the exported metrics files state the
    project's numbers wherever no rule difference is counted, and the MVEI file re-scores to the README's.  The run
    is the session's shared judged run (tests/shared_runs.py; MultiEmo's sample beside them, which neither export
    reads), read only: the exports go to tmp_path."""
    from shared_runs import judged_sample_run

    from emo_tasks.results.reader import load_run

    out = judged_sample_run(tmp_path_factory) / "run"
    assert sorted(out.rglob("*_results.json"))
    mme = mme_export.export_mme_official(out, tmp_path / "mme", "loopback")
    summary = json.loads((mme / "summary.json").read_text())
    assert len(summary["tasks"]) == 8
    for key, t in summary["tasks"].items():
        assert t["n_scored"] + t["n_failed"] == t["n_samples"], key
        assert t["matches_project"], (key, t)  # the metrics files state the project's numbers
    assert summary["overall"]["matches_project"], summary["overall"]
    run = load_run(out)
    assert summary["overall"]["project"]["rec_s"] == run.value("mme_emotion_sample", "rec_s")
    mvei = mvei_export.export_mvei_official(out, tmp_path / "mvei", "loopback")
    data = json.loads(mvei.read_text())
    assert data and all(len(r["generations"]) == 3 and r["prompt"] and r["image_path"] for r in data.values())
    mvei_summary = json.loads((mvei.parent / "summary.json").read_text())
    assert mvei_summary["official_first_generation"] == mvei_export.official_mvei_metrics(data)
    assert mvei_summary["project_majority"]["acc_total"] == run.value("mvei_sample", "acc_total")
