"""MME-Emotion judge phase benchmark: frame extraction and the three-agent pipeline, against baselines.

Why: the official scripts decode every frame of every video and then keep the first ten, and they ask the step
agent and the judge one sample at a time with no cache.  Ours stops decoding at the tenth kept frame and runs
each agent as one concurrent, cached batch.  This script measures both claims in one run, on clips it generates
and on a loopback OpenAI-compatible server (127.0.0.1, injected latency standing in for a remote judge):

1. Frames: `judges.media.sample_video_frames` (stops early) vs a decode-everything-then-slice baseline, on one
   long clip.  Prints times and their ratio.
2. Pipeline: `judge_tasks` over N samples at EMO_JUDGE_CONCURRENCY=16 vs 1 (the official one-at-a-time
   pattern), then a cached rerun.  Prints wall times, calls and ratios.

    python benchmarks/mme_emotion_judge.py           # N=160, 60 s clip, 100 ms latency
    python benchmarks/mme_emotion_judge.py --quick   # smoke run, about 30 s; numbers not meaningful

The exit code is 0 whatever the numbers: this is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def decode_all_then_slice(path: Path, max_frames: int = 10) -> int:
    """The official pattern (OpenCV loop): read every frame, keep every int(fps)-th, slice the first ten."""
    import av

    kept = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        step = max(1, int(float(stream.average_rate)))
        for i, frame in enumerate(container.decode(stream)):
            if i % step == 0:
                kept.append(frame.to_image())
    return len(kept[:max_frames])


def bench_frames(seconds: float, tmp: Path) -> None:
    from emo_tasks.mme_emotion.sample import write_clip
    from judges.media import sample_video_frames

    clip = write_clip(tmp / "long.mp4", seconds=seconds, fps=25, size=(320, 240), audio=False)
    t0 = time.perf_counter()
    ours = len(sample_video_frames(clip))
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    base = decode_all_then_slice(clip)
    t_base = time.perf_counter() - t0
    print(f"[frames] {seconds:.0f} s clip, 25 fps, 320x240: ours {t_ours * 1000:.1f} ms ({ours} frames), "
          f"decode-all baseline {t_base * 1000:.1f} ms ({base} frames) -> {t_base / t_ours:.1f}x faster")  # fmt: skip


def _responder(body: dict, attempt: int):
    from judges.testing import Reply, last_user_text

    text = last_user_text(body)
    if text.startswith("Given the following answer"):
        return Reply(text="<step>Step 1: The brows are lowered. Step 2: The predicted emotion is anger.</step>")
    n = int(re.search(r"has (\d+) step", text).group(1)) if "has " in text else 2
    return Reply(text="<score>" + ", ".join(f"Step {i + 1}: 1/1" for i in range(n)) + "</score>")


def bench_pipeline(n: int, latency: float, tmp: Path) -> None:
    from emo_tasks.mme_emotion.data import load_task_docs
    from emo_tasks.mme_emotion.judge import TaskAnswers, judge_tasks
    from emo_tasks.mme_emotion.protocol import task_specs
    from emo_tasks.mme_emotion.sample import sample_root
    from emo_tasks.mme_emotion.settings import MMESettings
    from judges import reset_engine
    from judges.testing import LoopbackServer

    root = sample_root(tmp / "cache")
    docs = [d for spec in task_specs().values() for d in load_task_docs(spec, root, source="sample")]
    records = [{**docs[i % len(docs)], "answer": f"Answer {i}: anger"} for i in range(n)]
    with LoopbackServer(responder=_responder, latency_s=latency) as srv:
        env = dict(os.environ, OPENAI_BASE_URL=srv.base_url, OPENAI_API_KEY="bench", EMO_PROGRESS="0")
        rows = []
        for label, conc, cache_dir, subset in (
            ("official pattern (concurrency 1, no cache)", "1", tmp / "c1", max(8, n // 8)),
            ("ours (concurrency 16)", "16", tmp / "c16", n),
            ("ours, cached rerun", "16", tmp / "c16", n),
        ):
            env.update(EMO_JUDGE_CONCURRENCY=conc, EMO_CACHE_DIR=str(cache_dir), EMO_JUDGE="api")
            settings = MMESettings.from_env(env, "sample")
            reset_engine()
            srv.reset_log()
            t0 = time.perf_counter()
            ((judgements, _, _),) = judge_tasks([TaskAnswers(records[:subset], settings)], progress=False)
            dt = time.perf_counter() - t0
            scored = sum(j.ok for j in judgements)
            per_sample = dt / subset
            rows.append((label, subset, dt, per_sample, len(srv.calls), scored))
        reset_engine()
    base = rows[0][3]
    print(f"[pipeline] {n} samples, {latency * 1000:.0f} ms judge latency, 2 requests per sample (+frames):")
    for label, count, dt, per, calls, scored in rows:
        print(f"  {label:<44} {count:>5} samples {dt:7.2f} s  {per * 1000:7.1f} ms/sample  {calls:>5} calls "
              f" scored {scored:>5}  speed-up vs official pattern {base / per:6.1f}x")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-n", type=int, default=160)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--clip-seconds", type=float, default=60.0)
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.clip_seconds, args.latency = 32, 20.0, 0.05
    with tempfile.TemporaryDirectory() as tmp:
        bench_frames(args.clip_seconds, Path(tmp))
        bench_pipeline(args.n, args.latency, Path(tmp))


if __name__ == "__main__":
    main()
