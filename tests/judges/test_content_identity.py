"""Content identity is content (issue 19, item 3): a video's frame-cache and answer-cache keys hash the whole file.

Before, the key was `video_id:size:sha256(first 16 KiB)`, so a video replaced by another of the same size with
the same container header was judged with the old file's cached frames and answers.  Now the whole file is
hashed, once per process per unchanged file (memoised by its stat signature), in the parent and in the render
pool's spawned workers alike.
"""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import API_KEY, env_without_secrets, with_mme_sample
from fakes import Judge

from emo_tasks.mme_emotion import judge as mme_judge
from emo_tasks.mme_emotion.data import video_identity
from judges import filehash, media
from judges import frames as fc
from judges.testing import LoopbackServer, Reply, last_user_text

HEAD = 16 << 10  # what the old identity hashed


@pytest.fixture(autouse=True)
def cold_memo() -> None:
    """Every test starts with an empty hash memo (it is process-wide)."""
    filehash.reset_hash_stats(forget=True)
    yield
    filehash.reset_hash_stats(forget=True)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the files actually read for hashing; memoising at once (no 'racy' wait for fresh test files)."""
    seen: list[str] = []
    real = filehash._read_sha256
    monkeypatch.setattr(filehash, "_read_sha256", lambda fh, chunk: seen.append(fh.name) or real(fh, chunk))
    monkeypatch.setattr(filehash, "_RACY_NS", 0)
    return seen


def _twins(tmp_path: Path, suffix: str = ".mp4") -> tuple[Path, Path]:
    """Two files of the same size with the same first 16 KiB (and more), different later bytes."""
    head = bytes(range(256)) * (HEAD // 256 + 40)
    a, b = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
    a.write_bytes(head + b"\x00" * 5000)
    b.write_bytes(head + b"\x00" * 4000 + b"\x01" + b"\x00" * 999)
    return a, b


def _record(path: Path, video_id: str = "CAER/video/x.avi") -> dict[str, Any]:
    return {"video_path": str(path), "video_id": video_id, "mme_task": "ER-Wild", "row": 0}


# ------------------------------------------------------------------------------------------- the identity
@pytest.mark.parametrize("suffix", [".mp4", ".avi", ".mkv"])
def test_same_size_and_header_but_other_content_is_another_identity(tmp_path: Path, suffix: str) -> None:
    a, b = _twins(tmp_path, suffix)
    assert a.stat().st_size == b.stat().st_size and a.read_bytes()[:HEAD] == b.read_bytes()[:HEAD]
    assert video_identity(str(a), "v") != video_identity(str(b), "v")
    # every cache key made from it differs: the judge's answer cache (the frames part's digest), the frame cache,
    # the live audio clue's identity
    assert mme_judge.frames_part(_record(a)).digest() != mme_judge.frames_part(_record(b)).digest()
    assert mme_judge._identity(str(a), "v") + ":audio16k" != mme_judge._identity(str(b), "v") + ":audio16k"
    fc.configure_frame_cache(tmp_path / "frames")
    try:
        assert fc.part_key(mme_judge.frames_part(_record(a))) != fc.part_key(mme_judge.frames_part(_record(b)))
    finally:
        fc.configure_frame_cache(None)


def test_identity_names_content_not_the_machine(tmp_path: Path) -> None:
    a, _ = _twins(tmp_path)
    elsewhere = tmp_path / "other" / "folder" / "copy.mp4"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_bytes(a.read_bytes())
    ident = video_identity(str(a), "IEMOCAP/video/x.mp4")
    assert ident == video_identity(str(elsewhere), "IEMOCAP/video/x.mp4")
    assert str(tmp_path) not in ident and "copy" not in ident
    video_id, size, digest = ident.rsplit(":", 2)
    assert (video_id, int(size)) == ("IEMOCAP/video/x.mp4", a.stat().st_size)
    assert digest == media._sha256(a.read_bytes())[:32]  # the whole file's sha256
    # a missing file still gets a name (its request fails later, naming the file)
    assert mme_judge._identity(str(tmp_path / "gone.mp4"), "v") == "v:missing"


# ------------------------------------------------------------------------------------------- the memo
def test_an_unchanged_file_is_read_once_per_process(tmp_path: Path, reads: list[str]) -> None:
    a, b = _twins(tmp_path)
    first = video_identity(str(a), "v")
    for _ in range(5):
        assert video_identity(str(a), "v") == first
    mme_judge.frames_part(_record(a))
    mme_judge._identity(str(a), "other-id")
    media.file_sha256(a)
    media.VideoFramesPart(a).digest()  # no identity: the file's sha256, from the same memo
    assert reads == [str(a)]
    filehash.hash_files([a, b, str(b), a])  # already known ones are not read again; the new one once
    assert reads == [str(a), str(b)]
    stats = filehash.hash_stats()
    assert stats["files"] == 2 and stats["bytes"] == 2 * a.stat().st_size and stats["memo_hits"] >= 9


def test_concurrent_callers_share_one_read(tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    a, _ = _twins(tmp_path)
    slow = filehash._read_sha256
    monkeypatch.setattr(filehash, "_read_sha256", lambda fh, chunk: time.sleep(0.2) or slow(fh, chunk))
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(video_identity(str(a), "v"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1 and len(results) == 8
    assert reads == [str(a)]


def test_a_changed_file_is_read_again(tmp_path: Path, reads: list[str]) -> None:
    a, b = _twins(tmp_path)
    original = video_identity(str(a), "v")
    # touched (same bytes): read again, same identity
    st = a.stat()
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))
    assert video_identity(str(a), "v") == original and len(reads) == 2
    # replaced by a same-size, same-header file (a new inode), even with the old mtime put back
    time.sleep(0.05)  # past the kernel's timestamp tick
    b.replace(a)
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))
    replaced = video_identity(str(a), "v")
    assert replaced != original and len(reads) == 3
    # rewritten in place (same inode, same size), the old mtime put back: ctime still moved
    time.sleep(0.05)
    data = bytearray(a.read_bytes())
    data[-1] ^= 0xFF
    before = a.stat()
    with open(a, "r+b") as fh:
        fh.write(data)
    os.utime(a, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert a.stat().st_ino == before.st_ino and a.stat().st_mtime_ns == before.st_mtime_ns
    assert video_identity(str(a), "v") not in (original, replaced) and len(reads) == 4
    # another size
    with open(a, "ab") as fh:
        fh.write(b"more")
    grown = video_identity(str(a), "v")
    assert grown.split(":")[1] == str(a.stat().st_size) and len(reads) == 5


def test_a_file_rewritten_right_after_it_was_hashed_is_not_served_from_the_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the same timestamp tick a rewrite may leave size, mtime and ctime unchanged; such fresh files are
    not memoised until they are older than the tick ('racy git').  This kernel stamps files to the nanosecond, so
    a filesystem with 1 s timestamps is played by rounding the signature's times down to the second."""
    real = filehash._signature

    def coarse(st: os.stat_result) -> tuple[int, ...]:
        dev, ino, size, mtime, ctime = real(st)
        return dev, ino, size, mtime // 10**9 * 10**9, ctime // 10**9 * 10**9

    monkeypatch.setattr(filehash, "_signature", coarse)
    a, _ = _twins(tmp_path)
    for _ in range(5):  # a loaded machine (the other xdist worker) may cross the second between the writes: again
        while time.time_ns() % 10**9 > 6 * 10**8:  # room for two writes within one second
            time.sleep(0.05)
        a.write_bytes(a.read_bytes())
        first = video_identity(str(a), "v")
        data = bytearray(a.read_bytes())
        data[HEAD + 10] ^= 0xFF
        st = a.stat()
        with open(a, "r+b") as fh:
            fh.write(data)
        os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
        if coarse(a.stat()) == coarse(st):
            break
    assert coarse(a.stat()) == coarse(st)  # the case: nothing in the signature moved
    assert video_identity(str(a), "v") != first


def _in_a_spawned_worker(path: str) -> tuple[str, str]:
    from emo_tasks.mme_emotion.data import video_identity
    from judges.media import file_sha256

    return video_identity(path, "v"), file_sha256(path)


def test_the_render_pool_workers_name_a_video_as_the_parent_does(tmp_path: Path) -> None:
    a, _ = _twins(tmp_path)
    ctx = multiprocessing.get_context("spawn")  # as the render pool starts its workers
    with fc._caller_main_hidden(), ctx.Pool(1) as pool:
        worker = pool.apply(_in_a_spawned_worker, (str(a),))
    assert worker == (video_identity(str(a), "v"), media.file_sha256(a))


def test_a_judge_phase_reads_each_video_once(tmp_path: Path, reads: list[str]) -> None:
    """Three answers per sample row, two rows (two videos): the phase hashes two files, however many requests
    (frames parts, judge requests, pending renders) name them."""
    from emo_tasks.mme_emotion import hooks
    from emo_tasks.mme_emotion.judge import TaskAnswers, judge_tasks

    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        env = {"OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": API_KEY, "EMO_PROGRESS": "0",
               "EMO_CACHE_DIR": str(with_mme_sample(tmp_path / "cache")), "EMO_RENDER_WORKERS": "0"}  # fmt: skip
        docs = hooks.load_task("mme_emotion/sample/ER-Lab", env)
        items = []
        for n in range(3):
            records = [hooks.process_results(doc, [f"Take {n}. Answer: Anger"])["rec_s"] for doc in docs]
            items += [{**hooks.lookup_doc(r), **r} for r in records]
        ((judged, _, _),) = judge_tasks([TaskAnswers(items, hooks.settings_for(records))], progress=False)
    assert len(judged) == 6 and all(j.ok for j in judged)
    assert sorted(reads) == sorted({d["video_path"] for d in docs}) and len(reads) == 2


# ------------------------------------------------------------------------------------------- end to end
def write_raw_avi(path: Path, *, change_from: int, seconds: float = 3.0, fps: int = 8) -> Path:
    """A valid AVI of uncompressed frames (96x72, the sample clips' size): every frame is stored at the same size,
    so two clips with the same frame count are the same size with the same container structure byte for byte,
    and frames before `change_from` are the same bytes; from `change_from` on the picture differs."""
    import av
    import numpy as np

    yy, xx = np.mgrid[0:72, 0:96]
    with av.open(str(path), "w", format="avi") as container:
        stream = container.add_stream("rawvideo", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 96, 72, "yuv420p"
        for i in range(int(seconds * fps)):
            seed = 1 if i < change_from else 2
            img = np.stack([(xx * 2 + i * 9 + seed * 31) % 256, (yy * 3 + i * 5 + seed * 17) % 256,
                            np.full_like(xx, (seed * 53 + i * 20) % 256)], -1).astype(np.uint8)  # fmt: skip
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


class RecordingJudge(Judge):
    """tests/fakes.py's judge, keeping each judge request's user text and the JPEG bytes of its frames."""

    def __init__(self) -> None:
        super().__init__()
        self.judge_requests: list[tuple[str, list[bytes]]] = []

    def __call__(self, body: dict, attempt: int) -> Any:
        text = last_user_text(body)
        if "Rating Requirements" in text:
            images = [
                base64.b64decode(p["image_url"]["url"].split(",", 1)[1])
                for m in body["messages"]
                if isinstance(m.get("content"), list)
                for p in m["content"]
                if isinstance(p, dict) and p.get("type") == "image_url"
            ]
            self.judge_requests.append((text, images))
        reply = super().__call__(body, attempt)
        return reply if isinstance(reply, Reply) else Reply(text=str(reply))


@pytest.mark.slow
def test_a_replaced_video_with_the_same_size_and_header_is_judged_again_on_its_new_frames(tmp_path: Path) -> None:
    from emo_tasks.mme_emotion.sample import SAMPLE_VERSION, sample_rows

    row = sample_rows()["ER-Wild"][0]
    assert row["video_id"].endswith(".avi")
    cache = with_mme_sample(tmp_path / "cache")
    video = cache / "samples" / f"mme_emotion-{SAMPLE_VERSION}" / row["video_id"]
    assert video.is_file()
    old = write_raw_avi(tmp_path / "old.avi", change_from=10**6)
    new = write_raw_avi(tmp_path / "new.avi", change_from=4)
    old_bytes, new_bytes = old.read_bytes(), new.read_bytes()
    # the case the old identity got wrong: same size, same first 16 KiB (and more), other content
    assert len(old_bytes) == len(new_bytes) > 2 * HEAD and old_bytes[:HEAD] == new_bytes[:HEAD] != new_bytes
    old_frames = media.VideoFramesPart(old, interval_s=1.0, max_frames=10).frames_jpeg()
    new_frames = media.VideoFramesPart(new, interval_s=1.0, max_frames=10).frames_jpeg()
    assert len(old_frames) == len(new_frames) == 3 and old_frames[0] == new_frames[0]
    assert old_frames[1:] != new_frames[1:] and all(x != y for x, y in zip(old_frames[1:], new_frames[1:], strict=True))
    video.write_bytes(old_bytes)

    env = env_without_secrets()
    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", EMO_CACHE_DIR=str(cache),
               EMO_PROGRESS="0", EMO_JUDGE_BACKOFF_BASE="0.01", EMO_JUDGE_BACKOFF_MAX="0.05")  # fmt: skip
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--tasks", "mme_emotion_sample", "--batch_size",
           "1", "--predict_only", "--log_samples", "--output_path", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert sorted(out.rglob("*_results.json")), proc.stdout[-2000:] + proc.stderr[-4000:]

    def judge(fake: RecordingJudge, *args: str) -> tuple[list[Any], list[tuple[str, list[bytes]]]]:
        with LoopbackServer(responder=fake, expected_api_key=API_KEY) as srv:
            run_env = {**env, "OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": API_KEY}
            done = subprocess.run([sys.executable, "-m", "emo_tasks", "judge", str(out), *args], env=run_env,
                                  capture_output=True, text=True, timeout=900)  # fmt: skip
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
            return list(srv.calls), fake.judge_requests

    def for_row(requests: list[tuple[str, list[bytes]]]) -> list[list[bytes]]:
        return [images for text, images in requests if row["audio_clue"] in text]

    calls, requests = judge(RecordingJudge())
    assert len(requests) == 16 and for_row(requests) == [old_frames]

    video.write_bytes(new_bytes)  # the same size, the same first 16 KiB
    calls, requests = judge(RecordingJudge(), "--out", str(tmp_path / "judged_again"))
    # that one video's judge request went out again (not from the answer cache) with the new file's frames
    # (not from the frame cache); everything else was answered from the cache
    assert for_row(requests) == [new_frames], [len(r) for r in for_row(requests)]
    assert len(calls) == 1 and len(requests) == 1
    logs = [json.loads(line) for p in (tmp_path / "judged_again").rglob("*er_wild*_judge.jsonl")
            for line in p.read_text().splitlines()]  # fmt: skip
    assert len(logs) == 2 and all(r["status"] == "scored" for r in logs)
