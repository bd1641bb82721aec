"""How a reasoning model's answer is read in each host (fast): VLMEvalKit's adapter strips as lmms-eval's default
`--reasoning_tags` does, MVEI's own `</think>` rule cuts nothing more after it, and `compare` tells runs that read
answers otherwise apart (docs/lmms_eval.md#reasoning-models)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import lmms_eval
import pytest
from lmms_eval.api.reasoning import strip_reasoning_tags

from emo_tasks.mvei.scoring import answer_segment, parse_official
from emo_tasks.results import comparable
from emo_tasks.vlmeval.reasoning import LMMS_EVAL_TAGS, LMMS_EVAL_TAGS_TEXT, answer_read

CASES = [
    "Correct",
    "  Correct \n",
    "<think>It is Incorrect. Answer: B</think>\nCorrect",
    "<think>a</think><think>Incorrect</think> Correct",
    "First thought: Incorrect.</think>\n\nCorrect",  # the opening tag prefilled by the chat template
    "<analysis>Incorrect; Score: 5</analysis>Correct",
    "<think>Incorrect</think> A </think> Correct",
    "<think>Incorrect. Cut off while thinking",
    "Correct. </think> later <think> unclosed",
    "<analysis>Score: 5</analysis><think>Incorrect</think>Correct",
]


def _parser_default() -> Any:
    """The `--reasoning_tags` default written in lmms-eval's own parser (read from its source: importing its CLI
    takes a minute here)."""
    source = (Path(lmms_eval.__file__).parent / "__main__.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and getattr(node.args[0], "value", None) == "--reasoning_tags":
            return next(ast.literal_eval(k.value) for k in node.keywords if k.arg == "default")
    raise AssertionError("lmms-eval's parser has no --reasoning_tags")


def test_the_adapter_strips_with_lmms_evals_default_tags_and_function() -> None:
    assert _parser_default() == LMMS_EVAL_TAGS_TEXT and json.loads(LMMS_EVAL_TAGS_TEXT) == LMMS_EVAL_TAGS
    for text in CASES:
        assert answer_read(text) == strip_reasoning_tags(text, LMMS_EVAL_TAGS), text
    assert answer_read(CASES[2]) == "Correct" and answer_read(CASES[4]) == "Correct"
    assert answer_read(None) is None and answer_read(3) == 3


@pytest.mark.parametrize("text", [c for c in CASES if "<analysis>" not in c])
def test_mveis_rule_reads_the_same_verdict_after_lmms_evals_strip(text: str) -> None:
    """Nothing is stripped twice: after lmms-eval's strip no closing tag is left for the authors' `</think>` rule
    to cut at (except past an unclosed opening tag, where lmms-eval strips nothing), so `--reasoning_tags none`
    (the rule alone) and the default (strip, then the rule) read the same segment of a `<think>` answer."""
    stripped = answer_read(text)
    assert "</think>" not in stripped or "<think>" in stripped.split("</think>")[-1]
    assert answer_segment(stripped).strip() == answer_segment(text).strip()
    assert parse_official(stripped) == parse_official(text)


def _run(cli: Any = "absent", host: Any = None, **config: Any) -> Any:
    data: dict[str, Any] = {"config": {} if cli == "absent" else {"resolved_cli_args": {"reasoning_tags": cli}}}
    if host is not None:
        data["emo_tasks_vlmeval"] = host
    return SimpleNamespace(data=data, configs={"mvei_sample": dict(config)})


DEFAULT = tuple(tuple(p) for p in LMMS_EVAL_TAGS)


def test_reasoning_tags_each_host_records() -> None:
    assert comparable.reasoning_tags(_run(LMMS_EVAL_TAGS_TEXT), "mvei_sample") == DEFAULT
    assert comparable.reasoning_tags(_run("none"), "mvei_sample") == "none"
    assert comparable.reasoning_tags(_run(), "mvei_sample") is None  # the results do not say
    assert comparable.reasoning_tags(_run("none", auto_strip_thinking=True), "mvei_sample") == (
        ("<think>", "</think>"), ("<thinking>", "</thinking>"))  # fmt: skip
    assert comparable.reasoning_tags(_run("none", reasoning_tags='[["<r>", "</r>"]]'), "mvei_sample") == (
        ("<r>", "</r>"),)  # fmt: skip
    assert comparable.reasoning_tags(_run(host={"reasoning_tags": LMMS_EVAL_TAGS}), "mvei_sample") == DEFAULT
    assert comparable.reasoning_tags(_run(host={}), "mvei_sample") == "none"  # an adapter that stripped nothing


def test_compare_refuses_only_another_reading() -> None:
    names = ("base", "new")
    lmms, vlm = _run(LMMS_EVAL_TAGS_TEXT), _run(host={"reasoning_tags": LMMS_EVAL_TAGS})
    out: list[comparable.Difference] = []
    assert comparable.reasoning_differences(lmms, vlm, ["mvei_sample"], names, out) == [] and out == []
    notes = comparable.reasoning_differences(lmms, _run(), ["mvei_sample"], names, out)
    assert out == [] and notes and "not checked for mvei_sample" in notes[0]
    comparable.reasoning_differences(vlm, _run("none"), ["mvei_sample"], names, out)
    assert [d.kind for d in out] == ["reasoning"] and out[0].tasks == ("mvei_sample",)
    assert "the new run nothing stripped (--reasoning_tags none)" in out[0].line
