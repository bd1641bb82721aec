"""EmoBench-M's LLM scorer through `emo-tasks agreement` and `emo-tasks calibrate`: the judge log the scorer writes
(in process here: `hooks.evaluate` with an output folder, against a loopback judge), read back by
`emo_tasks/emobench_m/agreement.py`; and judge logs written by hand, where a judge B one point harsher than A on
every rating gives the shift, CI and verdict computed by hand.

Why: calibrate's verdict carries a gate across a judge change; a log that mispairs answers, reads a rating wrong or
loses which judge rated would move a baseline silently.  The run-from-lmms-eval form (two `emo-tasks judge`
passes over one run) is tests/emobench_m/test_emobench_m_judge_stage.py (slow tier).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import API_KEY

from emo_tasks import cli
from emo_tasks.emobench_m import hooks, registry
from emo_tasks.emobench_m.run_state import STATE
from emo_tasks.results.calibration import load_calibration
from judges.testing import LoopbackServer, Reply, last_user_text

TASK = "emobench_m_sample_smile"
STAMP = "20250301T120000"
ANSWERS = ["The audience laughed because he sold a smashed phone as slightly used.", "no idea", ""]


def _responder(body: dict[str, Any], attempt: int) -> Reply:
    """Rates the first answer (4, 3); never rates the second's multimodal dimension (a failure, counted 0)."""
    text = last_user_text(body)
    logical = "**Logical Judgment Dimension:**" in text
    if ANSWERS[0] in text:
        return Reply(text="Logical Judgment Dimension: 4" if logical else "Multimodal Content Association Dimension: 3")
    return Reply(text="Logical Judgment Dimension: 2" if logical else "I cannot rate this.")


def _records(env: dict[str, str]) -> list[dict[str, Any]]:
    docs = hooks.load_task("emobench_m/sample/smile", env)  # two rows: the third answer takes row 0's doc again
    docs = [docs[0], docs[1], {**docs[0], "row_id": "extra"}]
    return [hooks.process_results(doc, [a])["accuracy"] for doc, a in zip(docs, ANSWERS, strict=True)]


def test_the_scorer_writes_a_judge_log_and_no_number_moves(tmp_path: Path) -> None:
    with LoopbackServer(responder=_responder, expected_api_key=API_KEY) as srv:
        env = {"EMO_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": API_KEY,
               "EMO_PROGRESS": "0", "EMO_JUDGE_MODEL": "judge-x"}  # fmt: skip
        STATE.memo = type(STATE.memo)()
        plain = _records(env)
        without = hooks.evaluate(plain)  # no output folder: no log, the numbers
        assert not (tmp_path / "out").exists()
        STATE.memo = type(STATE.memo)()
        logged = _records(env)
        metrics = hooks.evaluate(logged, SimpleNamespace(output_path=str(tmp_path / "out"), log_samples=True))
        setup = registry.judge_setup(env)  # what the judge stage names its folder by
        host = srv.base_url.split("//", 1)[1].split("/", 1)[0]
    assert metrics == without and logged == plain  # the log changes no number and no record
    logs = sorted((tmp_path / "out" / "emo_tasks_judge").glob("*"))
    assert [re.sub(r"_\d{8}T\d{6}_", "_<stamp>_", p.name) for p in logs] == [
        "sample_emobench_m_smile_<stamp>_judge.jsonl", "sample_emobench_m_smile_<stamp>_summary.json"]  # fmt: skip
    log = next(p for p in logs if p.name.endswith("_judge.jsonl"))
    rows = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()]
    assert [(r["row_id"], r["status"], r["ratings"], r["llm_total"], r["answer"]) for r in rows] == [
        ("0", "scored", {"logical": 4, "multimodal": 3}, 7, ANSWERS[0]),
        ("1", "judge_failed", {"logical": 2, "multimodal": None}, 2, ANSWERS[1]),
        ("extra", "empty_answer", {"logical": None, "multimodal": None}, 0, ""),
    ]
    assert [r["llm_total"] for r in rows] == [r["llm_total"] for r in logged]  # what the aggregation counted
    assert rows[1]["errors"] == ["multimodal: invalid_answer"] and rows[0]["judge_texts"]["logical"].endswith("4")
    assert all(r["task"] == TASK and r["video"] == rec["video"] for r, rec in zip(rows, logged, strict=True))
    summary = json.loads(log.with_name(log.name.replace("_judge.jsonl", "_summary.json")).read_text())
    assert summary["judge_models"] == {"judge": "judge-x"} and summary["judge_mode"] == "api"
    assert summary["judge_fingerprint"] == setup["judge_fingerprint"]  # one fingerprint: stage folder and log
    assert summary["metrics"]["llm_total"] == pytest.approx(metrics["llm_total"]) and summary["tasks"] == [TASK]
    assert summary["judge_failures"] == {"invalid_answer": 1} and summary["api_models"]["judge"]
    assert summary["judge_endpoint"] == host


# ------------------------------------------------------------------------------------- judge logs by hand
N = 32  # scored answers: at least calibrate.MIN_PAIRED, so one pair can be interchangeable


def _a_ratings(i: int) -> tuple[int, int]:
    """Judge A's (logical, multimodal) of answer i: logical 1-5 (never 0, so one point harsher is always -1),
    multimodal 0-5."""
    return 1 + i % 5, i % 6


def _harsh(r: tuple[int, int]) -> tuple[int, int]:
    """Judge B: one point harsher on every rating, never below the scale's 0."""
    return max(r[0] - 1, 0), max(r[1] - 1, 0)


def _write(folder: Path, model: str, rate: Any, answer: str = "a reason {i}") -> Path:
    """A judged folder as the scorer writes it: N scored answers, one failed, one empty; and the summary."""
    logs = folder / "emo_tasks_judge"
    logs.mkdir(parents=True)
    rows = []
    for i in range(N + 2):
        logical, multimodal = rate(_a_ratings(i))
        status = "scored" if i < N else ("judge_failed" if i == N else "empty_answer")
        ratings = {"logical": logical, "multimodal": multimodal if status == "scored" else None}
        rows.append({"task": TASK, "scenario": "smile", "row_id": f"r{i}", "video": f"smile/{i}.mp4",
                     "answer": answer.format(i=i) if i <= N else "", "status": status, "ratings": ratings})  # fmt: skip
    (logs / f"sample_emobench_m_smile_{STAMP}_judge.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {"benchmark": "EmoBench-M", "tasks": [TASK], "judge_mode": "api", "judge_endpoint": "127.0.0.1:1",
               "judge_protocol": "emobench_m llm scorer", "judge_models": {"judge": model}}  # fmt: skip
    (logs / f"sample_emobench_m_smile_{STAMP}_summary.json").write_text(json.dumps(summary))
    return folder


def _by_hand(rate_b: Any) -> dict[str, float]:
    """The mean B - A of each score over the N scored answers."""
    out = {"llm_logical": 0.0, "llm_multimodal": 0.0, "llm_total": 0.0}
    for i in range(N):
        a, b = _a_ratings(i), rate_b(_a_ratings(i))
        out["llm_logical"] += (b[0] - a[0]) / N
        out["llm_multimodal"] += (b[1] - a[1]) / N
        out["llm_total"] += (sum(b) - sum(a)) / N
    return out


def _cli(capsys: pytest.CaptureFixture, *argv: object) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_agreement_pairs_the_scored_answers_and_measures_a_harsher_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    a = _write(tmp_path / "a", "judge-a", lambda r: r)
    b = _write(tmp_path / "b", "judge-b", _harsh)
    code, out, err = _cli(capsys, "agreement", a, b, "--format", "json", "--resamples", "300")
    assert code == 0, err
    doc = json.loads(out)
    [block] = doc["tasks"]
    assert (block["task"], block["title"]) == (TASK, "SMILE [sample]")
    assert block["n_paired"] == N and block["n_not_scored"] == 2 and block["status"]["a"] == {
        "empty_answer": 1, "judge_failed": 1, "scored": N}  # fmt: skip
    assert block["steps"]["n"] == 2 * N and block["last_step"]["n"] == N  # two dimensions; the total
    hand = _by_hand(_harsh)
    # logical: A never rates 0, so B is exactly 1 lower on every answer; multimodal: lower except A's zeros
    assert hand["llm_logical"] == -1.0 and hand["llm_multimodal"] == pytest.approx(-(N - 6) / N)
    for m, value in hand.items():
        assert block["scores"][m]["delta"] == pytest.approx(value, abs=1e-12), m
    assert block["last_step"]["mean_offset"] == pytest.approx(hand["llm_total"], abs=1e-12)
    assert block["steps"]["mean_offset"] == pytest.approx((hand["llm_logical"] + hand["llm_multimodal"]) / 2)
    assert (block["scores"]["llm_logical"]["ci_low"], block["scores"]["llm_logical"]["ci_high"]) == (-1.0, -1.0)
    assert doc["runs"]["a"]["setup"]["judge_models"] == {"judge": "judge-a"}
    # another answer in B: counted, never paired
    other = _write(tmp_path / "other", "judge-b", _harsh, answer="another reason {i}")
    code, out, err = _cli(capsys, "agreement", a, other, "--format", "json")
    assert code == 2 and "32 with a different video or answer" in err, err


def test_calibrate_gives_the_hand_computed_shift_and_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a = _write(tmp_path / "a", "judge-a", lambda r: r)
    harsh = _write(tmp_path / "harsh", "judge-harsh", _harsh)
    renamed = _write(tmp_path / "renamed", "judge-renamed", lambda r: r)
    out_file = tmp_path / "harsh.json"
    code, out, err = _cli(capsys, "calibrate", a, harsh, "--out", out_file, "--resamples", "300")
    assert code == 1, err  # not interchangeable
    cal = load_calibration(out_file)
    shifts = {(s.task, s.metric): s for s in cal.shifts}
    hand = _by_hand(_harsh)
    assert set(shifts) == {(TASK, m) for m in hand}  # the sample group holds other scenarios: not pooled
    for m, value in hand.items():
        s = shifts[(TASK, m)]
        assert s.n == N and s.shift == pytest.approx(value, abs=1e-12) and not s.interchangeable, s
        assert s.ci_low is not None and s.ci_low <= s.shift <= s.ci_high <= 0, s
    assert (shifts[(TASK, "llm_logical")].ci_low, shifts[(TASK, "llm_logical")].ci_high) == (-1.0, -1.0)
    assert {m: shifts[(TASK, m)].tolerance for m in hand} == {"llm_logical": 0.05, "llm_multimodal": 0.05,
                                                              "llm_total": 0.1}  # fmt: skip
    assert cal.reference["judge_models"] == {"judge": "judge-a"} and cal.candidate["judge_models"] == {
        "judge": "judge-harsh"}  # fmt: skip
    assert "not interchangeable: shift -1.00 [-1.00, -1.00]" in out
    [row] = cal.data["agreement"]
    assert row["recognition"]["n"] == N and row["steps"]["n"] == 2 * N and row["n_not_scored"] == 2
    # the same ratings from a renamed judge: shift 0 on 32 pairs, interchangeable (exit 0)
    code, out, err = _cli(capsys, "calibrate", a, renamed, "--out", tmp_path / "same.json", "--resamples", "300")
    assert code == 0, out + err
    assert all(s.shift == 0.0 and s.ci_low == s.ci_high == 0.0 for s in load_calibration(tmp_path / "same.json").shifts)


def test_a_log_that_cannot_be_read_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a = _write(tmp_path / "a", "judge-a", lambda r: r)
    b = _write(tmp_path / "b", "judge-b", _harsh)
    log = next((b / "emo_tasks_judge").glob("*_judge.jsonl"))
    lines = log.read_text().splitlines()
    bad = json.loads(lines[3])
    bad["ratings"]["multimodal"] = 6  # off the authors' 0-5 scale
    log.write_text("\n".join([*lines[:3], json.dumps(bad), *lines[4:]]) + "\n")
    code, _, err = _cli(capsys, "calibrate", a, b, "--out", tmp_path / "c.json")
    assert code == 3, err
    assert f"{log}:4: a scored answer's 'multimodal' rating must be an integer 0-5, got 6" in err
    log.write_text("\n".join([lines[0], lines[0]]) + "\n")
    code, _, err = _cli(capsys, "agreement", a, b)
    assert code == 3 and f"{log}:2: row 'r0' of {TASK} appears twice" in err


def test_a_run_judged_before_the_logs_is_refused_saying_what_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    a = _write(tmp_path / "a", "judge-a", lambda r: r)
    old = tmp_path / "old" / "judged" / "x"
    old.mkdir(parents=True)
    row = {"llm_total,none": 6.0, "n_judge_failed,none": 0}
    (old / "2025-03-01T12-00-00.000000_results.json").write_text(json.dumps({"results": {TASK: row}}))
    code, out, err = _cli(capsys, "calibrate", old, a, "--out", tmp_path / "c.json")
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "EmoBench-M's judge rated these answers, but no judge log records" in err
    assert "rerun `emo-tasks judge RUN`" in err and not (tmp_path / "c.json").exists()
