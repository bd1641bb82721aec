"""The bundled EmoBench-M sample: two rows per scenario (13 scenarios) with short clips (moving colours, a sine
tone: video and audio) generated here with PyAV, written once in the authors' layout under the emo_tasks cache.

It exists so that `lmms-eval --model dummy --tasks emobench_m_sample` runs offline on a fresh machine through the
same loader, hooks and scoring as the benchmark.  Its prompts follow the authors' example instructions ("Need
output example/" in their repository) with our own utterances; its numbers say nothing about a model.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

from emo_tasks.common import sample_dir
from judges.atomic import atomic_path, atomic_write_text

from . import scoring
from .protocol import Scenario, scenarios

SAMPLE_VERSION = "v1"
ROWS_PER_SCENARIO = 2
_UTTERANCES = ("I can't believe we finally made it here.", "Well, that is one way to put it, I suppose.")
_REASONS = (
    "The audience laughed because he calmly offered to sell a smashed phone as slightly used.",
    "The audience laughed because she answered a serious question with an absurdly literal reply.",
)


def write_clip(
    path: Path, *, seconds: float = 2.0, fps: int = 8, size: tuple[int, int] = (64, 48), seed: int = 0
) -> Path:
    """A short deterministic .mp4 (H.264 video, AAC audio), written under a temporary name and renamed."""
    import av
    import numpy as np

    width, height = size
    with atomic_path(path, path.suffix) as tmp, av.open(str(tmp), "w") as container:
        vstream = container.add_stream("libx264", rate=fps)
        vstream.width, vstream.height, vstream.pix_fmt = width, height, "yuv420p"
        vstream.options = {"threads": "1", "preset": "ultrafast"}
        astream = container.add_stream("aac", rate=16000)
        astream.layout = "mono"
        yy, xx = np.mgrid[0:height, 0:width]
        for i in range(int(round(seconds * fps))):
            img = np.stack([(xx * 3 + i * 9 + seed * 31) % 256, (yy * 3 + i * 5 + seed * 17) % 256,
                            np.full_like(xx, (seed * 53 + i * 20) % 256)], axis=-1).astype(np.uint8)  # fmt: skip
            for packet in vstream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                container.mux(packet)
        for packet in vstream.encode():
            container.mux(packet)
        rate, chunk = 16000, astream.frame_size or 1024
        tone = (0.2 * np.sin(2 * np.pi * (220 + 40 * seed) * np.arange(int(seconds * rate)) / rate)).astype(np.float32)
        for start in range(0, len(tone), chunk):
            frame = av.AudioFrame.from_ndarray(tone[start : start + chunk].reshape(1, -1), format="fltp", layout="mono")
            frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
            for packet in astream.encode(frame):
                container.mux(packet)
        for packet in astream.encode():
            container.mux(packet)
    return path


def _prompt(sc: Scenario, utterance: str) -> str:
    if sc.kind == scoring.JOINT:
        return (f"The person in video says: {utterance} Analyze the emotion and intent. Choose one emotion: "
                f"{', '.join(sc.labels)}. Choose one intent: {', '.join(sc.intents)}. Respond in the format: "
                "{'emotion label': 'label', 'intent label': 'label'}.")  # fmt: skip
    if sc.kind == scoring.GENERATION:
        return (f"Reasoning task: You are to answer why the audience laughed given the video clip. Given video clip: "
                f"{{0: {{Speaker: A, Utterance: {utterance} (audience laughs)}}}}. Explain why audience laughed, at "
                "most 40 words, starting with 'The audience laughed because '.")  # fmt: skip
    return (f"The person in video says: {utterance} Determine the emotion conveyed. Do not provide any additional "
            f"explanations or extra content. Choose one of the following labels as your final answer: "
            f"{', '.join(sc.labels)}. Respond in the format: {{'emotion': 'label'}}.")  # fmt: skip


def _answer(sc: Scenario, i: int) -> str:
    if sc.kind == scoring.JOINT:
        return f"{{'emotion label': '{sc.labels[i % len(sc.labels)]}', 'intent label': '{sc.intents[i]}'}}"
    if sc.kind == scoring.GENERATION:
        return _REASONS[i % len(_REASONS)]
    return sc.labels[i % len(sc.labels)]


def sample_rows(sc: Scenario) -> list[dict[str, Any]]:
    """The scenario's sample rows in the authors' format (id, video, conversations)."""
    return [
        {"id": str(i), "video": f"videos/{sc.folder}/sample_{i:02d}.mp4",
         "conversations": [{"from": "human", "value": f"<video>\n{_prompt(sc, _UTTERANCES[i])}"},
                           {"from": "gpt", "value": _answer(sc, i)}]}
        for i in range(ROWS_PER_SCENARIO)
    ]  # fmt: skip


def sample_root(cache_dir: Path) -> Path:
    """The sample in the authors' layout (`benchmark_json/`, `dataset/<folder>/videos/...`), generated on first use
    under `cache_dir`; a `.complete` marker written last says it is whole."""
    root = sample_dir(f"emobench_m-{SAMPLE_VERSION}", cache_dir)
    marker = root / ".complete"
    if marker.is_file():
        return root
    for n, sc in enumerate(scenarios().values()):
        rows = sample_rows(sc)
        for i, row in enumerate(rows):
            target = root / "dataset" / sc.folder / row["video"]
            if not target.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                write_clip(target, seed=n * ROWS_PER_SCENARIO + i)
        atomic_write_text(root / "benchmark_json" / sc.file, json.dumps(rows, indent=1, ensure_ascii=False))
    atomic_write_text(marker, f"emobench_m sample {SAMPLE_VERSION}\n")
    return root
