"""Gating a checkpoint in CI: `emo-tasks compare` (`compare`: comparability and the paired tests), the rows a
gate needs (`power`), `emo-tasks plan-gate` (`plan_gate`: a subset drawn from an accepted run), the samples
that changed (`flips`) and the gate across a judge change (`calibrated`, `--calibration`).  `command` holds the two
commands' bodies.

`emo_tasks.gate.required_rows` and its neighbours are the documented imports of the power analysis."""

from emo_tasks.gate.power import PairedSpread, detectable_drop, expected_power, paired_spread, required_rows

__all__ = ["PairedSpread", "detectable_drop", "expected_power", "paired_spread", "required_rows"]
