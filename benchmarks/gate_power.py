"""Does a gate planned for a drop catch it?  The sample size of `emo_tasks.gate.power` against the real compare logic.

Why: a CI gate on a subset is only as good as its power.  `emo_tasks.gate.required_rows` plans the rows from the
spread of the per-row paired differences; this script checks the plan on simulated checkpoints, for each kind of
per-sample value our headline metrics have:

- 0/1 recognition (MME-Emotion's single-label Rec-S, MVEI's acc_total: 0 or 100 per row; McNemar's exact test),
- fractional ML-ER recognition (C/K of a multi-label row x 100; the paired bootstrap),
- 0-1 step ratings (Rea-S: the mean of a row's step ratings x 100; the paired bootstrap),
- MultiEmo scores (a per-image correlation, SRCC; the paired bootstrap).

Each kind is a latent-item model: a row has its own difficulty, a second run of the same model redraws it with
probability q (the run-to-run noise of sampling and judging), a checkpoint that dropped shifts its threshold by the
drop.  Per kind:
1. plan: a baseline and a second run of the same model over the full benchmark's rows give the paired spread;
   `required_rows` gives n for the stated drop D, power P and level alpha;
2. detection: SIMS checkpoints with the drop planted, n rows each, through `compare.compare_metric` (the test
   `emo-tasks compare` runs) and `compare.is_regression` (its verdict): the share flagged must be P +- 5 points;
3. false alarms: SIMS checkpoints with no drop: the share flagged must be <= alpha + 1 point.
It prints the rows, the share of the full run, the planned power, the detection and false-alarm rates (with their
Monte Carlo standard errors), and exits 1 when a goal misses.

    python benchmarks/gate_power.py            # 1,000 checkpoints per kind and case, a few minutes on 2 cores
    python benchmarks/gate_power.py --quick    # 200 per kind and case: a smoke run, its rates are not judged
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emo_tasks.gate import compare
from emo_tasks.gate.power import expected_power, paired_spread, required_rows  # noqa: E402
from emo_tasks.results import reader

POWER, ALPHA = 0.8, 0.05
POWER_TOLERANCE, ALARM_TOLERANCE = 0.05, 0.01

#: (n rows, drop in the metric's units, rng) -> (base values, new values), each row's pair
Generator = Callable[[int, float, np.random.Generator], tuple[np.ndarray, np.ndarray]]


def _latent(rng: np.random.Generator, shape: tuple[int, ...], redraw: float) -> tuple[np.ndarray, np.ndarray]:
    """Item difficulties for the base run and the other run: the same, except a share `redraw` drawn afresh."""
    u = rng.random(shape)
    fresh = rng.random(shape) < redraw
    return u, np.where(fresh, rng.random(shape), u)


def binary(p: float = 0.6, redraw: float = 0.3) -> Generator:
    def gen(n: int, drop: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        u, v = _latent(rng, (n,), redraw)
        return 100.0 * (u < p), 100.0 * (v < p - drop / 100)

    return gen


def shares(p: float, redraw: float, most: int) -> Generator:
    """A row of 1..`most` parts, each 0 or 1, worth the share of them that is 1, x 100: ML-ER's recognised labels
    (`most` 3, as the task's label sets) or Rea-S's step ratings (`most` 4)."""

    def gen(n: int, drop: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        k = rng.integers(1, most + 1, n)
        u, v = _latent(rng, (n, most), redraw)
        used = np.arange(most)[None, :] < k[:, None]
        return (100.0 * ((u < p) & used).sum(1) / k, 100.0 * ((v < p - drop / 100) & used).sum(1) / k)

    return gen


def correlation(mean: float = 0.45, sd: float = 0.3, rho: float = 0.8) -> Generator:
    """A per-image SRCC: normal around `mean`, the other run correlated `rho` with it."""

    def gen(n: int, drop: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        z, w = rng.standard_normal(n), rng.standard_normal(n)
        return mean + sd * z, mean - drop + sd * (rho * z + math.sqrt(1 - rho * rho) * w)

    return gen


@dataclass(frozen=True)
class Kind:
    name: str
    task: str  # a real (leaf) task, so compare picks the metric's own test and orientation
    metric: str
    drop: float
    full: int  # the full benchmark's rows this metric is tested over (the gate's group or task)
    gen: Generator


KINDS = (
    Kind("0/1 recognition (Rec-S)", "mme_emotion_er_lab", "rec_s", 2.0, 6500, binary()),
    Kind("fractional ML-ER (Rec-S)", "mme_emotion_ml_er", "rec_s", 2.0, 6500, shares(0.55, 0.3, most=3)),
    Kind("0-1 step ratings (Rea-S)", "mme_emotion_er_lab", "rea_s", 2.0, 6500, shares(0.7, 0.3, most=4)),
    Kind("MultiEmo scores (SRCC)", "multiemo", "srcc", 0.02, 10344, correlation()),
)


def _run(task: str, metric: str, values: np.ndarray) -> reader.Run:
    samples = {i: float(v) for i, v in enumerate(values)}
    data = {"results": {task: {f"{metric},none": float(values.mean())}}}
    return reader.Run(Path("."), Path("simulated_results.json"), data, samples={task: {metric: samples}})


def flagged_share(kind: Kind, n: int, drop: float, sims: int, rng: np.random.Generator) -> float:
    hits = 0
    for i in range(sims):
        base, new = kind.gen(n, drop, rng)
        r = compare.compare_metric(_run(kind.task, kind.metric, base), _run(kind.task, kind.metric, new), kind.task,
                                  kind.metric, resamples=1000, seed=i)  # fmt: skip
        assert not isinstance(r, str), r
        hits += compare.is_regression(r, ALPHA)
    return hits / sims


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 checkpoints per kind and case (noisy rates)")
    parser.add_argument("--sims", type=int, default=None, help="checkpoints per kind and case (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sims = args.sims or (200 if args.quick else 1000)
    rng = np.random.default_rng(args.seed)
    print(f"gate_power: power {POWER}, alpha {ALPHA}, {sims} simulated checkpoints per kind and case", flush=True)
    rows, misses = [], []
    for kind in KINDS:
        t0 = time.perf_counter()
        base, second = kind.gen(kind.full, 0.0, rng)  # the accepted run and a second run of the same model
        keyed = dict(enumerate(base.tolist()))
        spread = paired_spread(keyed, dict(enumerate(second.tolist())))
        sd_d = spread.under_drop(kind.drop)
        n = min(kind.full, required_rows(sd_d, kind.drop, POWER, ALPHA))
        conservative = required_rows(paired_spread(keyed).under_drop(kind.drop), kind.drop, POWER, ALPHA)
        detected = flagged_share(kind, n, kind.drop, sims, rng)
        alarms = flagged_share(kind, n, 0.0, sims, rng)
        se_d = math.sqrt(POWER * (1 - POWER) / sims)
        ok_d = abs(detected - POWER) <= POWER_TOLERANCE
        ok_a = alarms <= ALPHA + ALARM_TOLERANCE
        if not ok_d:
            misses.append(f"{kind.name}: detection {detected:.3f}, not within {POWER_TOLERANCE} of {POWER}")
        if not ok_a:
            misses.append(f"{kind.name}: false alarms {alarms:.3f} > {ALPHA + ALARM_TOLERANCE:.2f}")
        rows.append([kind.name, f"{kind.drop:g}", f"{spread.sd:.2f} / {sd_d:.2f}", str(n), f"{n / kind.full:.1%}",
                     f"{min(kind.full, conservative)}", f"{expected_power(n, sd_d, kind.drop, ALPHA):.3f}",
                     f"{detected:.3f} +- {se_d:.3f} {'PASS' if ok_d else 'MISS'}",
                     f"{alarms:.3f} {'PASS' if ok_a else 'MISS'}", f"{time.perf_counter() - t0:.0f} s"])  # fmt: skip
        print(" | ".join(rows[-1]), flush=True)
    header = ["kind", "drop D", "sd_0 / sd_d (2nd run)", "rows n", "share of full", "n, no 2nd run", "planned power",
              f"detected (goal {POWER} +- {POWER_TOLERANCE})", f"false alarms (goal <= {ALPHA + ALARM_TOLERANCE:.2f})",
              "time"]  # fmt: skip
    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    for miss in misses:
        print(f"MISS: {miss}")
    if args.quick:  # 200 checkpoints: a rate's standard error is ~3 points, too noisy to judge +-5
        print("--quick: a smoke run; the rates are not judged (run without --quick for the goals)")
        return 0
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
