"""MultiEmo-Bench's human split-half baseline: how well two random halves of the annotators agree.

Why: it is the ceiling a model's distribution metrics should be read against.  It needs each annotator's own
selections (the data file's optional `annotators` field), not only the vote counts.  KL and JS are absent by
design, as in the paper (no asymmetric reference between two halves).

    python -m emo_tasks.multiemo.baseline --data multiemo.jsonl [--repeats 10] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError
from emo_tasks.settings import SettingsError, environ
from judges.config import JudgeConfigError

from . import scoring
from .data import data_file, load_images
from .settings import MultiEmoSettings


def human_baseline(data_path: str | Path, repeats: int = 10, seed: int = 0) -> dict[str, Any]:
    """Split-half metrics averaged over `repeats` seeded random splits of every image's annotators."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    path = Path(data_path)
    images = load_images(path)
    lacking = [img for img in images if not img.get("annotators")]
    if lacking:
        first = lacking[0]
        raise DataError(
            f"{path} line {first['line']}: image {first['image_id']!r} has no 'annotators' field "
            f"({len(lacking)} of {len(images)} images lack it); the human split-half baseline needs each "
            "annotator's selections, not only the vote counts (format: see emo_tasks/multiemo/data.py)"
        )
    result = dict(scoring.split_half_baseline([img["annotators"] for img in images], repeats=repeats, seed=seed))
    for name in ("kl", "js"):  # not reported for humans (asymmetric reference)
        result.pop(name, None)
    result.setdefault("n_images", len(images))
    result["seed"] = seed
    return result


def json_safe(value: Any) -> Any:
    """NaN/inf become null: strict JSON readers reject them, and an undefined mean is not a number."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: the baseline as JSON on stdout; a missing file or annotator-less data exits 2 with the reason."""
    ap = argparse.ArgumentParser(
        prog="python -m emo_tasks.multiemo.baseline",
        description="MultiEmo-Bench human split-half baseline (KL/JS not reported by design).",
    )
    ap.add_argument("--data", required=True, type=Path, help="MultiEmo-Bench data file with per-annotator selections")
    ap.add_argument("--repeats", type=int, default=10, help="random splits per image (paper: 10)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    try:
        settings = MultiEmoSettings.from_env(environ(), "benchmark", data_file=args.data)
        result = human_baseline(data_file(settings), repeats=args.repeats, seed=args.seed)
    except (SettingsError, JudgeConfigError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(json_safe(result), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
