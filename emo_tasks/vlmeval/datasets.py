"""The VLMEvalKit dataset names of one video benchmark: its leaves (one per lmms-eval task) and its groups.

Why here: MME-Emotion's and EmoBench-M's adapters name, look up and expand their datasets the same way; a next video
benchmark gives its leaves and groups and gets the same lookups and the same error for an unknown name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from emo_tasks.common import DataError


@dataclass(frozen=True)
class DatasetNames:
    """`leaves()`: dataset name -> (our lmms-eval task, its dataset_name `<benchmark>/<source>/<key>`);
    `groups`: dataset name -> (the lmms-eval group, its source): every leaf of that source in one dataset, so one
    evaluation gives the group's pooled numbers as the lmms-eval group does."""

    title: str  # the benchmark's name, in the error for an unknown dataset
    leaves: Callable[[], Mapping[str, tuple[str, str]]]
    groups: Mapping[str, tuple[str, str]]

    def dataset_names(self) -> list[str]:
        """Every dataset name VLMEvalKit gets: the leaves, then the groups."""
        return [*self.leaves(), *self.groups]

    def task(self, dataset: str) -> tuple[str, str]:
        """A leaf's (task, dataset_name); DataError naming the known datasets for any other name."""
        if dataset not in self.leaves():
            known = ", ".join(self.dataset_names())
            raise DataError(f"{dataset}: not an {self.title} dataset of emo_tasks (known: {known})")
        return self.leaves()[dataset]

    def members(self, dataset: str) -> list[str]:
        """The leaves a dataset is made of: a group's leaves of its source (in the leaves' order), or itself."""
        if dataset in self.groups:
            source = self.groups[dataset][1]
            return [n for n, (_, name) in self.leaves().items() if name.split("/")[1] == source]
        self.task(dataset)
        return [dataset]
