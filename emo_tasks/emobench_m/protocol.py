"""EmoBench-M's scenarios as data (`protocol.yml`): each one's annotation file, video folder, kind and labels.

Why a file of data: the scenario list is the authors' (their README's dataset layout and their eval script's label
lists); the YAMLs, the loader, the sample and the registry all read it from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from emo_tasks.common import load_yaml

PROTOCOL_FILE = Path(__file__).with_name("protocol.yml")


@dataclass(frozen=True)
class Scenario:
    """One scenario: `key` ("meld"), its task names, `file` (under benchmark_json/), `folder` (under dataset/),
    `kind` (classification | joint | generation), `labels` (emotion labels for joint) and `intents` (joint)."""

    key: str
    title: str
    file: str
    folder: str
    kind: str
    labels: tuple[str, ...] = ()
    intents: tuple[str, ...] = ()

    @property
    def task(self) -> str:
        return f"emobench_m_{self.key}"

    @property
    def sample_task(self) -> str:
        return f"emobench_m_sample_{self.key}"


@cache
def protocol() -> dict[str, Any]:
    return load_yaml(str(PROTOCOL_FILE))


@cache
def scenarios() -> dict[str, Scenario]:
    """key -> Scenario, in the protocol's order."""
    return {
        key: Scenario(
            key,
            s["title"],
            s["file"],
            s["folder"],
            s["kind"],
            tuple(s.get("labels") or ()),
            tuple(s.get("intents") or ()),
        )  # fmt: skip
        for key, s in protocol()["scenarios"].items()
    }


def scenario(key: str) -> Scenario:
    if key not in scenarios():
        raise KeyError(f"unknown EmoBench-M scenario {key!r}; known: {', '.join(scenarios())}")
    return scenarios()[key]
