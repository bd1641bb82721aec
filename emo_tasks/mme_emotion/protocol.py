"""MME-Emotion's protocol as data: the per-task table, the evaluated model's prompt and the prompt hashes.

Everything task-specific lives in `protocol.yml` (label noun, separator, last-step rule, the official prompt
wording), so the eight tasks share one code path; the judge agents' prompts are filled where their requests are
built (`judge.step_messages`, `judge.judge_text`, `judge.audio_prompt`).  Pure: no network, and the YAML is read
once.
"""

from __future__ import annotations

import hashlib
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
