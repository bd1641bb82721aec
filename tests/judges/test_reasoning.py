"""Reasoning judges (issue 34, items 5 and 6), fast: the splitter of a reasoning answer (`judges.reasoning`), the
parsers that read only its answer part, and the engine against a real loopback server: an answer cut off inside
its reasoning is a `truncated` failure (asked once, never cached), and a model the endpoint does not know stops the
batch after its first request."""

from __future__ import annotations

import pytest

from emo_tasks.mme_emotion.parsers import ParseStatus, parse_scores, parse_steps, per_task_rule_differs
from emo_tasks.multiemo.judge import conclusion_of, final_score_validator, parse_final_score
from judges import JudgeModelNotFound, JudgeRequest, user_message
from judges.reasoning import answer_part, cut_off, split_reasoning
from judges.testing import LoopbackServer, Reply

ANSWER = "<score>Step 1: 1/1, Step 2: 0/1</score>"
DECOY = "<score>Step 1: 0/1</score> <step>Step 1: decoy.</step> Final score: 99"


@pytest.mark.parametrize("tag", ["think", "thinking", "analysis", "THINK", "Thinking"])
def test_each_tag_is_stripped_and_the_answer_follows_it(tag: str) -> None:
    split = split_reasoning(f"<{tag}>weighing {DECOY}</{tag}>\n\n{ANSWER}")
    assert split.answer == ANSWER and not split.truncated
    assert split.reasoning == f"weighing {DECOY}"


def test_a_closing_tag_alone_is_the_end_of_a_prefilled_reasoning() -> None:
    """A chat template that prefills `<think>` leaves only the closing tag in the answer."""
    assert answer_part(f"the cues say anger {DECOY}</think>\n{ANSWER}") == ANSWER
    assert answer_part(f"{DECOY}</THINKING>{ANSWER}") == ANSWER


def test_an_unclosed_tag_is_an_answer_cut_off_inside_its_reasoning() -> None:
    split = split_reasoning(f"<think>still weighing {DECOY}")
    assert split.truncated and split.answer is None and split.reasoned
    assert cut_off(f"<think>still weighing {DECOY}")
    assert split_reasoning(f"  \n<ANALYSIS> {DECOY}").truncated  # whitespace before it is still the start
    # a second reasoning block opened after the first and never closed: cut off too
    assert split_reasoning(f"<think>a</think>{ANSWER}<think>more").answer is None
    # an answer that ends right after its reasoning at the token limit: nothing to read
    assert cut_off("<think>long</think>\n", "length") and not cut_off("<think>long</think>\n", "stop")
    assert not cut_off(f"<think>a</think>{ANSWER}", "length")


def test_an_unclosed_tag_inside_a_plain_answer_leaves_the_answer_as_the_official_parser_reads_it() -> None:
    """A judge without reasoning that writes `<analysis>` after its answer began (and never closes it) keeps its
    answer: it is read unchanged, not counted as cut off."""
    text = f"{ANSWER}\nMy <analysis> of the steps is above."
    split = split_reasoning(text)
    assert split.answer is text and not split.truncated and not split.reasoned
    assert not cut_off(text, "stop") and answer_part(text) is text


def test_nested_and_multiple_blocks_keep_what_follows_the_last_closing_tag() -> None:
    assert answer_part(f"<think>a <think>b {DECOY}</think> c</think>{ANSWER}") == ANSWER
    assert answer_part(f"<think>a</think>{DECOY}<analysis>b</analysis> {ANSWER}") == ANSWER


@pytest.mark.parametrize(
    "text",
    [ANSWER, f"{DECOY}\n{ANSWER}", "  leading space and <b>html</b> and <thinker>", "", "Final score: 12\n"],
)
def test_text_without_a_reasoning_tag_is_returned_unchanged(text: str) -> None:
    split = split_reasoning(text)
    assert split.answer is text and split.reasoning is None and not split.truncated and not split.reasoned
    assert not cut_off(text, "length")  # the token limit alone does not make a plain answer a truncated one
    assert answer_part(None) is None


def test_the_mme_parsers_read_only_the_answer_part() -> None:
    raw = f"<think>{DECOY}</think>\n{ANSWER}"
    assert parse_scores(raw) == parse_scores(ANSWER) and parse_scores(raw).values == [1.0, 0.0]
    assert parse_scores(raw, lenient=True) == parse_scores(ANSWER, lenient=True)
    steps = "<step>Step 1: brows low. Step 2: the predicted emotion is anger.</step>"
    assert parse_steps(f"<think>{DECOY}</think>{steps}") == parse_steps(steps) and len(parse_steps(steps)) == 2
    # a block that stands only inside the reasoning is not an answer
    assert parse_scores(f"<think>{ANSWER}</think>no block here").status is ParseStatus.NO_BLOCK
    assert parse_steps(f"<think>{steps}").status is ParseStatus.NO_BLOCK  # cut off: no answer part
    rule = "<score>Step 1: 1/2</score>"
    assert per_task_rule_differs(rule, "binary")
    assert not per_task_rule_differs(f"<think>{rule}</think>{ANSWER}", "binary")


def test_multiemo_reads_the_final_score_after_the_reasoning() -> None:
    plain = "Conclusion: the face is tense.\nFinal score: 40"
    raw = f"<think>Conclusion: no. Final score: 99</think>{plain}"
    assert parse_final_score(raw) == parse_final_score(plain) == 40.0
    assert conclusion_of(raw) == conclusion_of(plain) == "the face is tense."
    assert final_score_validator(raw) is None
    assert final_score_validator("<think>Final score: 99") == "no 'Final score: <0-100>' line"  # cut off


def _request(text: str, **kw) -> JudgeRequest:
    return JudgeRequest([user_message(text)], role="judge", model="judge-model", **kw)


def test_a_truncated_reasoning_answer_is_counted_apart_asked_once_and_never_cached(make_engine) -> None:
    def reply(body: dict, attempt: int) -> Reply:
        text = body["messages"][-1]["content"][0]["text"]
        if text == "unclosed":
            return Reply(text=f"<think>{DECOY} and on", finish_reason="length")
        if text == "separate field":  # vLLM / SGLang with a reasoning parser: reasoning apart, no content
            return Reply(text="", reasoning=f"{DECOY} and on", finish_reason="length")
        if text == "empty":
            return Reply(kind="empty")
        return Reply(text=f"<think>{DECOY}</think>{ANSWER}")

    with LoopbackServer(responder=reply) as srv:
        engine = make_engine(srv)
        validate = parse_scores_validator()
        batch = engine.run([_request(t, validate=validate) for t in ("unclosed", "separate field", "fine", "empty")])
        assert [r.error for r in batch] == ["truncated", "truncated", None, "empty_answer"]
        assert batch[0].text.startswith("<think>")  # the raw answer is kept for the log
        assert batch.stats.failures_by_reason == {"truncated": 2, "empty_answer": 1}
        calls = {}
        for c in srv.calls:
            calls[c.key] = calls.get(c.key, 0) + 1
        counts = sorted(calls.values())
        assert counts[:3] == [1, 1, 1] and counts[3] > 1  # a truncation is not asked again; an empty answer is
        srv.reset_log()
        again = engine.run([_request(t, validate=validate) for t in ("unclosed", "fine")])
        assert [r.cached for r in again] == [False, True] and len(srv.calls) == 1  # only the usable one was cached
        assert again[1].text == f"<think>{DECOY}</think>{ANSWER}"  # the cache holds the raw answer


def parse_scores_validator():
    from emo_tasks.mme_emotion.parsers import score_validator

    return score_validator()


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [
        (404, "model_not_found", "The model `gpt-4-0613` does not exist or you do not have access to it."),
        (400, None, "The model `gpt-4-0613` does not exist."),  # vLLM / SGLang style
        (404, "DeploymentNotFound", "The API deployment for this resource does not exist."),  # Azure
    ],
)
def test_a_model_the_endpoint_does_not_know_stops_the_batch_after_one_request(
    make_engine, status: int, code: str | None, message: str
) -> None:
    def reply(body: dict, attempt: int) -> Reply:
        if body["model"] == "gpt-4-0613":
            return Reply(kind="status", status=status, code=code, text=message)
        return Reply(text="fine")

    with LoopbackServer(responder=reply, latency_s=0.05) as srv:
        engine = make_engine(srv, EMO_JUDGE_CONCURRENCY="8")
        requests = [JudgeRequest([user_message(f"q{i}")], role="step", model="gpt-4-0613") for i in range(40)]
        with pytest.raises(JudgeModelNotFound) as err:
            engine.run(requests)
        assert len(srv.calls) == 1, "one request, not a slot-full, and no retry"
        text = str(err.value)
        assert "step model 'gpt-4-0613'" in text and "docs/judges.md#changing-the-judge" in text
        assert "\n" not in text and str(status) in text
        with pytest.raises(JudgeModelNotFound):  # known gone: the next batch sends nothing
            engine.run([JudgeRequest([user_message("later")], role="step", model="gpt-4-0613")])
        assert len(srv.calls) == 1
        # another model at the same endpoint is not affected
        assert engine.run([JudgeRequest([user_message("x")], role="judge", model="other")])[0].text == "fine"


def test_other_404s_and_400s_stay_failures_of_their_request(make_engine) -> None:
    def reply(body: dict, attempt: int) -> Reply:
        text = body["messages"][-1]["content"][0]["text"]
        return Reply(kind="status", status=404 if text == "a" else 400, text="no route" if text == "a" else "bad")

    with LoopbackServer(responder=reply) as srv:
        batch = make_engine(srv).run([_request("a"), _request("b")])
    assert [r.error for r in batch] == ["http_404", "http_400"]
