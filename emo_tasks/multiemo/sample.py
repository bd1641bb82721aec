"""The bundled MultiEmo-Bench sample: 6 generated images with 20 synthetic annotators each, chosen to hit the
edge cases: a clear winner, two- and three-way ties for the dominant emotion, a constant vote vector (SRCC/PLCC
undefined), all annotators answering "none", and a dominant emotion that differs from the original label.

Written once under the emo_tasks cache in our documented format.  A smoke test; its numbers mean nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from emo_tasks.common import atomic_save_png
from emo_tasks.datafiles import bundled_sample

from .scoring import EMOTIONS

SAMPLE_VERSION = "v1"
N_ANNOTATORS = 20

# id -> (votes per emotion in EMOTIONS order, original label, source)
_IMAGES = {
    "clear_awe": ((2, 0, 14, 6, 0, 3, 0, 0), "awe", "EmoSet"),
    "tie_two": ((9, 0, 1, 2, 0, 9, 0, 0), "amusement", "EmoSet"),
    "tie_three": ((0, 7, 0, 0, 7, 0, 7, 1), "disgust", "FI"),
    "constant_votes": ((5, 5, 5, 5, 5, 5, 5, 5), "contentment", "FI"),
    "all_none": ((0, 0, 0, 0, 0, 0, 0, 0), "fear", "EmoSet"),
    "sad_not_fear": ((0, 1, 0, 0, 0, 0, 6, 13), "fear", "FI"),
}


def annotators_for(votes: tuple[int, ...], n: int = N_ANNOTATORS) -> list[list[str]]:
    """n annotators' selections whose counts equal `votes` (annotators with no emotion select "none")."""
    selections: list[list[str]] = [[] for _ in range(n)]
    start = 0
    for emotion, count in zip(EMOTIONS, votes, strict=True):
        for k in range(count):
            selections[(start + k) % n].append(emotion)
        start = (start + count) % n
    return [sel or ["none"] for sel in selections]


def _write_image(path: Path, seed: int) -> None:
    import numpy as np

    atomic_save_png(path, np.random.default_rng(seed).integers(0, 256, size=(72, 96, 3), dtype=np.uint8))


def _write(root: Path) -> str:
    """The images under root, and the data file's text."""
    lines = []
    for i, (image_id, (votes, original, source)) in enumerate(_IMAGES.items()):
        image = f"images/{image_id}.png"
        _write_image(root / image, seed=i)
        annotators = annotators_for(votes)
        counts = {e: sum(e in a for a in annotators) for e in EMOTIONS}
        counts["none"] = sum(a == ["none"] for a in annotators)
        lines.append(
            json.dumps(
                {
                    "id": image_id,
                    "image": image,
                    "votes": counts,
                    "n_annotators": N_ANNOTATORS,
                    "original_label": original,
                    "source": source,
                    "annotators": annotators,
                }
            )
        )
    return "\n".join(lines) + "\n"


def sample_file(cache_dir: Path) -> Path:
    """`<cache dir>/samples/multiemo-v1/multiemo.jsonl` plus its images, generated on first use."""
    return bundled_sample(f"multiemo-{SAMPLE_VERSION}", "multiemo.jsonl", cache_dir, _write)
