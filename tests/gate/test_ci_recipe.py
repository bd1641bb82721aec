"""docs/ci.md's recipe, run as written: its baseline block (bash) and its workflow's `run:` steps (GitHub Actions
YAML, job by job, with `if: always()` honoured) against the bundled samples, a dummy model and the loopback judge.

Only the configuration is replaced: the baseline block's `export` lines, the workflow's `env` values that are
GitHub expressions (`${{ ... }}`) or name the model and tasks, and the judge endpoint.  `uses:` steps (checkout,
artefacts, cache) and `pip install` steps are GitHub's plumbing: this test runs in one folder with the package
installed.  Two checkpoints go through the workflow: the same model (the gate passes) and a worse one (exit 1, and
the trend still runs)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import API_KEY, build_once, cli_env, with_mme_sample
from fakes import Judge

from judges.testing import LoopbackServer

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "ci.md"
GOOD = "Correct. Score: 80. Reason: bright. Answer: anger"
BAD = "Score: 10. Reason: dim. Answer: happiness"
CONFIG = {
    "MODEL": "dummy",
    "MODEL_ARGS": f"response={GOOD}",
    "TASKS": "mvei_sample,multiemo_sample,mme_emotion_sample",
    "DETECT": "--detect 80 --detect cheb=0.3",  # the sample is small: a large drop, so the plan draws a subset
}


def block(name: str, lang: str) -> str:
    """The fenced block after `<!-- ci-recipe: NAME -->` in docs/ci.md."""
    m = re.search(rf"<!-- ci-recipe: {name} -->\s*```{lang}\n(.*?)\n```", DOC.read_text(), re.S)
    assert m, f"docs/ci.md has no `{name}` recipe block"
    return m.group(1)


def baseline_script() -> str:
    """The baseline block with its `export` lines set to the test's configuration (and nothing else changed)."""
    lines = block("baseline", "bash").splitlines()
    exported = [m.group(1) for line in lines if (m := re.match(r"export (\w+)=", line))]
    assert sorted(exported) == sorted(CONFIG), exported  # the recipe's configuration is what this test sets
    return "\n".join(
        f"export {m.group(1)}={shlex_quote(CONFIG[m.group(1)])}" if (m := re.match(r"export (\w+)=", line)) else line
        for line in lines
    )


def shlex_quote(value: str) -> str:
    import shlex

    return shlex.quote(value)


def run_workflow(workflow: dict, env: dict[str, str], work: Path, values: dict[str, str],
                 procs: dict[str, subprocess.CompletedProcess] | None = None) -> dict[str, list]:  # fmt: skip
    """Each job (in `needs` order), each step: `run:` steps in bash (-e) with the workflow's, the job's and the
    step's env; a step after a failure runs only with `if: always()`.  Returns {job: [(step name, exit code)]};
    `procs`, when given, gets each step's process by step name."""
    top = {k: values.get(k, v) for k, v in (workflow.get("env") or {}).items()}
    unresolved = {k: v for k, v in top.items() if "${{" in str(v)}
    assert not unresolved, f"set these for the test: {unresolved}"
    done: dict[str, list] = {}
    jobs = dict(workflow["jobs"])
    while jobs:
        name = next(n for n, job in jobs.items() if all(d in done for d in ([job.get("needs")] if isinstance(
            job.get("needs"), str) else job.get("needs") or [])))  # fmt: skip
        job = jobs.pop(name)
        job_env = {k: values.get(k, v) for k, v in (job.get("env") or {}).items()}
        assert not {k for k, v in job_env.items() if "${{" in str(v)}, job_env
        failed, steps = False, []
        for step in job["steps"]:
            script = step.get("run")
            if script is None or script.strip().startswith("pip install"):
                continue  # GitHub's plumbing (checkout, artefacts, cache) and the install: done here
            if failed and "always()" not in str(step.get("if", "")):
                continue
            full = {**env, **{k: str(v) for k, v in {**top, **job_env, **(step.get("env") or {})}.items()}}
            proc = subprocess.run(["bash", "-e", "-c", script], env=full, cwd=work, capture_output=True, text=True,
                                  timeout=900)  # fmt: skip
            steps.append((step.get("name") or script.split()[0], proc.returncode, proc.stdout + proc.stderr))
            if procs is not None:
                procs[steps[-1][0]] = proc
            failed = failed or proc.returncode != 0
        done[name] = steps
    return done


def _proc(d: dict) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(d["args"], d["returncode"], d["stdout"], d["stderr"])


def _build_recipe(folder: Path) -> None:
    """The recipe in `folder`/work: the baseline block, then the workflow for ckpt-200 (GOOD) and ckpt-400 (BAD);
    every step's process (args, exit code, output) in `folder`/steps.json, so that a reader in another process
    (test_gate_flow, another xdist worker) sees what this one saw."""
    work = folder / "work"
    work.mkdir()
    cache = with_mme_sample(work / ".emo-cache")
    summary = work / "summary.md"
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        env = cli_env(cache, srv, EMO_JUDGE="api", GITHUB_STEP_SUMMARY=str(summary))
        base = subprocess.run(["bash", "-e", "-c", baseline_script()], env=env, cwd=work, capture_output=True,
                              text=True, timeout=900)  # fmt: skip
        assert base.returncode == 0, base.stdout[-3000:] + base.stderr[-3000:]
        workflow = yaml.safe_load(block("workflow", "yaml"))
        runs, procs = {}, {}
        for step, response in (("200", GOOD), ("400", BAD)):
            values = {**CONFIG, "MODEL_ARGS": f"response={response}", "RUN": f"runs/ckpt-{step}",
                      "OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": API_KEY}  # fmt: skip
            procs[step] = {}
            runs[step] = run_workflow(workflow, env, work, values, procs[step])

    def as_dict(proc: subprocess.CompletedProcess) -> dict:
        return {"args": proc.args, "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}

    steps = {"baseline": as_dict(base), "runs": runs,
             "procs": {step: {name: as_dict(p) for name, p in ps.items()} for step, ps in procs.items()}}  # fmt: skip
    (folder / "steps.json").write_text(json.dumps(steps))


def recipe_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """docs/ci.md's recipe run once per test session (conftest.build_once), read-only: `work/` (baseline/,
    gate/subset.json, runs/ckpt-200 and runs/ckpt-400 judged, site/, trend.md) and `steps.json`.  test_gate_flow's
    base, plan, new and bad are this baseline, this plan and these two checkpoints (the same commands; it copies
    them, as it writes beside them)."""
    return build_once(tmp_path_factory, "ci_recipe", _build_recipe)


def recipe_steps(folder: Path) -> dict:
    """`steps.json` of `recipe_folder`: the baseline block's and each workflow step's process."""
    steps = json.loads((folder / "steps.json").read_text())
    steps["baseline"] = _proc(steps["baseline"])
    steps["runs"] = {step: {job: [tuple(s) for s in ss] for job, ss in jobs.items()} for step, jobs in
                     steps["runs"].items()}  # fmt: skip
    steps["procs"] = {step: {name: _proc(d) for name, d in ps.items()} for step, ps in steps["procs"].items()}
    return steps


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = recipe_folder(tmp_path_factory)
    steps = recipe_steps(folder)
    work = folder / "work"
    return {"work": work, "baseline": steps["baseline"], "runs": steps["runs"], "summary": work / "summary.md"}


def _codes(jobs: dict[str, list]) -> dict[str, int]:
    return {name: code for steps in jobs.values() for name, code, _ in steps}


def test_the_baseline_block_plans_a_subset(recipe: dict) -> None:
    work = recipe["work"]
    assert (work / "gate" / "subset.json").is_file()
    out = recipe["baseline"].stdout
    assert "expected power" in out and "judge cost of the subset" in out


# docs/ci.md's name of the gate step (issue 46 added exit 4)
GATE_STEP = "the gate (exit 1 regression, 2 not comparable, 3 error; 4 with --fail-on-judge-shutdown)"


def test_the_same_model_passes_the_gate_and_every_step_runs(recipe: dict) -> None:
    jobs = recipe["runs"]["200"]
    codes = _codes(jobs)
    expected = {"answer the subset's rows", "judge the answers", GATE_STEP, "the trend across checkpoints"}
    assert set(codes) == expected, codes
    assert all(c == 0 for c in codes.values()), [s for steps in jobs.values() for s in steps if s[1]]
    gate = next(out for steps in jobs.values() for name, _, out in steps if name.startswith("the gate"))
    assert "[subset 'gate-p0.8-all80-cheb0.3'" in gate and "planned (subset" in gate
    assert (recipe["work"] / "site" / "ckpt-200" / "index.html").is_file()


def test_a_worse_checkpoint_fails_the_gate_and_the_trend_still_runs(recipe: dict) -> None:
    codes = _codes(recipe["runs"]["400"])
    assert codes[GATE_STEP] == 1, codes
    assert codes["the trend across checkpoints"] == 0
    trend = (recipe["work"] / "trend.md").read_text()
    rows = [line for line in trend.splitlines() if line.startswith(("| 200 ", "| 400 "))]
    assert rows and rows[0].startswith("| 200 ") and rows[1].startswith("| 400 ")
    assert "## Trend" in recipe["summary"].read_text() and (recipe["work"] / "trend.png").stat().st_size > 1000
