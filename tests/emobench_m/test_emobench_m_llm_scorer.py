"""The authors' LLM scorer of SMILE's reasons (LaughterReason_LLMScoring.py) through our judge engine, against a
loopback judge (the real openai SDK, 127.0.0.1): their prompts sent verbatim, their averages, the answers cached, a
garbage answer asked again then counted as a failure (rated 0, as their `or 0` does); offline: N/A with a note.
The authors' functions (vendored, tests/emobench_m/official_llm_scoring.py) give the reference numbers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import API_KEY

from emo_tasks.emobench_m import hooks, judge, registry
from emo_tasks.emobench_m.run_state import STATE
from judges.testing import LoopbackServer, Reply, last_user_text

sys.path.insert(0, str(Path(__file__).parent))
import official_llm_scoring as official  # noqa: E402  (the authors' functions, vendored)

ANSWERS = ["The audience laughed because he sold a smashed phone as slightly used.", "no idea", ""]
#: the judge's ratings per generated reason: (logical answer, multimodal answer)
JUDGED = {
    ANSWERS[0]: ("Logical Judgment Dimension: 4", "Multimodal Content Association Dimension: 3\nbecause ..."),
    ANSWERS[1]: ("logical judgment dimension: 2", "I cannot rate this."),  # garbage: asked again, then a failure
}


def _responder(body: dict[str, Any], attempt: int) -> Reply:
    text = last_user_text(body)
    generated = text.split("Generated Reason: ", 1)[1].split("\n", 1)[0]
    logical, multimodal = JUDGED[generated]
    return Reply(text=logical if "**Logical Judgment Dimension:**" in text else multimodal)


def _records(env: dict[str, str], answers: list[str]) -> list[dict[str, Any]]:
    docs = hooks.load_task("emobench_m/sample/smile", env)
    return [hooks.process_results(doc, [a])["accuracy"] for doc, a in zip(docs * 2, answers, strict=False)]


def test_ratings_aggregated_as_the_authors_do_cached_and_garbage_failed(tmp_path: Path) -> None:
    with LoopbackServer(responder=_responder, expected_api_key=API_KEY) as srv:
        env = {"EMO_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": API_KEY,
               "EMO_PROGRESS": "0", "EMO_JUDGE_MODEL": "judge-x"}  # fmt: skip
        records = _records(env, ANSWERS)
        metrics = hooks.evaluate(records)
        sent = [c for c in srv.calls if c.path.endswith("/chat/completions")]
        # two prompts per non-empty answer; the garbage one asked more than once
        assert {c.model for c in sent} == {"judge-x"}
        assert len({c.key for c in sent}) == 4 and max(c.attempt for c in sent) > 1
        # the authors' prompts, verbatim, and their averages over the same judge answers (the empty answer: "")
        assert judge.prompt("logical", "R", "G") == official.create_prompt_logical("R", "G")
        assert judge.prompt("multimodal", "R", "G") == official.create_prompt_multimodal("R", "G")
        _, (avg_l, avg_m, avg_t) = official.official_averages([JUDGED[ANSWERS[0]], JUDGED[ANSWERS[1]], ("", "")])
        assert (metrics["llm_logical"], metrics["llm_multimodal"], metrics["llm_total"]) == pytest.approx(
            (avg_l, avg_m, avg_t), abs=1e-12
        )
        assert (avg_l, avg_m) == pytest.approx((2.0, 1.0))
        assert metrics["n_judge_failed"] == 1 and metrics["n_samples"] == 3
        # per answer, in the records lmms-eval logs: the ratings (a failure 0), their sum and the failed flag
        rated = [(r["llm_logical"], r["llm_multimodal"], r["llm_total"], r["llm_failed"]) for r in records]
        assert rated == [(4, 3, 7, False), (2, 0, 2, True), (0, 0, 0, False)]
        assert records[1]["llm_errors"] and records[1]["llm_errors"][0].startswith("multimodal: ")
        # the report's per-sample values (its CIs) read from those records: their means are the aggregates
        lines = [{"doc_id": i, "accuracy": {**json.loads(json.dumps(r)), "row_id": i}} for i, r in enumerate(records)]
        values = registry.sample_values(lines)
        for name in ("llm_logical", "llm_multimodal", "llm_total"):
            assert len(values[name]) == 3
            assert sum(values[name].values()) / 3 == pytest.approx(metrics[name], abs=1e-12), name
        # a rerun (a fresh memo) sends only the failed request again: the rest come from the answer cache
        n = len(sent)
        STATE.memo = type(STATE.memo)()
        again = hooks.evaluate(_records(env, ANSWERS))
        resent = [c for c in srv.calls if c.path.endswith("/chat/completions")][n:]
        assert {c.key for c in resent} <= {c.key for c in sent if c.attempt > 1}
        assert again["llm_total"] == metrics["llm_total"]
        STATE.memo = type(STATE.memo)()
        hooks.evaluate(_records(env, ANSWERS[:1]))  # a good answer alone: nothing sent
        assert len([c for c in srv.calls if c.path.endswith("/chat/completions")]) == n + len(resent)


def test_offline_the_llm_metrics_are_na_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"EMO_CACHE_DIR": str(tmp_path / "cache"), "EMO_JUDGE": "auto"}  # no endpoint: no scorer
    records = _records(env, ANSWERS[:2])
    metrics = hooks.evaluate(records)
    assert all(r["llm_failed"] is None and r["llm_total"] is None for r in records)  # not rated: no values
    lines = [{"accuracy": {**r, "row_id": i}} for i, r in enumerate(records)]
    assert not {"llm_logical", "llm_total"} & set(registry.sample_values(lines))
    assert metrics["llm_logical"] is None and metrics["n_judge_failed"] is None and metrics["n_samples"] == 2
    assert "the LLM scorer's metrics (llm_logical, llm_multimodal, llm_total) are N/A" in capsys.readouterr().err
    from emo_tasks.emobench_m.settings import EmoBenchMSettings
    from judges.config import JudgeConfigError

    with pytest.raises(JudgeConfigError, match="EMO_JUDGE=api: EmoBench-M's LLM scorer"):
        EmoBenchMSettings.from_env({**env, "EMO_JUDGE": "api"}, "sample")
