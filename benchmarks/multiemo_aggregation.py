"""MultiEmo-Bench aggregation benchmark: `score_images`, `parse_score` and `split_half_baseline` at full size.

Why: the benchmark has 10,344 images x 8 per-emotion answers, and the human baseline adds 10 split-half repeats.
The obvious implementation calls one scipy function per metric per image; ours computes each metric for all
images at once with numpy.  This script measures both on the same seeded synthetic data, in one run, checks that
they give the same numbers, and prints wall times, peak traced memory (tracemalloc, measured in a separate call so
that tracing does not distort the timing) and the process's peak RSS (resource.ru_maxrss, which only grows).

    python benchmarks/multiemo_aggregation.py           # N=10,344 images, 10 split-half repeats
    python benchmarks/multiemo_aggregation.py --quick   # N=1,000, 2 repeats: smoke run, ratios not meaningful

The exit code is 0 whatever the numbers (1 only if ours and the baseline disagree): a measurement, not a test.
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from emo_tasks.multiemo.scoring import (  # noqa: E402
    DISTRIBUTION_METRICS,
    EMOTIONS,
    SMOOTHING_EPS,
    SPLIT_HALF_METRICS,
    TABLE,
    ImageResult,
    parse_score,
    score_images,
    single_label_reference,
    split_half_baseline,
)

N_FULL = 10_344
N_ANNOTATORS = 20


# ------------------------------------------------------------------------------------------------ synthetic data
def make_annotations(n: int, seed: int) -> list[list[list[str]]]:
    """Per image, 20 annotators who each select every emotion they feel (multi-select, sometimes nothing)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        felt = rng.dirichlet(np.full(8, 0.4)) * rng.uniform(0.8, 2.0)  # expected selections per annotator
        picks = rng.random((N_ANNOTATORS, 8)) < np.minimum(felt, 1.0)
        out.append([[EMOTIONS[j] for j in np.flatnonzero(row)] for row in picks])
    return out


def make_images(annotations: list[list[list[str]]], seed: int) -> list[ImageResult]:
    """Votes from the annotations; scores that track the votes with noise, in steps of 5 as models answer, with
    ~1 % parse failures (None) and ~2 % constant answers (undefined SRCC/PLCC)."""
    rng = np.random.default_rng(seed + 1)
    images = []
    for i, ann in enumerate(annotations):
        votes = np.zeros(8, dtype=int)
        for chosen in ann:
            for e in chosen:
                votes[EMOTIONS.index(e)] += 1
        raw = 100 * votes / N_ANNOTATORS + rng.normal(0, 20, 8)
        scores: list[float | None] = list(np.clip(np.round(raw / 5) * 5, 0, 100))
        u = rng.random()
        if u < 0.01:
            scores[int(rng.integers(8))] = None
        elif u < 0.03:
            scores = [float(rng.integers(0, 11) * 10)] * 8
        label = EMOTIONS[int(np.argmax(votes + rng.random(8)))]  # the original single label, usually a top vote
        images.append(ImageResult(f"img_{i:05d}", tuple(int(v) for v in votes), N_ANNOTATORS, label, tuple(scores)))
    return images


_TEMPLATES = (
    "Score: {s}. Reason: the {k} people in the scene look {w}.",
    '{{"score": {s}, "reason": "{k} figures, {w} light"}}',
    '```json\n{{"score": {s}, "reason": "a {w} scene with {k} animals"}}\n```',
    "**Score:** {s}\n**Reason:** {w} colours and {k} faces.",
    "{s}/100 - mostly {w}, {k} elements.",
    "I'd say {s}. The {w} tones dominate.",
    "Reason: {k} people in a {w} setting.\nScore: {s}",
    "On a scale of 0 to 100, I would give {s}: {k} {w} details.",
)


def make_answers(n_answers: int, seed: int) -> tuple[list[str], list[float | None]]:
    """Model answers in the formats models actually use, reasons with other numbers in them, ~2 % failures."""
    rng = np.random.default_rng(seed + 2)
    texts, truth = [], []
    for _ in range(n_answers):
        u = rng.random()
        if u < 0.01:
            texts.append("I cannot judge this image.")
            truth.append(None)
            continue
        if u < 0.02:
            texts.append(f"Score: {int(rng.integers(101, 1000))}")
            truth.append(None)
            continue
        s = float(rng.integers(0, 21) * 5) if rng.random() < 0.9 else round(float(rng.uniform(0, 100)), 1)
        s_text = f"{s:g}"
        template = _TEMPLATES[int(rng.integers(len(_TEMPLATES)))]
        texts.append(template.format(s=s_text, k=int(rng.integers(1, 9)), w=("warm", "dark", "calm")[int(u * 3)]))
        truth.append(s)
    return texts, truth


# ------------------------------------------------------------------------------------------------ baselines
def naive_score_images(images: list[ImageResult], seed: int = 0) -> dict[str, float | int | None]:
    """The obvious per-image loop: Python sets for the argmax and one scipy call per metric per image."""
    from scipy.spatial import distance
    from scipy.stats import entropy, pearsonr, spearmanr, wasserstein_distance

    pos = np.arange(8)
    per: dict[str, list[float]] = {m: [] for m in DISTRIBUTION_METRICS}
    prec: dict[str, list[float]] = {"ours": [], "original": [], "single": []}
    n_incomplete = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for im in images:
            if any(s is None for s in im.scores):
                n_incomplete += 1
                continue
            p = np.array(im.votes, dtype=float) / im.n_annotators
            q = np.array(im.scores, dtype=float) / 100
            top_s, top_v = max(im.scores), max(im.votes)
            pred = frozenset(i for i, s in enumerate(im.scores) if s == top_s)
            dom = frozenset(i for i, v in enumerate(im.votes) if v == top_v)
            refs = {
                "ours": dom,
                "original": frozenset({EMOTIONS.index(im.original_label)}),
                "single": frozenset({single_label_reference(dom, im.image_id, seed)}),
            }
            for name, ref in refs.items():
                prec[name].append(len(pred & ref) / len(pred))
            ps = (p + SMOOTHING_EPS) / (p + SMOOTHING_EPS).sum()
            qs = (q + SMOOTHING_EPS) / (q + SMOOTHING_EPS).sum()
            per["cheb"].append(distance.chebyshev(p, q))
            per["canberra"].append(distance.canberra(p, q))
            per["wasserstein"].append(wasserstein_distance(pos, pos, ps, qs))
            per["kl"].append(entropy(ps, qs))
            per["js"].append(distance.jensenshannon(ps, qs) ** 2)
            if p.any() and q.any():
                per["cosine"].append(1 - distance.cosine(p, q))
            if np.ptp(p) > 0 and np.ptp(q) > 0:
                per["srcc"].append(spearmanr(p, q).statistic)
                per["plcc"].append(pearsonr(p, q).statistic)
    out: dict[str, float | int | None] = {f"precision_{k}": 100 * float(np.mean(v)) for k, v in prec.items()}
    out.update({m: float(np.mean(v)) if v else None for m, v in per.items()})
    out["n_images_incomplete"] = n_incomplete
    return out


def naive_split_half(annotations: list[list[list[str]]], repeats: int, seed: int = 0) -> dict[str, float | None]:
    """Per image: shuffle with Python's random, count the halves' votes in loops, one scipy call per metric."""
    import random

    from scipy.spatial import distance
    from scipy.stats import pearsonr, spearmanr, wasserstein_distance

    pos = np.arange(8)
    rnd = random.Random(seed)
    means: dict[str, list[float]] = {m: [] for m in SPLIT_HALF_METRICS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(repeats):
            per: dict[str, list[float]] = {m: [] for m in SPLIT_HALF_METRICS}
            for ann in annotations:
                order = list(ann)
                rnd.shuffle(order)
                h = len(order) // 2
                halves = []
                for part in (order[:h], order[h:]):
                    counts = np.zeros(8)
                    for chosen in part:
                        for e in set(chosen):
                            counts[EMOTIONS.index(e)] += 1
                    halves.append(counts / len(part))
                a, b = halves
                sa = (a + SMOOTHING_EPS) / (a + SMOOTHING_EPS).sum()
                sb = (b + SMOOTHING_EPS) / (b + SMOOTHING_EPS).sum()
                per["cheb"].append(distance.chebyshev(a, b))
                per["canberra"].append(distance.canberra(a, b))
                per["wasserstein"].append(wasserstein_distance(pos, pos, sa, sb))
                if a.any() and b.any():
                    per["cosine"].append(1 - distance.cosine(a, b))
                if np.ptp(a) > 0 and np.ptp(b) > 0:
                    per["srcc"].append(spearmanr(a, b).statistic)
                    per["plcc"].append(pearsonr(a, b).statistic)
            for m, v in per.items():
                if v:
                    means[m].append(float(np.mean(v)))
    return {m: float(np.mean(v)) if v else None for m, v in means.items()}


def naive_first_number(texts: list[str]) -> list[float | None]:
    """The parser many evaluation scripts ship: the first number in the answer, else None."""
    import re

    pat = re.compile(r"\d+(?:\.\d+)?")
    out: list[float | None] = []
    for t in texts:
        m = pat.search(t)
        out.append(float(m.group()) if m else None)
    return out


# ------------------------------------------------------------------------------------------------ measuring
def timed(fn: Callable[[], Any], repeats: int = 1) -> tuple[Any, float]:
    """Result and best wall time of `repeats` calls."""
    best = float("inf")
    result = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return result, best


def traced_peak(fn: Callable[[], Any]) -> float:
    """Peak Python-traced memory (MB) of one call, tracemalloc started fresh."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def max_diff(a: dict[str, Any], b: dict[str, Any], keys: list[str]) -> float:
    worst = 0.0
    for k in keys:
        if (a[k] is None) != (b[k] is None):
            return float("inf")
        if a[k] is not None:
            worst = max(worst, abs(float(a[k]) - float(b[k])))
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="N=1,000 and 2 split-half repeats")
    ap.add_argument("-n", type=int, default=N_FULL, help="number of images (default 10,344)")
    ap.add_argument("--repeats", type=int, default=10, help="split-half repeats (default 10)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.repeats = 1000, 2
    n = args.n
    import scipy

    print(f"MultiEmo aggregation benchmark: python {platform.python_version()}, numpy {np.__version__}, "
          f"scipy {scipy.__version__}, N={n} images x 8 emotions, seed {args.seed}")  # fmt: skip

    t0 = time.perf_counter()
    annotations = make_annotations(n, args.seed)
    images = make_images(annotations, args.seed)
    texts, truth = make_answers(n * 8, args.seed)
    print(f"  synthetic data built in {time.perf_counter() - t0:.1f} s; peak RSS so far {rss_mb():.0f} MB")
    rows: list[tuple[str, str, str, str, str]] = []
    failed = False

    # [1] score_images
    ours, t_ours = timed(lambda: score_images(images, seed=args.seed), repeats=5)
    base, t_base = timed(lambda: naive_score_images(images, seed=args.seed))
    keys = [m.name for m in TABLE.headline]  # the three precisions and the 8 distribution metrics
    diff = max_diff(ours, base, keys + ["n_images_incomplete"])
    m_ours = traced_peak(lambda: score_images(images, seed=args.seed))
    m_base = traced_peak(lambda: naive_score_images(images, seed=args.seed))
    print(f"\n[1] score_images over {n} images ({ours['n_images_incomplete']} incomplete, "
          f"{ours['n_srcc_undefined']} with undefined SRCC/PLCC)")  # fmt: skip
    print(f"  ours (numpy, all images at once)  {t_ours * 1000:9.1f} ms  peak traced {m_ours:7.1f} MB")
    print(f"  naive (per-image scipy loop)      {t_base * 1000:9.1f} ms  peak traced {m_base:7.1f} MB")
    print(f"  speed-up {t_base / t_ours:.1f}x; max |ours - naive| over all metrics {diff:.2e}; RSS {rss_mb():.0f} MB")
    print("  " + ", ".join(f"{k} {ours[k]:.4f}" for k in keys))
    failed |= diff > 1e-9
    rows.append(("score_images", f"{t_ours * 1000:.1f} ms", f"{t_base * 1000:.0f} ms", f"{t_base / t_ours:.0f}x",
                 f"{m_ours:.1f} / {m_base:.1f} MB"))  # fmt: skip

    # [2] parse_score
    parsed, t_parse = timed(lambda: [parse_score(t) for t in texts], repeats=3)
    naive, t_naive = timed(lambda: naive_first_number(texts), repeats=3)
    m_parse = traced_peak(lambda: [parse_score(t) for t in texts])
    ok_ours = sum(p.score == t for p, t in zip(parsed, truth, strict=True))
    ok_naive = sum(p == t for p, t in zip(naive, truth, strict=True))
    print(f"\n[2] parse_score over {len(texts)} answers ({len(_TEMPLATES)} formats, reasons with numbers)")
    print(f"  ours          {t_parse * 1000:9.1f} ms  {t_parse / len(texts) * 1e6:6.1f} us/answer  "
          f"peak traced {m_parse:6.1f} MB  correct {ok_ours}/{len(texts)}")  # fmt: skip
    print(f"  first number  {t_naive * 1000:9.1f} ms  {t_naive / len(texts) * 1e6:6.1f} us/answer  "
          f"{'':22}correct {ok_naive}/{len(texts)}  (ours costs {t_parse / t_naive:.1f}x the time)")  # fmt: skip
    failed |= ok_ours != len(texts)
    rows.append(("parse_score", f"{t_parse * 1000:.0f} ms ({ok_ours}/{len(texts)} right)",
                 f"{t_naive * 1000:.0f} ms first-number regex ({ok_naive} right)", f"{t_naive / t_parse:.2f}x",
                 f"{m_parse:.1f} MB"))  # fmt: skip

    # [3] split_half_baseline
    sh, t_sh = timed(lambda: split_half_baseline(annotations, repeats=args.repeats, seed=args.seed), repeats=3)
    m_sh = traced_peak(lambda: split_half_baseline(annotations, repeats=args.repeats, seed=args.seed))
    base_repeats = 1 if n > 2000 else args.repeats
    nsh, t_nsh = timed(lambda: naive_split_half(annotations, repeats=base_repeats, seed=args.seed))
    m_nsh = traced_peak(lambda: naive_split_half(annotations, repeats=base_repeats, seed=args.seed))
    per_ours, per_naive = t_sh / args.repeats, t_nsh / base_repeats
    # Different shuffles (numpy vs Python's random), so the values agree only statistically.
    close = max_diff(sh, nsh, list(SPLIT_HALF_METRICS))
    print(f"\n[3] split_half_baseline over {n} images x {N_ANNOTATORS} annotators")
    print(f"  ours, {args.repeats} repeats        {t_sh * 1000:9.1f} ms  ({per_ours * 1000:.1f} ms/repeat)  "
          f"peak traced {m_sh:6.1f} MB")  # fmt: skip
    print(f"  naive, {base_repeats} repeat(s)        {t_nsh * 1000:9.1f} ms  ({per_naive * 1000:.1f} ms/repeat)  "
          f"peak traced {m_nsh:6.1f} MB")  # fmt: skip
    print(f"  speed-up per repeat {per_naive / per_ours:.1f}x; max |ours - naive| {close:.4f} (different random "
          f"splits; expected small, not 0)")  # fmt: skip
    print("  " + ", ".join(f"{k} {sh[k]:.4f}" for k in SPLIT_HALF_METRICS))
    rows.append(("split_half_baseline", f"{t_sh * 1000:.0f} ms ({args.repeats} repeats)",
                 f"{per_naive * 1000:.0f} ms per repeat", f"{per_naive / per_ours:.0f}x per repeat",
                 f"{m_sh:.1f} / {m_nsh:.1f} MB"))  # fmt: skip

    print(f"\nsummary (peak RSS of the whole process {rss_mb():.0f} MB)")
    print(f"  {'function':<20} {'ours':<34} {'baseline':<44} {'speed-up':>16}  peak traced (ours / baseline)")
    for name, a, b, ratio, mem in rows:
        print(f"  {name:<20} {a:<34} {b:<44} {ratio:>16}  {mem}")
    if failed:
        print("DISAGREEMENT: ours and the per-image baseline differ (or a synthetic answer was misparsed)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
