"""lmms-eval's own `--baseline` (its paired t-test) on our sample tasks, through the real CLI: two `--model openai`
runs on a loopback server (two "models": other answers), the second with `--baseline` pointing at one samples file
of the first.  The paired fields appear for every task with a per-row headline (MVEI: acc_total; MME-Emotion's
subtasks: CoT-S), each paired with its own task's file, and pair exactly the per-sample values `emo-tasks compare`
pairs; MultiEmo-Bench (no per-row value) gets none; lmms-eval's standard errors stay N/A for all our tasks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import API_KEY, cli_env, with_mme_sample
from fakes import Model
from scipy import stats

from emo_tasks.metrics import PAIRED_OF, PAIRED_SCORE
from emo_tasks.results.reader import load_run
from judges.testing import LoopbackServer

TASKS = "mme_emotion_sample,mvei_sample,multiemo_sample"
MME_SUBTASKS = [
    f"mme_emotion_sample_{t}" for t in ("er_lab", "er_wild", "noise_er", "fg_er", "ml_er", "sa", "fg_sa", "ir")
]
PAIRED = {"mvei_sample": "acc_total", **dict.fromkeys(MME_SUBTASKS, "cot_s")}
FIELDS = ("paired_baseline", "paired_baseline_score", "paired_ci_lower", "paired_ci_upper", "paired_pvalue")


def _run(tmp: Path, name: str, salt: str, *extra: str) -> tuple[Path, dict[str, Any], str]:
    out = tmp / name
    cache = with_mme_sample(tmp / f"cache_{name}")
    with LoopbackServer(responder=Model(salt=salt), expected_api_key=API_KEY) as srv:
        env = cli_env(cache, srv, EMO_MME_JUDGE_PROTOCOL="official", EMO_JUDGE_BACKOFF_BASE="0.01",
                      EMO_JUDGE_BACKOFF_MAX="0.05")  # fmt: skip
        args = f"model_version=eval-model,base_url={srv.base_url},api_key={API_KEY},max_frames_num=4"
        cmd = [sys.executable, "-m", "lmms_eval", "--model", "openai", "--model_args", args, "--tasks", TASKS,
               "--output_path", str(out), "--log_samples", *extra]  # fmt: skip
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200, cwd=tmp)
    files = sorted(out.rglob("*_results.json"))
    assert files, proc.stdout[-2000:] + proc.stderr[-4000:]
    return files[-1], json.loads(files[-1].read_text())["results"], proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("baseline")
    base_file, base, _ = _run(tmp, "base", "")
    # one file of the baseline run, as a user types it: every task pairs with its own file of that run
    given = next(base_file.parent.glob("*_samples_mvei_sample.jsonl"))
    new_file, new, log = _run(tmp, "new", "other-model", "--baseline", str(given))
    return {"base": base, "new": new, "base_file": base_file, "new_file": new_file, "log": log}


def _scores(results_file: Path, task: str, keyed: bool = False) -> dict[Any, float]:
    """{doc_id: the score lmms-eval's paired test reads} from a task's samples file of the run (`keyed`: by the unit
    key `emo-tasks compare` uses instead: MVEI's pair id, MME-Emotion's (task, row))."""
    path = next(results_file.parent.glob(f"*_samples_{task}.jsonl"))
    out = {}
    for line in path.read_text().splitlines():
        sample = json.loads(line)
        record = sample[PAIRED[task]]
        assert record[PAIRED_OF] == PAIRED[task]
        if PAIRED_SCORE in record:
            key = (record["pair_id"] if "pair_id" in record else (task, record["row"])) if keyed else sample["doc_id"]
            out[key] = record[PAIRED_SCORE]
    return out


@pytest.mark.slow
def test_baseline_writes_paired_fields_for_every_task_with_a_per_row_headline(runs: dict[str, Any]) -> None:
    for task, metric in PAIRED.items():
        got = runs["new"][task]
        assert all(f in got for f in FIELDS), (task, sorted(got), runs["log"][-3000:])
        # the baseline side is the task's own file of the baseline run: its mean is that run's headline
        assert got["paired_baseline_score"] == pytest.approx(runs["base"][task][f"{metric},none"], abs=1e-9), task
        assert got["paired_ci_lower"] <= got["paired_ci_upper"]


@pytest.mark.slow
def test_paired_values_are_the_per_sample_values_compare_pairs(runs: dict[str, Any]) -> None:
    """lmms-eval pairs by doc_id the scores our records carry; they are `emo-tasks compare`'s per-sample values
    (its units, /100), and lmms-eval's interval is the paired t interval of their differences."""
    for which in ("base_file", "new_file"):
        run = load_run(runs[which].parent.parent)  # the --output_path folder: lmms-eval's files and our judge logs
        for task, metric in PAIRED.items():
            ours = {key: v / 100.0 for key, v in run.samples[task][metric].items()}
            assert _scores(runs[which], task, keyed=True) == pytest.approx(ours, abs=1e-12), (which, task)
    for task in PAIRED:
        base, new = _scores(runs["base_file"], task), _scores(runs["new_file"], task)
        ids = sorted(set(base) & set(new))
        diff = np.array([new[i] - base[i] for i in ids])
        assert len(ids) >= 2 and (diff.std() > 0 or task != "mvei_sample"), (task, diff)  # the models differ
        if diff.std(ddof=1) > 0:
            half = stats.t.ppf(0.975, len(ids) - 1) * diff.std(ddof=1) / np.sqrt(len(ids))
            got = runs["new"][task]
            assert got["paired_ci_lower"] == pytest.approx(100 * (diff.mean() - half), abs=1e-6), task
            assert got["paired_ci_upper"] == pytest.approx(100 * (diff.mean() + half), abs=1e-6), task


@pytest.mark.slow
def test_multiemo_has_no_paired_fields_and_no_standard_error_is_naive(runs: dict[str, Any]) -> None:
    """MultiEmo-Bench's unit is the image (8 rows): no per-row value, so no pairing (not a paired test that counts
    each image 8 times).  lmms-eval's standard errors (bootstrap, CLT, clustered) are N/A for all our tasks."""
    got = runs["new"]["multiemo_sample"]
    assert not any(k.startswith("paired_") for k in got), sorted(got)
    assert "multiemo_sample: no per-row score" in runs["log"]
    for name in ("base", "new"):
        for task, values in runs[name].items():
            errors = {k: v for k, v in values.items() if "stderr" in k}
            assert errors and all(v == "N/A" for v in errors.values()), (name, task, errors)


# ---------------------------------------------------------------------------------------- the loader itself (fast)
def _write(path: Path, samples: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return path


def _ours(doc_id: int, score: float | None, metric: str = "acc_total") -> dict[str, Any]:
    record = {"pair_id": f"p{doc_id}", PAIRED_OF: metric, **({PAIRED_SCORE: score} if score is not None else {})}
    return {"doc_id": doc_id, "target": "x", metric: record, "n_pairs": record}


def test_loader_pairs_each_task_with_its_own_file_of_the_run(tmp_path: Path) -> None:
    from lmms_eval.baselines import loader

    from emo_tasks import lmms_patch

    lmms_patch.patch_baseline_loader(loader)
    given = _write(tmp_path / "S_samples_mvei_sample.jsonl", [_ours(0, 1.0), _ours(1, 0.0), _ours(2, None)])
    _write(tmp_path / "S_samples_other.jsonl", [_ours(0, 0.5, "cot_s")])
    (tmp_path / "S_results.json").write_text(json.dumps({"results": {"mvei_sample": {}}}))
    scores, agg = loader.load_baseline(str(given), "mvei_sample")
    assert scores == {0: 1.0, 1: 0.0} and agg == {"results": {"mvei_sample": {}}}  # an unscored doc is not paired
    assert loader.load_baseline(str(given), "other")[0] == {0: 0.5}  # the other task's own file, not `given`
    assert loader.load_baseline(str(given), "missing_task") == ({}, None)  # no file of its own: nothing paired
    # a MultiEmo-like file (score_of None): nothing paired, not lmms-eval's target-vs-answer fallback (all 0)
    _write(tmp_path / "S_samples_multi.jsonl", [{"doc_id": 0, "target": "x", "srcc": {PAIRED_OF: None}}])
    assert loader.load_baseline(str(given), "multi") == ({}, None)


def test_loader_refuses_a_doc_twice_and_leaves_other_files_to_lmms_eval(tmp_path: Path) -> None:
    from lmms_eval.baselines import loader

    from emo_tasks import lmms_patch

    lmms_patch.patch_baseline_loader(loader)
    lmms_patch.patch_baseline_loader(loader)  # idempotent: one wrapper
    assert getattr(loader._load_baseline_from_local.__wrapped__, "__emo_tasks_patched__", False) is False
    twice = _write(tmp_path / "S_samples_t.jsonl", [_ours(0, 1.0), _ours(0, 0.0)])
    with pytest.raises(ValueError, match="doc 0 is logged twice"):
        loader.load_baseline(str(twice), "t")
    cut = _write(tmp_path / "C_samples_t.jsonl", [_ours(0, 1.0)])
    cut.write_text(cut.read_text() + json.dumps(_ours(1, 0.0))[:25])  # a truncated last line
    with pytest.raises(ValueError, match="C_samples_t.jsonl: line 2 is not JSON"):
        loader.load_baseline(str(cut), "t")
    theirs = _write(
        tmp_path / "T_samples_t.jsonl", [{"doc_id": 0, "exact_score": 0.25}, {"doc_id": 1, "exact_score": 1}]
    )
    assert loader.load_baseline(str(theirs), "t")[0] == {0: 0.25, 1: 1.0}  # lmms-eval's own reading


def test_each_task_yaml_names_its_benchmarks_paired_metric_as_score_key() -> None:
    """The YAML's `score_key` is the metric table's paired metric (or absent: none), on every task YAML."""
    from test_mvei_and_multiemo_tables import PACKAGE, task_config

    from emo_tasks.mme_emotion.scoring import TABLE as MME
    from emo_tasks.multiemo.scoring import TABLE as MULTIEMO
    from emo_tasks.mvei.scoring import TABLE as MVEI

    expected = {"mvei": "acc_total", "mme_emotion": "cot_s", "multiemo": None}
    for folder, table in (("mvei", MVEI), ("mme_emotion", MME), ("multiemo", MULTIEMO)):
        assert (table.paired.name if table.paired else None) == expected[folder]
        yamls = [p for p in (PACKAGE / folder).glob("*.yaml") if isinstance(task_config(p).get("task"), str)]
        assert yamls, folder
        for path in yamls:
            assert task_config(path).get("score_key") == expected[folder], path.name
