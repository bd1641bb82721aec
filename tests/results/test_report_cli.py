"""`emo-tasks report / compare / agreement` on real lmms-eval output folders (two dummy-model runs of the sample
tasks) and on small hand-made rating files checked against scipy / sklearn."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import shared_gate_runs
from conftest import env_without_secrets, icc21_reference, with_mme_sample

# "Correct" answers every MVEI pair (half are right); the bad run gives no decision at all (give-up -> 0 %).
GOOD = "Correct. Score: 80. Reason: bright. Answer: anger"
BAD = "Score: 10. Reason: dim."
TASKS = "mvei_sample,multiemo_sample,mme_emotion_sample"


def _env(cache: Path) -> dict[str, str]:
    env = env_without_secrets()
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", EMO_CACHE_DIR=str(cache), EMO_PROGRESS="0")
    return env


def emo(*args: str, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "emo_tasks", *args], env=_env(cache), capture_output=True, text=True, timeout=300
    )


#: the generation setting the "short" run changes (--gen_kwargs): below every task's own max_new_tokens
SHORT = 64


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three real lmms-eval runs (in parallel, ~30 s) with --log_samples and --output_path: "short" is "good" with
    --gen_kwargs max_new_tokens=SHORT (the dummy model's answer is the same: only the setting differs).  "good" is
    test_trend's "ckpt-1000" too (`shared_gate_runs.good_offline_run`, built once per session; read-only: the tests
    copy it before they change it)."""
    assert (GOOD, TASKS) == (shared_gate_runs.GOOD, shared_gate_runs.TASKS)  # the shared run is the one made here
    root = tmp_path_factory.mktemp("runs")
    procs = {}
    for name, response, extra in (("bad", BAD, []), ("short", GOOD, ["--gen_kwargs", f"max_new_tokens={SHORT}"])):
        cmd = [
            sys.executable,
            "-m",
            "lmms_eval",
            "--model",
            "dummy",
            "--model_args",
            f"response={response}",
            "--tasks",
            TASKS,
            "--output_path",
            str(root / name),
            "--log_samples",
            *extra,
        ]
        procs[name] = subprocess.Popen(
            cmd,
            env=_env(with_mme_sample(root / f"cache_{name}")),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    good = shared_gate_runs.good_offline_run(tmp_path_factory)  # while the two others run
    for proc in procs.values():
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-3000:]
    return {"good": good, "bad": root / "bad", "short": root / "short", "cache": root / "cache_report"}


def _results(run: Path) -> dict:
    return json.loads(next(run.rglob("*results.json")).read_text())


@pytest.mark.slow
def test_report_md_csv_json_and_plot(runs: dict[str, Path], tmp_path: Path) -> None:
    good, bad, cache = runs["good"], runs["bad"], runs["cache"]
    md = emo(
        "report", str(good), str(bad), "--out", str(tmp_path / "r.md"), "--plot", str(tmp_path / "r.png"), cache=cache
    )
    assert md.returncode == 0, md.stderr
    text = (tmp_path / "r.md").read_text()
    for title in ("MME-Emotion — Rec-S", "MME-Emotion — Avg Token", "## MVEI", "## MultiEmo-Bench"):
        assert title in text
    assert f"dummy (response={GOOD})" in text and f"dummy (response={BAD})" in text
    assert "50.00 [" in text  # the good run's MVEI accuracy with its CI
    assert "offline judge mode" in text  # rea_s is null without a judge, and the report says so

    res = emo("report", str(good), str(bad), "--format", "csv", cache=cache)
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert set(rows[0]) == {"run", "benchmark", "task", "metric", "value", "ci_low", "ci_high", "n"}
    good_results = _results(good)["results"]
    row = next(
        r for r in rows if r["run"].endswith(f"{GOOD})") and r["task"] == "mvei_sample" and r["metric"] == "acc_total"
    )
    assert float(row["value"]) == good_results["mvei_sample"]["acc_total,none"] == 50.0
    assert float(row["ci_low"]) <= 50.0 <= float(row["ci_high"]) and row["n"] == "16"

    res = emo("report", str(good), str(bad), "--format", "json", "--out", str(tmp_path / "lb.json"), cache=cache)
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "lb.json").read_text())
    assert doc["schema"] == "emo-tasks/leaderboard/1" and len(doc["runs"]) == 2
    run = doc["runs"][0]
    for key in (
        "label",
        "model",
        "model_args",
        "emo_tasks_version",
        "lmms_eval_version",
        "date",
        "data_source",
        "judge_models",
        "judge_protocol",
        "prompt_hashes",
        "sample_counts",
        "judge_failures",
        "metrics",
    ):
        assert key in run, key
    assert run["model"] == "dummy" and run["sample_counts"]["mvei_sample"] == 16
    assert run["data_source"]["mvei_sample"] == "sample"
    assert run["prompt_hashes"]["mme_emotion_sample_er_lab"]["model_prompt"]
    for task, metrics in run["metrics"].items():
        for metric, cell in metrics.items():
            assert cell["value"] == good_results[task][f"{metric},none"], (task, metric)
    acc = run["metrics"]["mvei_sample"]["acc_total"]
    assert acc["ci_low"] <= acc["value"] <= acc["ci_high"] and acc["n"] == 16
    rec = run["metrics"]["mme_emotion_sample"]["rec_s"]
    assert rec["n"] == 16 and rec["ci_low"] is not None
    assert run["metrics"]["multiemo_sample"]["cheb"]["n"] == 6

    from PIL import Image

    with Image.open(tmp_path / "r.png") as img:
        assert img.size[0] >= 800 and img.size[1] >= 300
    assert (tmp_path / "r.png").stat().st_size > 10_000


@pytest.mark.slow
def test_compare_exit_codes(runs: dict[str, Path]) -> None:
    good, bad, cache = runs["good"], runs["bad"], runs["cache"]
    worse = emo("compare", str(good), str(bad), cache=cache)
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "mvei_sample:acc_total" in worse.stderr and "mcnemar_exact" in worse.stdout
    # a tolerated drop of 60 points (MVEI fell 50) lets it pass
    tolerated = emo("compare", str(good), str(bad), "--metric", "acc_total", "--max-drop", "60", cache=cache)
    assert tolerated.returncode == 0, tolerated.stdout + tolerated.stderr
    better = emo("compare", str(bad), str(good), "--metric", "acc_total", cache=cache)
    assert better.returncode == 0 and "better" in better.stdout
    same = emo("compare", str(good), str(good), cache=cache)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "n.s." in same.stdout


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


@pytest.mark.slow
def test_compare_refuses_different_judges_prompts_and_data(runs: dict[str, Path], tmp_path: Path) -> None:
    good, cache = runs["good"], runs["cache"]
    judged = _copy(good, tmp_path / "judged")
    summary = next((judged / "emo_tasks_judge").glob("sample_mme_emotion_sa_*_summary.json"))
    doc = json.loads(summary.read_text())
    doc["judge_models"] = {"step": "other-step", "judge": "other-judge"}
    summary.write_text(json.dumps(doc))
    res = emo("compare", str(good), str(judged), cache=cache)
    assert res.returncode == 2 and "judges:" in res.stderr and "judge_models" in res.stderr, res.stderr
    forced = emo("compare", str(good), str(judged), "--force", cache=cache)
    assert forced.returncode == 0 and "warning (--force)" in forced.stderr, forced.stderr

    prompted = _copy(good, tmp_path / "prompted")
    summary = next((prompted / "emo_tasks_judge").glob("sample_mme_emotion_ir_*_summary.json"))
    doc = json.loads(summary.read_text())
    doc["prompt_hashes"]["model_prompt"] = "0000000000000000"
    summary.write_text(json.dumps(doc))
    res = emo("compare", str(good), str(prompted), cache=cache)
    assert res.returncode == 2 and "prompts:" in res.stderr and "prompt_hashes" in res.stderr

    # other data: same task name, but no sample in common
    other = _copy(good, tmp_path / "other")
    log = next(other.rglob("*_samples_mvei_sample.jsonl"))
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    for line in lines:
        line["acc_total"]["pair_id"] = "other-" + line["acc_total"]["pair_id"]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = emo("compare", str(good), str(other), "--metric", "acc_total", cache=cache)
    assert res.returncode == 2 and "share no sample" in res.stderr, res.stderr
    results_file = next(other.rglob("*results.json"))
    data = json.loads(results_file.read_text())
    data["configs"]["mvei_sample"]["dataset_name"] = "mvei/benchmark"
    results_file.write_text(json.dumps(data))
    res = emo("compare", str(good), str(other), "--metric", "acc_total", cache=cache)
    assert res.returncode == 2 and "dataset_name" in res.stderr


def _configs(run: Path) -> dict:
    return _results(run)["configs"]


@pytest.mark.slow
def test_compare_refuses_another_generation_setting_and_the_trend_too(runs: dict[str, Path]) -> None:
    """Two runs of one model whose only difference is --gen_kwargs max_new_tokens: the numbers agree here (the
    dummy model's answer is short), but a cap can cut an answer, so compare refuses them (exit 2) naming the
    setting, its two values and the tasks; --force compares with a warning; the trend refuses by the same rule."""
    good, short, cache = runs["good"], runs["short"], runs["cache"]
    values = {t: r for t, r in _results(good)["results"].items()}
    assert values == {t: r for t, r in _results(short)["results"].items()}  # only the setting differs
    caps = {t: c["generation_kwargs"]["max_new_tokens"] for t, c in _configs(good).items()}
    assert {t: c["generation_kwargs"]["max_new_tokens"] for t, c in _configs(short).items()} == dict.fromkeys(
        caps, SHORT
    )
    res = emo("compare", str(good), str(short), cache=cache)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [x for x in res.stderr.splitlines() if x.startswith("  - generation: max_new_tokens")]
    by_cap: dict[int, list[str]] = {}
    for task, cap in sorted(caps.items()):
        by_cap.setdefault(cap, []).append(task)
    assert len(lines) == len(by_cap), res.stderr  # one line per pair of values, naming its tasks
    for cap, tasks in by_cap.items():
        named = ", ".join(tasks)
        line = next(x for x in lines if f" {cap} vs {SHORT} in" in x)
        assert (f"in {len(tasks)} tasks ({named})" if len(tasks) > 1 else f"in {named}:") in line, line
    forced = emo("compare", str(good), str(short), "--force", cache=cache)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "warning (--force): generation: max_new_tokens" in forced.stderr
    trend = emo("report", str(good), str(short), "--trend", "given", cache=cache)
    assert trend.returncode == 2 and trend.stdout == "", trend.stdout + trend.stderr
    assert trend.stderr.count("\n") == 1 and "generation: max_new_tokens" in trend.stderr, trend.stderr
    assert "#1) -> " in trend.stderr and "#2): " in trend.stderr


def _set_medium(run: Path, as_vlmevalkit: bool) -> None:
    """Edit a real results file so that MME-Emotion's prompt asked about video frames, as lmms-eval records a run
    of an image model the task's table names (`--model llava`: its entry, the table unmerged), or as a VLMEvalKit
    run without --video-llm records it (the table, its `default` and top level set to the medium); the VLMEvalKit
    form also records VLMEvalKit's generation settings instead of lmms-eval's (its --base-url defaults)."""
    path = next(run.rglob("*results.json"))
    data = json.loads(path.read_text())
    for config in data["configs"].values():
        table = config.get("lmms_eval_specific_kwargs") or {}
        if "medium" not in table:
            continue
        entries = {k: v for k, v in table.items() if isinstance(v, dict)}
        if as_vlmevalkit:
            config["lmms_eval_specific_kwargs"] = {**entries, "default": {"medium": "video frames"},
                                                   "medium": "video frames"}  # fmt: skip
        else:
            assert entries["llava"] == {"medium": "video frames"}
            config["lmms_eval_specific_kwargs"] = entries
    if as_vlmevalkit:
        del data["configs"]["mvei_sample"]["generation_kwargs"]
        data["emo_tasks_vlmeval"] = {"generation": {"model": "--base-url (VLMEvalKit's LMDeployAPI)",
                                                    "temperature": 0.0, "max_tokens": 2**15}}  # fmt: skip
    else:
        data["config"]["model"] = "llava"
    path.write_text(json.dumps(data))


@pytest.mark.slow
def test_compare_names_the_medium_in_words(runs: dict[str, Path], tmp_path: Path) -> None:
    """MME-Emotion asked about video frames (an image model) against a run asked about the video: one line naming
    the medium of each run and the 8 tasks, not "config field lmms_eval_specific_kwargs differs" per task; a
    VLMEvalKit-style record's generation settings are compared too (MVEI's max_new_tokens 256 against VLMEvalKit's
    default 32768, temperature 1.0 against 0.0), and what it does not record is a note."""
    good, cache = runs["good"], runs["cache"]
    mme = sorted(t for t, c in _configs(good).items() if "medium" in (c.get("lmms_eval_specific_kwargs") or {}))
    assert len(mme) == 8
    for name, as_vlmevalkit in (("llava", False), ("vlmevalkit", True)):
        frames = _copy(good, tmp_path / name)
        _set_medium(frames, as_vlmevalkit)
        res = emo("compare", str(good), str(frames), cache=cache)
        assert res.returncode == 2, res.stdout + res.stderr
        assert "lmms_eval_specific_kwargs differs" not in res.stderr, res.stderr
        medium = [x for x in res.stderr.splitlines() if "medium" in x]
        assert len(medium) == 1, res.stderr
        assert medium[0].startswith("  - prompts: the medium differs: the base run's prompt asked about 'video' (a "
                                    "video model, sent the video), the new run's about 'video frames' (an image "
                                    f"model, sent frames of the video), in 8 tasks ({', '.join(mme)}): ")  # fmt: skip
        generation = [x for x in res.stderr.splitlines() if "generation" in x]
        if not as_vlmevalkit:
            assert generation == [], res.stderr
            continue
        mvei = _configs(good)["mvei_sample"]["generation_kwargs"]
        assert f"  - generation: max_new_tokens {mvei['max_new_tokens']} vs 32768 in mvei_sample: " in res.stderr
        assert f"  - generation: temperature {mvei['temperature']!r} vs 0.0 in mvei_sample: " in res.stderr
        unrecorded = ", ".join(sorted(set(mvei) - {"max_new_tokens", "temperature"}))
        assert (f"note: generation settings not checked for mvei_sample: {unrecorded} (the new run, VLMEvalKit, "
                "--base-url (VLMEvalKit's LMDeployAPI), does not record them)") in res.stderr  # fmt: skip


@pytest.mark.slow
def test_report_says_what_is_missing(runs: dict[str, Path], tmp_path: Path) -> None:
    cache = runs["cache"]
    bare = _copy(runs["good"], tmp_path / "bare")
    for log in bare.rglob("*_samples_*.jsonl"):
        log.unlink()
    shutil.rmtree(bare / "emo_tasks_judge")
    results_file = next(bare.rglob("*results.json"))
    data = json.loads(results_file.read_text())
    del data["results"]["mvei_sample"]["acc_total,none"]
    del data["results"]["multiemo_sample"]
    results_file.write_text(json.dumps(data))
    res = emo("report", str(bare), str(runs["bad"]), cache=cache)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "n/a" in out
    assert "no acc_total in" in out
    assert "no MultiEmo-Bench results" in out
    assert "--log_samples" in out and "--output_path" in out
    js = emo("report", str(bare), "--format", "json", cache=cache)
    assert js.returncode == 0
    run = json.loads(js.stdout)["runs"][0]
    assert run["metrics"]["mvei_sample"]["acc_sentiment_polarity"]["ci_low"] is None
    assert any("--log_samples" in n for n in run["notes"])
    missing = emo("report", str(tmp_path / "nothing"), cache=cache)  # a bad argument (docs/cli.md#exit-codes)
    assert missing.returncode == 3 and "nothing" in missing.stderr, missing.stderr


# ---------------------------------------------------------------------------------------------- agreement
def _write(path: Path, pairs: list[tuple[str, float]]) -> Path:
    path.write_text("".join(json.dumps({"item": i, "rating": r}) + "\n" for i, r in pairs))
    return path


@pytest.mark.slow  # a subprocess: not in the fast tier
def test_agreement_matches_scipy_and_sklearn(tmp_path: Path) -> None:
    from scipy.stats import spearmanr
    from sklearn.metrics import cohen_kappa_score

    judge = [
        ("v1#step1", 1),
        ("v1#step2", 0),
        ("v2#step1", 1),
        ("v3#step1", 1),
        ("v4#step1", 0),
        ("v5#step1", 1),
        ("v6#step1", 0),
        ("judge-only", 1),
    ]
    human = [
        ("v1#step1", 1),
        ("v1#step2", 0),
        ("v2#step1", 0),
        ("v3#step1", 1),
        ("v4#step1", 0),
        ("v5#step1", 1),
        ("v6#step1", 1),
        ("human-only-1", 0),
        ("human-only-2", 1),
    ]
    jf, hf = _write(tmp_path / "judge.jsonl", judge), _write(tmp_path / "human.jsonl", human)
    res = emo("agreement", str(jf), str(hf), "--format", "json", cache=tmp_path / "c")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    shared = [i for i, _ in judge if i in dict(human)]
    x = np.array([dict(judge)[i] for i in shared], dtype=float)
    y = np.array([dict(human)[i] for i in shared], dtype=float)
    assert doc["n"] == 7 and doc["missing"] == {"only_in_judge": 1, "only_in_human": 2}
    assert doc["spearman"] == pytest.approx(spearmanr(x, y).statistic)
    assert doc["cohen_kappa"] == pytest.approx(cohen_kappa_score(x, y))
    assert doc["icc"] == pytest.approx(icc21_reference(np.column_stack([x, y]))) and doc["icc_form"] == "ICC(2,1)"
    text = emo("agreement", str(jf), str(hf), "--icc-form", "ICC(3,1)", cache=tmp_path / "c")
    assert text.returncode == 0 and "ICC(3,1)" in text.stdout and "1 only in judge file" in text.stdout


@pytest.mark.slow  # a subprocess: not in the fast tier
def test_agreement_without_overlap_exits_2(tmp_path: Path) -> None:
    jf = _write(tmp_path / "judge.jsonl", [("a", 1), ("b", 2)])
    hf = _write(tmp_path / "human.jsonl", [("c", 1), ("d", 2)])
    res = emo("agreement", str(jf), str(hf), cache=tmp_path / "c")
    assert res.returncode == 2 and "no item is rated in both" in res.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"item": "a"}\n')
    res = emo("agreement", str(bad), str(hf), cache=tmp_path / "c")
    assert res.returncode == 2 and "bad.jsonl:1" in res.stderr
