"""Reasoning judges and retired judge models through the real CLIs (issue 34, items 5 and 6).

One `lmms-eval --predict_only` run of the MME-Emotion and MultiEmo samples (lmms-eval's dummy model) is judged by
`emo-tasks judge` with loopback judges: the fake judge of the other tests (`fakes.Judge`), the same judge reasoning
first with decoy `<score>`, `<step>` and "Final score" lines in its `<think>`, one that runs out of tokens inside its
reasoning for some requests, and one whose judge or step model is retired (404 `model_not_found`, or a 400 "does
not exist").  The last also runs in process (lmms-eval with the judge in its aggregation).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import API_KEY, cli_env, run_emo
from fakes import Judge

from emo_tasks.site.files import script_json
from judges.testing import LoopbackServer, Reply, last_user_text

pytestmark = pytest.mark.slow

TASKS = "mme_emotion_sample,multiemo_sample"
#: lmms-eval's dummy model answers every document with this (an MME answer and a MultiEmo score in one)
ANSWER = "The brows are lowered and the voice is loud. Answer: anger. Correct. Score: 70. Reason: tense."
DECOY = (
    "Let me weigh it. <step>Step 1: decoy. Step 2: decoy. Step 3: decoy. Step 4: decoy. Step 5: The predicted "
    "emotion is happiness.</step> Draft: <score>Step 1: 0/1, Step 2: 0/1, Step 3: 0/1, Step 4: 0/1, Step 5: 0/1"
    "</score> Final score: 100"
)
RETIRED = "gpt-4-0613"


def _lmms(out: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={ANSWER}", "--tasks",
           TASKS, "--batch_size", "1", "--output_path", str(out), *flags]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=out.parent)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reasoning")
    out = root / "answers"
    proc = _lmms(out, cli_env(root / "cache_answers", TZ="UTC"), "--predict_only", "--log_samples")
    assert sorted(out.rglob("*_results.json")), proc.stdout[-2000:] + proc.stderr[-4000:]
    return {"root": root, "answers": out}


class Reasoning:
    """`fakes.Judge`'s answers, each after a reasoning block holding decoys; `truncate(text)` True: the request's
    answer is cut off inside its reasoning instead (finish_reason "length")."""

    def __init__(self, truncate: Any = None) -> None:
        self.plain = Judge()
        self.truncate = truncate
        self.truncated: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, body: dict, attempt: int) -> Reply:
        reply = self.plain(body, attempt)
        if reply.kind != "answer":
            return reply
        text = last_user_text(body)
        if self.truncate is not None and self.truncate(text):
            with self.lock:
                self.truncated.add(hashlib.sha256(text.encode()).hexdigest())
            return Reply(text=f"<think>{DECOY} and then", finish_reason="length")
        return Reply(text=f"<think>{DECOY}</think>\n\n{reply.text}")


def _judge(run: dict[str, Path], name: str, responder: Any, *flags: str) -> tuple[subprocess.CompletedProcess, Any]:
    out = run["root"] / name
    with LoopbackServer(responder=responder, expected_api_key=API_KEY) as srv:
        env = cli_env(run["root"] / f"cache_{name}", srv, EMO_JUDGE_BACKOFF_BASE="0.01", EMO_JUDGE_BACKOFF_MAX="0.05")
        proc = run_emo(env, "judge", str(run["answers"]), "--multiemo-judge", "--out", str(out), *flags)
    return proc, srv


def _results(folder: Path) -> dict[str, dict[str, Any]]:
    (path,) = sorted(folder.glob("*_results.json"))
    data = json.loads(path.read_text())["results"]
    return {t: {k: v for k, v in row.items() if k != "alias"} for t, row in data.items()}


def _summaries(folder: Path, suffix: str = "_summary.json") -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((folder / "emo_tasks_judge").glob(f"*{suffix}"))]


def _log_rows(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for p in sorted((folder / "emo_tasks_judge").glob("*_judge.jsonl"))
            for x in p.read_text().splitlines()]  # fmt: skip


def test_a_reasoning_judge_with_decoys_gives_exactly_the_numbers_of_the_same_judge_without_reasoning(
    run: dict[str, Path],
) -> None:
    plain, _ = _judge(run, "plain", Judge())
    assert plain.returncode == 0, plain.stderr[-3000:]
    reasoning, srv = _judge(run, "reasoning", Reasoning())
    assert reasoning.returncode == 0, reasoning.stderr[-3000:]
    assert all(c.outcome == "answer" for c in srv.calls)  # every answer reasoned first, none was asked twice
    got, want = _results(run["root"] / "reasoning"), _results(run["root"] / "plain")
    assert got == want  # every metric of every task, MultiEmo's judged ones too
    assert want["mme_emotion_sample"]["n_scored,none"] == 16 and want["multiemo_sample"]["judged_n_images,none"]
    for summary in _summaries(run["root"] / "reasoning"):
        if summary.get("benchmark") == "MME-Emotion":
            assert summary["n_judge_truncated"] == 0 and summary["judge_failures"] == {}
    # the log shows what was parsed (the answer part) and keeps the whole answer beside it
    plain_rows = {(r["task"], r["row"]): r for r in _log_rows(run["root"] / "plain")}
    rows = _log_rows(run["root"] / "reasoning")
    assert len(rows) == 16
    for row in rows:
        same = plain_rows[(row["task"], row["row"])]
        assert (row["judge_text"], row["step_text"], row["ratings"]) == (
            same["judge_text"], same["step_text"], same["ratings"])  # fmt: skip
        assert row["raw_answers"]["judge"] == f"<think>{DECOY}</think>\n\n{same['judge_text']}"
        assert row["raw_answers"]["step_agent"].startswith("<think>") and same["raw_answers"] == {}
    # `emo-tasks view` shows the judgement: the parsed answer, and the whole one
    site = run["root"] / "site"
    view = run_emo(cli_env(run["root"] / "cache_reasoning"), "view", str(run["root"] / "reasoning"), "--out", str(site))
    assert view.returncode == 0, view.stderr[-3000:]
    shown = "".join(p.read_text(errors="replace") for p in site.rglob("*.js"))
    for row in rows:
        assert script_json(row["judge_text"]) in shown and script_json(row["raw_answers"]["judge"]) in shown


def test_an_answer_cut_off_inside_its_reasoning_is_counted_as_truncated_and_named_by_the_report(
    run: dict[str, Path],
) -> None:
    def some(text: str) -> bool:  # a third of the MME judge's and of MultiEmo's judge requests
        judged = "Rating Requirements" in text or "Final score" in text
        return judged and hashlib.sha256(text.encode()).digest()[0] % 3 == 0

    responder = Reasoning(truncate=some)
    proc, srv = _judge(run, "truncated", responder)
    out = run["root"] / "truncated"
    mme_cut = {c.key for c in srv.calls if c.model == "gpt-4o-2024-11-20" and c.images and c.outcome == "answer"}
    assert responder.truncated and proc.returncode in (0, 4), proc.stderr[-3000:]
    mme = [s for s in _summaries(out) if s.get("benchmark") == "MME-Emotion"]
    truncated = sum(s["n_judge_truncated"] for s in mme)
    failures = sum(s["judge_failures"].get("judge:truncated", 0) for s in mme)
    rows = [r for r in _log_rows(out) if r["failure_reason"] == "truncated"]
    assert truncated == failures == len(rows) > 0
    assert all(r["judge_text"] is None and r["raw_answers"]["judge"].startswith("<think>") for r in rows)
    assert len(mme_cut) >= truncated  # each truncated judge request was sent once (not asked again)
    results = _results(out)
    assert results["mme_emotion_sample"]["n_judge_failed,none"] == truncated
    assert results["mme_emotion_sample"]["n_scored,none"] == 16 - truncated
    (multi,) = _summaries(out, "_judged_summary.json")
    assert multi["n_judge_truncated"] == multi["n_judge_failed"] > 0
    assert f"{multi['n_judge_truncated']} of 48 judge answers were cut off" in proc.stderr
    # the report names them, in every format
    env = cli_env(run["root"] / "cache_truncated")
    board = json.loads(run_emo(env, "report", str(out), "--format", "json").stdout)["runs"][0]
    assert sum(v or 0 for v in board["n_judge_truncated"].values()) == truncated
    assert any("cut off inside their reasoning (n_judge_truncated" in n for n in board["notes"])
    markdown = run_emo(env, "report", str(out)).stdout
    assert "n_judge_truncated" in markdown and "judge:truncated" in markdown


def _retired(status: int, role_model: str) -> Any:
    judge = Judge()

    def reply(body: dict, attempt: int) -> Reply:
        if body.get("model") == role_model:
            if status == 404:
                text = f"The model `{role_model}` does not exist or you do not have access to it."
                return Reply(kind="status", status=404, code="model_not_found", text=text)
            return Reply(kind="status", status=400, text=f"The model `{role_model}` does not exist.")
        return judge(body, attempt)

    return reply


@pytest.mark.parametrize(("status", "flag", "role"), [(404, "--judge-model", "judge"), (400, "--step-model", "step")])
def test_a_retired_judge_model_stops_the_stage_at_once_with_exit_3(
    run: dict[str, Path], status: int, flag: str, role: str
) -> None:
    name = f"retired_{status}"
    proc, srv = _judge(run, name, _retired(status, RETIRED), flag, RETIRED)
    assert proc.returncode == 3, proc.stderr[-3000:]
    asked = [c for c in srv.calls if c.model == RETIRED]
    assert 1 <= len(asked) <= 2, len(asked)
    if role == "step":  # the judge is never reached
        assert not [c for c in srv.calls if c.model == "gpt-4o-2024-11-20"]
    lines = [x for x in proc.stderr.splitlines() if RETIRED in x]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert f"the {role} model '{RETIRED}'" in lines[0] and "docs/judges.md#changing-the-judge" in lines[0]
    assert "Traceback" not in proc.stderr
    assert not list((run["root"] / name).glob("*_results.json"))


def test_a_retired_judge_model_stops_the_in_process_judge_with_exit_3(run: dict[str, Path]) -> None:
    out = run["root"] / "in_process"
    with LoopbackServer(responder=_retired(404, RETIRED), expected_api_key=API_KEY) as srv:
        env = cli_env(run["root"] / "cache_in_process", srv, EMO_JUDGE_MODEL=RETIRED, TZ="UTC")
        proc = _lmms(out, env, "--log_samples")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert 1 <= len([c for c in srv.calls if c.model == RETIRED]) <= 2
    assert not list(out.rglob("*_results.json"))  # no numbers for a run that was not judged
    said = [x for x in proc.stderr.splitlines() if x.startswith("emo-tasks: judging stopped:")]
    assert len(said) == 1 and f"the judge model '{RETIRED}'" in said[0], proc.stderr[-3000:]
    assert "docs/judges.md#changing-the-judge" in said[0]
