"""Batch judging at full size (issue 35): what `emo-tasks judge RUN --batch` costs the client, against the
synchronous stage at the same size, in one run.

Why: a batch is answered within 24 h at half price, so its wall time is the provider's queue; what the user pays
in time on their own machine is the rest, the time spent outside the provider's queue: start-up, rendering frames,
writing and uploading the request files, reading the answers back, the passes.  That must be small against the
synchronous stage (goal: <= 10 % at 6,500 rows).

What runs (the data, the predict-only run and the judge processes of `judge_cli_paths.py`, imported):
1. the benchmark layout cut to N rows (default all 6,500) and `lmms-eval --model from_log ... --predict_only`;
2. `emo-tasks judge RUN` against `judge_server.py` (a process of its own) answering each judge call after
   `--latency` s (default 2), EMO_JUDGE_CONCURRENCY `--concurrency` (default 16, its default), cold answer cache.
   2 s for a judge call with up to ten frames is an assumption at the fast end of hosted multimodal judges, not a
   measurement of any provider; `--latency 0.5 --concurrency 64` is issue 24's setting, for comparison;
3. `emo-tasks judge RUN --batch --batch-poll 5` against `judge_server.py --batches --queue 60`: OpenAI's Files
   and Batches with the same responder, each batch held in_progress `--queue` s from its creation, a provider's
   queue (a real one takes minutes to hours: 60 s is short, so the client's work has little to hide behind);
   cold answer cache.
The frame cache is cold for both (`--frames warm`: both start from the same warmed frames).  Each command's stderr
is stamped as it arrives: the batch command's waiting is, per round, from its last batch submitted to its last
batch ended; the client's own time (outside the provider's queue) is the command's wall time minus that.  Work the
client does while it waits (e.g. rendering the next round's frames) is not in its own time; its CPU is: the client
CPU printed is all of it (the command and its render workers), split into outside and inside the waiting (sampled
every 0.5 s from /proc).

Printed: rounds, files per round, the largest file (requests, bytes, within the limits), client CPU and peak RSS,
the client's own time by phase, the ratio to the synchronous stage measured at the same setting (the goal's
PASS/MISS), and the ratio to the synchronous bound at `--real-latency` and `--real-concurrency` (computed, extra
information).  Checks: both stages' metrics equal bit for bit, every row scored.  PASS/MISS per goal, exit 1 on a
MISS.  The synchronous stage at 2 s / 16 is >= 1,625 s at 6,500 rows (>= 125 s for the quick cut), mostly asleep.

    python benchmarks/judge_batch.py            # 6,500 rows
    python benchmarks/judge_batch.py --quick    # the 500-row cut (or -n N)
    python benchmarks/judge_batch.py --frames warm    # both stages from the same warmed frame cache
    python benchmarks/judge_batch.py --quick --latency 0.5 --concurrency 64    # issue 24's setting

Results and what dominates: benchmarks/RESULTS.md, "Batch judging at full size (issue 35)".
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from judge_cli_paths import (  # noqa: E402
    JudgeServer,
    base_env,
    build_data,
    cpu_between,
    cpu_split,
    emo_cmd,
    lmms_cmd,
    metric_values,
    phase_figures,
    results_of,
    run_command,
    say,
)

from judges.batch_files import BYTES_PER_MB, DEFAULT_MAX_MB, DEFAULT_MAX_REQUESTS, BatchLimits  # noqa: E402
from judges.config import DEFAULT_CONCURRENCY  # noqa: E402

FULL = 6500
QUICK = 500
GOAL_SHARE = 0.10
#: the batch command's stderr lines (judges.batch_api.BatchAPI.say, judging/batching.py)
SUBMITTED = re.compile(r"--batch: (r(\d+)-\S+): \d+ requests .* submitted as ")
ENDED = re.compile(r"--batch: (r(\d+)-\S+) \(\S+\): (completed|expired|failed|cancelled),")
ROUND = re.compile(r"--batch: round (\d+): ")


def waiting(lines: list[tuple[float, str]]) -> dict[int, tuple[float, float]]:
    """round -> (its last batch submitted, its last batch ended), on the command's stamped lines."""
    out: dict[int, list[float]] = {}
    for t, text in lines:
        if m := SUBMITTED.search(text):
            w = out.setdefault(int(m.group(2)), [t, t])
            w[0] = max(w[0], t)
        elif m := ENDED.search(text):
            w = out.setdefault(int(m.group(2)), [t, t])
            w[1] = max(w[1], t)
    return {r: (a, b) for r, (a, b) in sorted(out.items())}


def phases(run: dict[str, Any], waits: dict[int, tuple[float, float]]) -> list[tuple[str, float]]:
    """The client's own time cut at its milestones: each pass (up to "round K: ... wait"), each upload (to the
    round's last submit), the collect and next pass after a round's last batch ended, the last pass."""
    ends = {int(m.group(1)): t for t, text in run["lines"] if (m := ROUND.search(text))}
    out, since = [], run["t0"]
    for r, (sub, end) in waits.items():
        pass_end = ends.get(r, sub)
        head = "pass 1 (start-up, " if r == 1 else f"collect round {r - 1} + pass {r} ("
        out.append((f"{head}reads, renders, writes round {r}'s files)", pass_end - since))
        out.append((f"upload + create round {r}'s batches", sub - pass_end))
        since = end
    out.append(("collect the last round + the last pass (scores, writes the results)", run["t1"] - since))
    return out


def book_of(folder: Path) -> dict[str, Any]:
    files = list(folder.rglob("state.json"))
    if len(files) != 1:
        raise SystemExit(f"expected one batch book under {folder}, found {len(files)}")
    return json.loads(files[0].read_text())


def scored(results: dict[str, Any]) -> int | None:
    return results.get("mme_emotion_all", {}).get("n_scored,none")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=FULL, help=f"rows (default {FULL:,}; the goal is set at {FULL:,})")
    ap.add_argument("--quick", action="store_true", help=f"the {QUICK}-row cut (-n {QUICK})")
    ap.add_argument("--latency", type=float, default=2.0,
                    help="the synchronous judge's latency (s; an assumption, fast for a multimodal judge)")  # fmt: skip
    ap.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                    help="EMO_JUDGE_CONCURRENCY of both commands (default: its default)")  # fmt: skip
    ap.add_argument("--queue", type=float, default=60.0,
                    help="s each batch waits in_progress at the loopback provider (real: minutes-hours)")  # fmt: skip
    ap.add_argument("--batch-poll", type=float, default=5.0, help="the batch command's --batch-poll (s)")
    ap.add_argument("--real-latency", type=float, default=2.0, help="the computed comparison's latency (s)")
    ap.add_argument("--real-concurrency", type=int, default=DEFAULT_CONCURRENCY,
                    help="the computed comparison's concurrency (EMO_JUDGE_CONCURRENCY's default)")  # fmt: skip
    ap.add_argument("--frames", choices=("cold", "warm"), default="cold",
                    help="the frame cache both stages start from (warm: a stage at no latency fills it)")  # fmt: skip
    ap.add_argument("--batch-max-requests", type=int, default=DEFAULT_MAX_REQUESTS)
    ap.add_argument("--batch-max-mb", type=float, default=DEFAULT_MAX_MB)
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "emo_tasks_bench")
    ap.add_argument("--profile", action="store_true", help="sample the batch command with py-spy")
    ap.add_argument("--keep", action="store_true", help="keep the runs (printed) instead of a temporary folder")
    args = ap.parse_args(argv)
    if args.profile and shutil.which("py-spy") is None:
        ap.error("--profile needs py-spy on PATH (pip install py-spy)")
    n = QUICK if args.quick else args.n
    tmp = Path(tempfile.mkdtemp(prefix="emo-judge-batch-"))
    say(f"judge_batch: {n} rows; synchronous judge at latency {args.latency} s (assumed), concurrency "
        f"{args.concurrency}; batch server answering the same way after a queue of {args.queue} s per batch, "
        f"polled from {args.batch_poll} s; frame cache {args.frames} for both; runs in {tmp}")  # fmt: skip
    try:
        goals = measure(args, n, tmp)
    finally:
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    say("\nGoals (issue 35):")
    for text, ok, value in goals:
        say(f"  {'PASS' if ok else 'MISS'}  {text}: {value}")
    return 0 if all(ok for _, ok, _ in goals) else 1


def measure(args: argparse.Namespace, n: int, tmp: Path) -> list[tuple[str, bool, str]]:
    conc, lat = args.concurrency, args.latency
    data_root = build_data(args.work, n)
    n_rows = sum(len(json.loads(f.read_text())["logs"]) for f in (data_root / "answers").glob("*.json"))
    po = tmp / "predict_only"
    caches = {"sync": tmp / "cache-sync", "batch": tmp / "cache-batch"}
    srv = JudgeServer(lat)
    try:
        run = run_command(lmms_cmd(data_root, po, "--predict_only"), base_env(data_root, srv, tmp / "cache-po", conc),
                          tmp / "predict_only.log", None)  # fmt: skip
        say(f"[predict-only] {n_rows} rows in {run['t1'] - run['t0']:.1f} s")
        if args.frames == "warm":
            warm_frames(data_root, po, tmp, conc, caches.values())
        srv.reset()
        sync = run_command(emo_cmd("judge", str(po), "--out", str(tmp / "judged-sync")),
                           base_env(data_root, srv, caches["sync"], conc), tmp / "sync.log", None)  # fmt: skip
        fig = phase_figures(srv.stats()["calls"], sync["t0"], lat, conc)
    finally:
        say(f"[judge server] its own CPU: {srv.close():.1f} s")
    sync_wall = sync["t1"] - sync["t0"]
    say(f"[sync] emo-tasks judge RUN: rc {sync['rc']}, {fig['calls']} calls in {sync_wall:.1f} s (bound "
        f"{fig['bound_s']:.1f} s = {fig['calls']} x {lat} s / {conc}; {fig['ratio']:.2f}x); client CPU "
        f"{sync['cpu_s']:.1f} s, peak RSS {sync['rss_mb']:.0f} MB (its largest process)")  # fmt: skip

    bsrv = JudgeServer(0.0, batches=True, queue_s=args.queue)
    try:
        flags = ["--batch-max-requests", str(args.batch_max_requests), "--batch-max-mb", str(args.batch_max_mb)]
        prof = tmp / "batch.pyspy" if args.profile else None
        batch = run_command(emo_cmd("judge", str(po), "--out", str(tmp / "judged-batch"), "--batch", "--batch-poll",
                                    f"{args.batch_poll:g}", *flags), base_env(data_root, bsrv, caches["batch"], conc),
                            tmp / "batch.log", prof)  # fmt: skip
        counters = bsrv._get("/v1/_loopback/counters")
    finally:
        say(f"[batch server] its own CPU: {bsrv.close():.1f} s")
    if batch["rc"] != 0:
        tail = "\n".join(text for _, text in batch["lines"][-15:])
        raise SystemExit(f"emo-tasks judge --batch exited {batch['rc']}:\n{tail}")
    book = book_of(tmp / "judged-batch")
    waits = waiting(batch["lines"])
    wait_s = sum(b - a for a, b in waits.values())
    wall = batch["t1"] - batch["t0"]
    own = wall - wait_s
    limits = BatchLimits(args.batch_max_requests, int(args.batch_max_mb * BYTES_PER_MB))

    say(f"[batch] emo-tasks judge RUN --batch --batch-poll {args.batch_poll:g} (queue {args.queue:g} s): "
        f"{book['rounds']} rounds, {len(book['files'])} files, "
        f"{sum(f['requests'] for f in book['files'])} requests; server: {counters['uploads']} uploads "
        f"({counters['upload_bytes'] / 1e6:.1f} MB), {counters['batches_created']} batches, {counters['lines_run']} "
        f"lines run, {counters['downloads']} downloads")  # fmt: skip
    for r in range(1, book["rounds"] + 1):
        files = [f for f in book["files"] if f["round"] == r]
        a, b = waits.get(r, (float("nan"), float("nan")))
        say(f"  round {r}: {len(files)} files (" + ", ".join(f"{f['name']}: {f['requests']} requests, "
            f"{f['bytes'] / 1e6:.1f} MB" for f in files) + f"); waiting {b - a:.1f} s")  # fmt: skip
    big_req = max(book["files"], key=lambda f: f["requests"])
    big_bytes = max(book["files"], key=lambda f: f["bytes"])
    say(f"  largest file: {big_req['requests']} requests ({big_req['name']}; limit {limits.max_requests}), "
        f"{big_bytes['bytes']:,} bytes = {big_bytes['bytes'] / BYTES_PER_MB:.1f} MB ({big_bytes['name']}; limit "
        f"{limits.max_bytes / BYTES_PER_MB:.0f} MB)")  # fmt: skip
    cpu_waiting = sum(cpu_between(batch, a, b) for a, b in waits.values())
    say(f"  wall {wall:.1f} s = waiting {wait_s:.1f} s + the time spent outside the provider's queue (the client's "
        f"own) {own:.1f} s")  # fmt: skip
    say(f"  client CPU {batch['cpu_s']:.1f} s in all (the command and its render workers): {cpu_waiting:.1f} s of "
        f"it while waiting (sampled), {batch['cpu_s'] - cpu_waiting:.1f} s outside; peak RSS "
        f"{batch['rss_mb']:.0f} MB (its largest process)")  # fmt: skip
    for name, s in phases(batch, waits):
        say(f"    {s:7.1f} s  {name}")
    for r, (a, b) in waits.items():
        say(f"    ({b - a:7.1f} s  waiting for round {r} at the provider; client CPU meanwhile "
            f"{cpu_between(batch, a, b):.1f} s)")  # fmt: skip
    if prof is not None and prof.is_file():
        calls = sum(f["requests"] for f in book["files"])
        for name, ms in cpu_split(prof, calls):
            say(f"    {ms:7.2f} ms/request  {name}")

    share = own / sync_wall
    real_bound = fig["calls"] * args.real_latency / args.real_concurrency
    say(f"\nThe client's own time, batch vs synchronous, frame cache {args.frames} for both:")
    say(f"  measured: {own:.1f} s outside the provider's queue vs the synchronous stage's {sync_wall:.1f} s (latency "
        f"{lat} s, assumed; concurrency {conc}) = {share:.1%}")  # fmt: skip
    say(f"  computed, not measured: at latency {args.real_latency} s and concurrency {args.real_concurrency} the "
        f"synchronous stage takes at least its bound {fig['calls']} x {args.real_latency} / {args.real_concurrency}"
        f" = {real_bound:.0f} s; {own:.1f} s is {own / real_bound:.1%} of that")  # fmt: skip
    say("  the synchronous stage's time grows with the judge's latency; the batch client's own time does not (the "
        "answers wait at the provider)")  # fmt: skip

    goals: list[tuple[str, bool, str]] = []
    text = (f"client's own time <= {GOAL_SHARE:.0%} of the synchronous stage's (measured at {lat} s / {conc}, "
            f"frames {args.frames})")  # fmt: skip
    if n >= FULL:
        goals.append((text, share <= GOAL_SHARE, f"{share:.1%} ({own:.1f} s / {sync_wall:.1f} s)"))
    else:
        say(f"  (the {GOAL_SHARE:.0%} goal is set at {FULL:,} rows; at {n}: {share:.1%})")
    within = big_req["requests"] <= limits.max_requests and big_bytes["bytes"] <= limits.max_bytes
    goals.append(("every batch file within the limits", within,
                  f"{big_req['requests']} requests, {big_bytes['bytes'] / BYTES_PER_MB:.1f} MB"))  # fmt: skip
    sync_res, batch_res = results_of(tmp / "judged-sync"), results_of(tmp / "judged-batch")
    same = bool(sync_res) and metric_values(sync_res) == metric_values(batch_res)
    goals.append(("the batch stage's metrics equal the synchronous stage's, bit for bit", same,
                  f"{len(metric_values(sync_res))} tasks compared"))  # fmt: skip
    for label, res in (("synchronous", sync_res), ("batch", batch_res)):
        goals.append((f"{label}: every row scored", scored(res) == n_rows, f"{scored(res)}/{n_rows}"))
    return goals


def warm_frames(data_root: Path, po: Path, tmp: Path, conc: int, caches: Any) -> None:
    """--frames warm: one synchronous stage against a judge at no latency fills a frame cache; each stage then
    starts from its own copy of it (answer caches stay cold)."""
    srv = JudgeServer(0.0)
    try:
        run = run_command(emo_cmd("judge", str(po), "--out", str(tmp / "judged-warm")),
                          base_env(data_root, srv, tmp / "cache-warm", conc), tmp / "warm.log", None)  # fmt: skip
    finally:
        srv.close()
    frames = tmp / "cache-warm" / "frames"
    if not frames.is_dir():
        raise SystemExit(f"no frame cache at {frames} after the warm-up (rc {run['rc']})")
    for cache in caches:
        shutil.copytree(frames, Path(cache) / "frames")
    say(f"[frames] warmed in {run['t1'] - run['t0']:.1f} s, copied to each stage's cache")


if __name__ == "__main__":
    sys.exit(main())
