"""MME-Emotion's protocol as data: the per-task table and the prompt builders.

Everything task-specific lives in `protocol.yml` (label noun, separator, last-step rule, the official prompt
wording); this module only fills templates, so the eight tasks share one code path.  Pure: no network, and the
YAML is read once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

PROTOCOL_FILE = Path(__file__).with_name("protocol.yml")  # not .yaml: lmms-eval indexes every .yaml as a task

#: Judge protocols. `official` pastes the step text as the official script does and scores however many
#: ratings come back; `guarded` (default) fences the text and demands one rating per step.
JUDGE_PROTOCOLS = ("guarded", "official")
DEFAULT_JUDGE_PROTOCOL = "guarded"
#: CoT-S = alpha * Rec-S + (1 - alpha) * Rea-S; the paper weighs the two equally (EMO_MME_ALPHA changes it).
DEFAULT_ALPHA = 0.5


@dataclass(frozen=True)
class TaskSpec:
    """One MME-Emotion task: where its files are and how it is prompted and scored."""

    key: str  # official folder name, e.g. "ER-Lab"
    task: str  # lmms-eval task name, e.g. "mme_emotion_er_lab"
    file_stem: str
    title: str
    target: str
    label_separator: str | None
    last_step_rule: str  # "binary" | "fraction"
    step: dict[str, Any]
    judge: dict[str, Any]

    @property
    def multi_label(self) -> bool:
        return self.label_separator is not None

    @property
    def question_relpath(self) -> str:
        return f"{self.key}/question/{self.file_stem}.json"

    @property
    def clue_relpath(self) -> str:
        return f"{self.key}/audio_clue/{self.file_stem}_qwen2_audio_clues.json"

    def gold_labels(self, label: str) -> list[str]:
        """The row's ground-truth labels: split on the task's separator, stripped, empty parts dropped."""
        if self.label_separator is None:
            return [label.strip()]
        return [part.strip() for part in label.split(self.label_separator) if part.strip()]


def protocol() -> dict[str, Any]:
    """The parsed protocol.yml (once per process)."""
    from emo_tasks.common import load_yaml

    return load_yaml(str(PROTOCOL_FILE))


@lru_cache(maxsize=1)
def task_specs() -> dict[str, TaskSpec]:
    """Task key ("ER-Lab", ...) -> TaskSpec, in the paper's order."""
    names = [f.name for f in fields(TaskSpec) if f.name != "key"]
    return {key: TaskSpec(key=key, **{n: row[n] for n in names}) for key, row in protocol()["tasks"].items()}


def spec_for(key_or_task: str) -> TaskSpec:
    """Look a task up by its official key ("FG-ER") or its lmms-eval name ("mme_emotion_fg_er")."""
    specs = task_specs()
    if key_or_task in specs:
        return specs[key_or_task]
    for spec in specs.values():
        if spec.task == key_or_task:
            return spec
    raise KeyError(f"unknown MME-Emotion task {key_or_task!r}; known: {', '.join(specs)}")


def model_prompt(spec: TaskSpec, label_set: list[str], medium: str = "video", template: str | None = None) -> str:
    """The evaluated model's closed-set prompt: every candidate label, step-by-step reasoning, then the answer.

    `template` (from lmms_eval_specific_kwargs `prompt`) replaces ours; it may use {medium_intro}, {medium},
    {target}, {labels} and {choose}.
    """
    proto = protocol()
    if medium not in proto["medium_intro"]:
        raise ValueError(f"medium must be one of {sorted(proto['medium_intro'])}, got {medium!r}")
    choose = proto["model_choose_multi"] if spec.multi_label else proto["model_choose_single"]
    return (template or proto["model_template"]).format(
        medium_intro=proto["medium_intro"][medium],
        medium=medium,
        target=spec.target,
        labels=", ".join(label_set),
        choose=choose,
    )


_TAG = re.compile(r"<\s*(/?)\s*(step|score)\s*>", re.IGNORECASE)


def neutralise_tags(text: str) -> str:
    """`<score>`/`<step>` tags inside quoted text become `[score]`/`[step]`: the parsers and a judge that
    copies the first block it sees can then never mistake the quoted text's blocks for real ones."""
    return _TAG.sub(lambda m: f"[{m.group(1)}{m.group(2).lower()}]", text)


def step_messages(spec: TaskSpec, answer: str, judge_protocol: str = DEFAULT_JUDGE_PROTOCOL) -> list[dict[str, Any]]:
    """The step agent's chat messages for one model answer (official wording).

    Guarded protocol: `<step>`/`<score>` tags in the answer are neutralised first (the rest is verbatim)."""
    if judge_protocol not in JUDGE_PROTOCOLS:
        raise ValueError(f"judge protocol must be one of {JUDGE_PROTOCOLS}, got {judge_protocol!r}")
    proto = protocol()
    s = spec.step
    if judge_protocol == "guarded":
        answer = neutralise_tags(answer)
    examples = "".join(
        proto["step_example_template"].format(number=i, answer=a, result=r)
        for i, (a, r) in enumerate(s["examples"], start=2)
    )
    slots = {k: v for k, v in s.items() if k != "examples"}  # subject, target, example_state, example_final
    text = proto["step_template"].format(**slots, answer=answer, examples=examples)
    return [{"role": "system", "content": proto["step_system"]}, {"role": "user", "content": text}]


def judge_text(
    spec: TaskSpec,
    *,
    audio_clue: str,
    ground_truth: str,
    steps_text: str,
    n_steps: int,
    judge_protocol: str = DEFAULT_JUDGE_PROTOCOL,
) -> str:
    """The judge's text part (the frames follow as image parts).

    `steps_text` is what the official script pastes: the step agent's whole answer.  Guarded: it is fenced with a
    marker derived from its own hash (so the text cannot contain the closing marker), its tags neutralised, and
    the expected number of ratings stated.
    """
    proto = protocol()
    if judge_protocol == "official":
        prediction = proto["prediction_official"].format(steps=steps_text)
    elif judge_protocol == "guarded":
        safe = neutralise_tags(steps_text)
        fence = hashlib.sha256(safe.encode("utf-8")).hexdigest()[:12]
        prediction = "\n" + proto["prediction_guarded"].format(steps=safe, fence=fence, n_steps=n_steps)
    else:
        raise ValueError(f"judge protocol must be one of {JUDGE_PROTOCOLS}, got {judge_protocol!r}")
    # spec.judge holds the per-task slots: topic, labels_phrase, rule_1..3, output_format, label_field, example_output
    return proto["judge_template"].format(
        **spec.judge, audio_clue=audio_clue, ground_truth=ground_truth, prediction=prediction
    )


def audio_prompt(spec: TaskSpec) -> str:
    """The live audio agent's prompt (ours; see protocol.yml)."""
    return protocol()["audio_template"].format(target=spec.target)


def prompt_hashes() -> dict[str, str]:
    """sha256 (first 16 hex) of every prompt template and task row: carried in results so that numbers made
    with different prompts are never compared by accident."""
    proto = protocol()

    def h(obj: Any) -> str:
        return hashlib.sha256(yaml.safe_dump(obj, sort_keys=True).encode("utf-8")).hexdigest()[:16]

    return {
        "model_prompt": h([proto["model_template"], proto["model_choose_single"], proto["model_choose_multi"],
                           proto["medium_intro"]]),
        "step_agent": h([proto["step_system"], proto["step_template"], proto["step_example_template"],
                         {k: v["step"] for k, v in proto["tasks"].items()}]),
        "judge": h([proto["judge_system"], proto["judge_template"], proto["prediction_official"],
                    proto["prediction_guarded"], {k: v["judge"] for k, v in proto["tasks"].items()}]),
    }  # fmt: skip
