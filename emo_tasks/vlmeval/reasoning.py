"""A reasoning model's answer, read in VLMEvalKit (and EvalScope) as lmms-eval 0.7.3 reads it by default.

Why: lmms-eval strips reasoning blocks (`--reasoning_tags`, default `LMMS_EVAL_TAGS`) before a task's
`process_results` sees an answer; VLMEvalKit strips nothing (unless `SPLIT_THINK` is set, which moves the reasoning
to a `thinking` column of its own).  So the adapter hands our hooks what lmms-eval's default hands them: the same
function (lmms-eval's own `strip_reasoning_tags`) with the same tags, once, before any of our parsers, the judge
stage or Avg Token read the answer.  The run folder's sample log keeps the raw answer in `resps` and the stripped
one in `filtered_resps`, as lmms-eval's does, and the results record the tags (`reasoning_tags`), so `emo-tasks
compare` refuses to set it beside a run that read answers otherwise (`--reasoning_tags none`).
"""

from __future__ import annotations

import json
from typing import Any

#: lmms-eval 0.7.3's `--reasoning_tags` default (its `__main__.parse_eval_args`; a fast test pins the two equal).
LMMS_EVAL_TAGS: list[list[str]] = [["<think>", "</think>"], ["<analysis>", "</analysis>"]]
#: The same, as lmms-eval records it in the results (`config.resolved_cli_args.reasoning_tags`: the JSON text).
LMMS_EVAL_TAGS_TEXT = json.dumps(LMMS_EVAL_TAGS)


def answer_read(answer: Any) -> Any:
    """What our hooks read of one answer: `answer` with lmms-eval's default reasoning blocks removed (and the text
    stripped of surrounding whitespace, as lmms-eval's function does to every answer); a non-text value unchanged."""
    if not isinstance(answer, str):
        return answer
    from lmms_eval.api.reasoning import strip_reasoning_tags

    return strip_reasoning_tags(answer, LMMS_EVAL_TAGS)
