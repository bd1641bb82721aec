"""The bundled MVEI sample: 16 pairs over all four dimensions and both labels, with images generated here.

Written once under the emo_tasks cache in the authors' standard format (so the sample exercises the real
loader).  A smoke test: its statements are ours and its numbers mean nothing about a model.
"""

from __future__ import annotations

import json
from pathlib import Path

from emo_tasks.common import atomic_save_png
from emo_tasks.datafiles import bundled_sample

SAMPLE_VERSION = "v1"

SAMPLE_PAIRS = Path(__file__).with_name("sample_pairs.json")


def sample_pairs() -> list[tuple[str, str, str]]:
    """(dimension, statement, label): two pairs for each (dimension, label)."""
    with open(SAMPLE_PAIRS, encoding="utf-8") as fh:
        return [(p["dimension"], p["statement"], p["label"]) for p in json.load(fh)]


def _write_image(path: Path, seed: int) -> None:
    import numpy as np

    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, size=3)
    yy, xx = np.mgrid[0:96, 0:128]
    atomic_save_png(path, np.stack([(xx * 2 + base[0]) % 256, (yy * 2 + base[1]) % 256, np.full_like(xx, base[2])], -1))


def _write(root: Path) -> str:
    """The images under root, and the data file's text."""
    data = {}
    for i, (dimension, statement, label) in enumerate(sample_pairs()):
        image = f"images/sample_{i:02d}.png"
        _write_image(root / image, seed=i)
        data[f"sample-{i:02d}"] = {
            "image_path": image,
            "prompt": statement,
            "ground_truth": label,
            "other_info": {"statement_meta": {"class": dimension}},
        }
    return json.dumps(data, indent=1, ensure_ascii=False)


def sample_file(cache_dir: Path) -> Path:
    """`<cache dir>/samples/mvei-v1/mvei.json` (standard format) plus its images, generated on first use."""
    return bundled_sample(f"mvei-{SAMPLE_VERSION}", "mvei.json", cache_dir, _write)
