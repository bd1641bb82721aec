"""The batch part of `emo-tasks judge --dry-run --batch` (issue 35, item 3), on hand-made request lines: which
round each request goes in, how a round splits into files within the limits (one model per file), and the
sizes reported.  The real command over a real run is in test_dry_run_cost.py."""

from __future__ import annotations

import io

import pytest

from emo_tasks.judging.batch_plan import BatchLine, batch_report, plan_rounds, text_bytes
from judges.batch_files import BatchLimits, request_line

A, B = "model-a", "model-b"


def test_rounds_files_and_bytes_by_hand() -> None:
    lines = [
        BatchLine(1, A, "k1", 400, "step"),
        BatchLine(1, A, "k2", 400, "step"),
        BatchLine(1, B, "m1", 300, "multiemo_judge"),
        BatchLine(1, A, "k3", 400, "step"),
        BatchLine(2, B, None, 700, "judge"),
        BatchLine(2, B, None, 700, "judge"),  # not known yet: each counted, never merged
        BatchLine(2, A, "k1", 400, "step"),  # the same request again, later: sent once, in round 1
        BatchLine(2, B, "j1", 500, "judge"),
    ]
    limits = BatchLimits(max_requests=2, max_bytes=1024)
    rounds = plan_rounds(lines, limits)
    assert [r.number for r in rounds] == [1, 2]
    one, two = rounds
    # round 1: model-a 400+400 | 400 (2 requests a file), model-b 300 -> 3 files, 1500 bytes
    assert [(f.model, f.requests, f.bytes) for f in one.files] == [(A, 2, 800), (B, 1, 300), (A, 1, 400)]
    assert (one.requests, one.bytes, one.estimated, one.agents) == (4, 1500, 0, ["step", "multiemo_judge"])
    # round 2: model-b 700 | 700 (two would be 1400 > 1024) | 500 (700+500 > 1024) -> 3 files, 1900 bytes
    assert [(f.model, f.requests, f.bytes) for f in two.files] == [(B, 1, 700), (B, 1, 700), (B, 1, 500)]
    assert (two.requests, two.bytes, two.estimated, two.agents) == (3, 1900, 2, ["judge"])
    assert (two.largest.requests, two.largest.bytes) == (1, 700)

    out = io.StringIO()
    batch_report(lines, limits, out)
    text = out.getvalue()
    assert "Batch (--batch): 2 round(s), 6 file(s); at most 2 requests and 1024 B (0.001 MB) per file" in text
    rows = [line.split() for line in text.splitlines() if line[:1].isdigit()]
    assert rows[0][:5] == ["1", "step,", "multiemo_judge", "4", "3"]
    assert " 2 req, 800 B (0.001 MB) " in text.splitlines()[2] + " "
    assert "1900 B (0.002 MB) (est.)" in text and "700 B (0.001 MB) (est.)" in text
    assert "Batch bytes: 3400 B (0.003 MB) in 7 request lines" in text
    assert "(est.): 2 lines" in text


def test_a_line_over_the_file_limit_names_its_size() -> None:
    with pytest.raises(ValueError, match=r"line of 2000 B .* over the 1024 B .*--batch-max-mb"):
        plan_rounds([BatchLine(1, A, "k", 2000, "judge")], BatchLimits(max_bytes=1024))


def test_nothing_to_send() -> None:
    out = io.StringIO()
    batch_report([], BatchLimits(), out)
    assert out.getvalue().startswith("Batch (--batch): nothing to send, every request is cached")


def test_text_bytes_is_the_texts_share_of_a_line() -> None:
    for text in ("plain", 'quote " and \\ back', "é — ü", "line\nbreak"):
        body = {"messages": [{"role": "user", "content": ""}]}
        filled = {"messages": [{"role": "user", "content": text}]}
        assert len(request_line("k", filled)) - len(request_line("k", body)) == text_bytes(text)


def test_mme_rounds_follow_each_samples_chain() -> None:
    """MME-Emotion with live clues: step -> audio -> judge per sample; a request goes in round 1 + the requests
    before it in its chain still to send (cached ones are known from the start and are in no file)."""
    from emo_tasks.mme_emotion.dry_run import _batch_lines
    from judges import JudgeRequest, JudgeResult
    from judges.request import text_message

    def req(agent: str, i: int) -> JudgeRequest:
        return JudgeRequest([text_message("user", f"{agent} {i}")], model=f"{agent}-model")

    hit = JudgeResult(ok=True, text="cached", key="k", model="m")
    # sample 0: nothing cached; 1: step cached; 2: step and audio cached (judge prompt known); 3: all cached
    step_hits = [None, hit, hit, hit]
    audio_hits = [None, None, hit, hit]
    judge_hits = [None, None, None, hit]
    judge_keys = [None, None, "j2", "j3"]  # 0 and 1 wait on an answer: estimated
    chain = [
        ("step", [req("step", i) for i in range(4)], step_hits, [f"s{i}" for i in range(4)]),
        ("audio", [req("audio", i) for i in range(4)], audio_hits, [f"a{i}" for i in range(4)]),
        ("judge", [req("judge", i) for i in range(4)], judge_hits, judge_keys),
    ]
    missing = [300, 456, 0, 0]
    got = _batch_lines(chain, missing, "openai")
    assert [(x.agent, x.round, x.key) for x in got] == [
        ("step", 1, "s0"), ("audio", 2, "a0"), ("judge", 3, None),
        ("audio", 1, "a1"), ("judge", 2, None),
        ("judge", 1, "j2"),
    ]  # fmt: skip
    plain = {x.agent + str(x.round): x.nbytes for x in got}
    body = {"model": "judge-model", "messages": [{"role": "user", "content": "judge 0"}], "temperature": 0.0}
    assert plain["judge3"] == len(request_line("0" * 64, body)) + 300  # the unknown text's estimate added
    assert plain["judge1"] == len(request_line("j2", {**body, "messages": [{"role": "user", "content": "judge 2"}]}))
    azure = _batch_lines(chain, missing, "azure")
    assert [x.nbytes for x in azure] == [x.nbytes + len("/chat/completions") - len("/v1/chat/completions") for x in got]
