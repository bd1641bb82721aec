"""EmoBench-M through the real CLIs: one `lmms-eval --model dummy --tasks emobench_m_sample` run, offline, shared by
the module (report, view, compare, export); and the loader's refusals (fast, no lmms-eval)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env, run_emo

from emo_tasks.common import DataError
from emo_tasks.emobench_m import hooks
from emo_tasks.emobench_m.protocol import scenarios
from emo_tasks.emobench_m.sample import sample_root
from emo_tasks.settings import SettingsError

sys.path.insert(0, str(Path(__file__).parent))
import official_eval  # noqa: E402  (the authors' functions, vendored)

#: The dummy model's one answer, in the requested format: right wherever the gold is "neutral".
ANSWER = "{'emotion': 'neutral'}"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one lmms-eval run of this module (the bundled sample: 26 rows over the 13 scenarios)."""
    base = tmp_path_factory.mktemp("emobench_m_run")
    out = base / "out"
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={ANSWER}", "--tasks",
           "emobench_m_sample", "--output_path", str(out), "--log_samples"]  # fmt: skip
    proc = subprocess.run(cmd, env=cli_env(base / "cache"), capture_output=True, text=True, timeout=900, cwd=base)
    assert sorted(out.rglob("*_results.json")), proc.stdout[-2000:] + proc.stderr[-4000:]
    return out


def _results(run: Path) -> dict:
    return json.loads(sorted(run.rglob("*_results.json"))[-1].read_text(encoding="utf-8"))["results"]


@pytest.mark.slow
def test_the_sample_runs_offline_and_scores(run: Path) -> None:
    res = _results(run)
    assert res["emobench_m_sample"]["n_samples,none"] == 26
    # MOSI's two gold labels are neutral and negative: the answer "neutral" is right once.
    assert res["emobench_m_sample_mosi"]["accuracy,none"] == 50.0
    assert res["emobench_m_sample_mosi"]["coverage,none"] == 100.0
    # every classification scenario's first row is "neutral" but FGMSA's (weak negative) and the true/false ones
    assert res["emobench_m_sample_fgmsa"]["accuracy,none"] == 0.0
    assert (
        res["emobench_m_sample_smile"]["bleu,none"] == 0.0 and res["emobench_m_sample_smile"]["accuracy,none"] is None
    )


@pytest.mark.slow
def test_export_is_the_authors_input_and_their_scorer_agrees(run: Path, tmp_path: Path) -> None:
    """Their `evaluate_classification` / `evaluate_joint` on the exported files give our results.json / 100."""
    out = tmp_path / "export"
    proc = run_emo(cli_env(tmp_path / "cache"), "export", str(run.parent / run.name), "--format",
                   "emobench-m-official", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    res = _results(run)
    for sc in scenarios().values():
        task = res[sc.sample_task]
        if sc.kind == "generation":
            rows = json.loads((out / "generation" / sc.file).read_text(encoding="utf-8"))
            assert set(rows[0]) == {"video", "prediction", "reference"} and rows[0]["prediction"] == ANSWER
            continue
        folder = "classification" if sc.kind == "classification" else "joint"
        metrics = tmp_path / f"{sc.key}.json"
        if sc.kind == "classification":
            official_eval.evaluate_classification([str(out / folder / sc.file)], str(metrics))
            keys = {"accuracy": "accuracy", "precision": "precision", "recall": "recall", "f1": "f1_score"}
        else:
            official_eval.evaluate_joint(str(out / folder / sc.file), str(metrics))
            keys = {"accuracy": "joint_accuracy", "precision": "joint_precision", "recall": "joint_recall",
                    "f1": "joint_f1"}  # fmt: skip
        theirs = json.loads(metrics.read_text(encoding="utf-8"))
        for ours, their in keys.items():
            assert task[f"{ours},none"] == pytest.approx(100 * theirs[their], rel=1e-12, abs=1e-12), (sc.key, ours)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["format"] == "emobench-m-official" and len(summary["tasks"]) == 13


@pytest.mark.slow
def test_report_view_and_compare(run: Path, tmp_path: Path) -> None:
    env = cli_env(tmp_path / "cache")
    report = run_emo(env, "report", str(run))
    assert report.returncode == 0, report.stderr
    assert "## EmoBench-M — accuracy" in report.stdout and " MELD | MER2023 |" in report.stdout
    site = tmp_path / "site"
    view = run_emo(env, "view", str(run), "--out", str(site))
    assert view.returncode == 0 and "26 samples" in view.stdout + view.stderr, view.stderr
    compare = run_emo(env, "compare", str(run), str(run))
    assert compare.returncode == 0, compare.stderr
    line = next(x for x in compare.stdout.splitlines() if x.startswith("emobench_m_sample "))
    assert "24 (24/24)" in line  # the group pools the 12 scored scenarios' 24 samples (SMILE has no accuracy)


# ------------------------------------------------------------------------------------------------ the loader
@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample's folder: the authors' layout (benchmark_json/, dataset/<folder>/videos/)."""
    return sample_root(tmp_path_factory.mktemp("emobench_m_cache"))


def test_the_data_root_is_required_and_checked(tmp_path: Path, data_root: Path) -> None:
    with pytest.raises(SettingsError, match="EMO_EMOBENCH_M_ROOT is not set.*Google Drive"):
        hooks.load_task("emobench_m/benchmark/meld", {"EMO_CACHE_DIR": str(tmp_path)})
    with pytest.raises(SettingsError, match=f"EMO_EMOBENCH_M_ROOT={tmp_path}: no benchmark_json/"):
        hooks.load_task("emobench_m/benchmark/meld", {"EMO_EMOBENCH_M_ROOT": str(tmp_path)})
    docs = hooks.load_task("emobench_m/benchmark/meld", {"EMO_EMOBENCH_M_ROOT": str(data_root)})
    assert [d["gold"] for d in docs] == ["neutral", "surprise"]


def test_missing_files_are_named(tmp_path: Path, data_root: Path) -> None:
    root = shutil.copytree(data_root, tmp_path / "root")
    (root / "benchmark_json" / "MELD.json").unlink()
    with pytest.raises(DataError, match=r"benchmark_json/MELD\.json is missing"):
        hooks.load_task("emobench_m/benchmark/meld", {"EMO_EMOBENCH_M_ROOT": str(root)})
    (root / "dataset" / "MOSI" / "videos" / "MOSI" / "sample_01.mp4").unlink()
    with pytest.raises(DataError, match=r"1 of 2 EmoBench-M MOSI videos .* missing:\n.*sample_01\.mp4 \(1\)"):
        hooks.load_task("emobench_m/benchmark/mosi", {"EMO_EMOBENCH_M_ROOT": str(root)})
    rows = json.loads((root / "benchmark_json" / "MC-EIU.json").read_text(encoding="utf-8"))
    rows[1]["conversations"][1]["value"] = "happy"
    (root / "benchmark_json" / "MC-EIU.json").write_text(json.dumps(rows), encoding="utf-8")
    with pytest.raises(DataError, match=r"MC-EIU\.json row 1: cannot read an emotion and an intent .*'happy'"):
        hooks.load_task("emobench_m/benchmark/mc_eiu", {"EMO_EMOBENCH_M_ROOT": str(root)})
    with pytest.raises(DataError, match="dataset_name must be emobench_m/"):
        hooks.load_task("emobench_m/benchmark/nope", {"EMO_EMOBENCH_M_ROOT": str(root)})
