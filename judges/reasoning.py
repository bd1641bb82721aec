"""A reasoning model's answer, split into its reasoning and its answer part.

Why: reasoning models (the likely open-weight judges) write `<think>…</think>` (or `<thinking>`, `<analysis>`)
before the answer, and a parser that reads the first `<score>` or `<step>` block of the whole text would take one
written while thinking for the answer.  Every parser of a judge's answer reads `answer_part(text)` instead; the
engine counts an answer cut off inside its reasoning (`cut_off`) as `truncated`, apart from other failures.

The rules (tags matched case-insensitively):
- no reasoning tag at all: the text is the answer, unchanged (so the official parsers' behaviour on such answers
  is bit-for-bit the same);
- a closing tag (with or without its opening tag: a chat template may prefill the opening one): the answer is
  what follows the **last** closing tag, leading whitespace removed; the reasoning is what precedes it;
- an opening tag that starts the text (after whitespace) and that no closing tag follows: the answer was cut off
  inside its reasoning, there is no answer part (`truncated`);
- an opening tag with no closing tag anywhere, after other text: a plain answer that happens to write the tag (a
  judge without reasoning quoting `<analysis>`, say), read unchanged as the official parsers read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The reasoning tags of the reasoning models we know (DeepSeek-R1 / Qwen3 / QwQ: think; Claude-style prompts:
#: thinking; gpt-oss style: analysis).
REASONING_TAGS = ("think", "thinking", "analysis")
_TAG = re.compile(r"<(/?)(" + "|".join(REASONING_TAGS) + r")\s*>", re.IGNORECASE)


@dataclass(frozen=True)
class Split:
    """An answer split: `answer` None when it was cut off inside its reasoning (`truncated`); `reasoning` None
    when the text has no reasoning tag (then `answer` is the text, unchanged)."""

    answer: str | None
    reasoning: str | None = None
    truncated: bool = False

    @property
    def reasoned(self) -> bool:
        """The text held reasoning (a reasoning tag)."""
        return self.reasoning is not None or self.truncated


def split_reasoning(text: str | None) -> Split:
    """`text` split into reasoning and answer part (rules in the module docstring); None stays None."""
    if text is None:
        return Split(None)
    tags = list(_TAG.finditer(text))
    if not tags:
        return Split(text)
    closings = [m for m in tags if m.group(1)]
    if not closings:
        if text[: tags[0].start()].strip():  # a tag inside a plain answer, not reasoning the answer starts with
            return Split(text)
        return Split(None, _strip_tags(text[tags[0].end() :]), truncated=True)  # cut off while reasoning
    last = closings[-1]
    reasoning = _strip_tags(text[: last.start()])
    if any(not m.group(1) and m.start() > last.start() for m in tags):  # reasoning opened again, never closed
        return Split(None, reasoning, truncated=True)
    return Split(text[last.end() :].lstrip(), reasoning)


def answer_part(text: str | None) -> str | None:
    """What a parser reads of a judge's answer: the text after its reasoning (`split_reasoning`); the text itself
    when it has no reasoning tag; None when it was cut off inside its reasoning (or is None)."""
    return split_reasoning(text).answer


def cut_off(text: str | None, finish_reason: str | None = None) -> bool:
    """Whether an answer was cut off inside its reasoning: an opening tag never closed, or reasoning closed with
    nothing after it when the server says it stopped at the token limit (`finish_reason` "length")."""
    split = split_reasoning(text)
    if split.truncated:
        return True
    return finish_reason == "length" and split.reasoning is not None and not (split.answer or "").strip()


def _strip_tags(text: str) -> str:
    return _TAG.sub("", text).strip()
