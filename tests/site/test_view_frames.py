"""The frames `emo-tasks view` shows of an MME-Emotion sample are the frames its judge saw, byte for byte.

A real judge run, in process: the bundled sample's ER-Lab task (one clip replaced by a generated 12 s one, so ten
frames are kept) judged by the real pipeline against the loopback server, which keeps the JPEG frames each judge
request carried.  Then the view of that run: from the warm frame cache (no decode, each video hashed once), from a
cold one (rendered by the judge's sampler), and with a video gone (its id stands in, the details say why)."""

from __future__ import annotations

import base64
import re
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import fast_env, with_mme_sample
from fakes import Judge

from emo_tasks.common import LastResult
from emo_tasks.mme_emotion import hooks
from emo_tasks.mme_emotion.sample import sample_root, write_clip
from emo_tasks.mme_emotion.view import view_samples
from judges import filehash
from judges import frames as fc
from judges.testing import LoopbackServer, Reply, last_user_text

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # bpe_openai's importlib.resources use

ER_LAB = "mme_emotion_sample_er_lab"
DATE = "20260101_000000"


class FrameKeepingJudge(Judge):
    """The fake judge, keeping the JPEG bytes of every image a judge request carried, by the row it judges (the
    answer's ROW-n tag, carried into the step text, which the judge's request holds)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.frames: dict[int, list[bytes]] = {}

    def __call__(self, body: dict, attempt: int) -> Any:
        text = last_user_text(body)
        row = int(re.search(r"ROW-(\d+)", text).group(1))
        reply = super().__call__(body, attempt)
        if text.startswith("Given the following answer"):
            return Reply(text=reply.text.replace("</step>", f" Seen ROW-{row}.</step>"))
        urls = [p["image_url"]["url"] for m in body["messages"] if isinstance(m.get("content"), list)
                for p in m["content"] if p.get("type") == "image_url"]  # fmt: skip
        assert all(u.startswith("data:image/jpeg;base64,") for u in urls)
        with self.lock:
            self.frames[row] = [base64.b64decode(u.split(",", 1)[1]) for u in urls]
        return reply


@pytest.fixture
def judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The sample's ER-Lab judged with --output_path into `run` (its judge log, a sample log with the prompts),
    the frame cache `<cache>/frames` filled by the judge, and the frames each judge request carried."""
    monkeypatch.setattr(hooks.STATE, "memo", LastResult())  # judge afresh (the memo key leaves out `args`)
    cache = with_mme_sample(tmp_path / "cache")
    judge = FrameKeepingJudge()
    with LoopbackServer(responder=judge) as srv:
        env = fast_env(srv.base_url, EMO_CACHE_DIR=str(cache), EMO_PROGRESS="0", EMO_RENDER_WORKERS="0")
        for name, value in env.items():  # the view reads the environment, as `emo-tasks view` does
            monkeypatch.setenv(name, value)
        root = sample_root(cache)
        first = hooks.load_task("mme_emotion/sample/ER-Lab", env)[0]
        write_clip(root / first["video_id"], seconds=12, fps=4, seed=99)  # 48 frames, one kept in 4: ten kept
        docs = hooks.load_task("mme_emotion/sample/ER-Lab", env)
        records = [hooks.process_results(d, [f"ROW-{d['row']} Tense voice. Answer: anger"])["rec_s"] for d in docs]
        run = tmp_path / "run"
        hooks.evaluate(records, SimpleNamespace(output_path=str(run), log_samples=True))
    log = run / f"{DATE}_samples_{ER_LAB}.jsonl"
    log.write_text("".join(f'{{"doc_id": {r["row"]}, "input": "question {r["row"]}", "rec_s": {_json(r)}}}\n'
                           for r in records))  # fmt: skip
    assert sorted(judge.frames) == [0, 1] and len(judge.frames[0]) == 10 and len(judge.frames[1]) == 3
    return SimpleNamespace(run=run, results=run / f"{DATE}_results.json", docs=docs, sent=judge.frames, cache=cache)


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


def _view(j: SimpleNamespace, frames_dir: Path) -> list[Any]:
    return view_samples(j.run, j.results, ER_LAB, frames_dir=frames_dir)


def _shown(view: Any) -> list[bytes]:
    return [Path(p).read_bytes() for p in view.media]


def test_from_a_warm_cache_the_frames_are_the_judges_bytes_without_a_decode(
    judged: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filehash, "_RACY_NS", 0)  # the clips were written just now: memoise their hashes anyway
    fc.configure_frame_cache(None)  # a fresh viewer process: no frame cache configured, no video hashed yet
    fc.reset_render_stats()
    filehash.reset_hash_stats(forget=True)
    views = _view(judged, tmp_path / "shown")
    assert [v.unit for v in views] == [(ER_LAB, 0), (ER_LAB, 1)]
    for v, doc in zip(views, judged.docs, strict=True):
        assert _shown(v) == judged.sent[doc["row"]]
        assert all(Path(p).suffix == ".jpg" and Path(p).is_relative_to(tmp_path / "shown") for p in v.media)
        assert v.details["frames"].endswith("from the frame cache")
        assert v.details["label_set"] == doc["label_set"] and v.details["audio_clue"] == doc["audio_clue"]
        assert v.prompt == f"question {doc['row']}" and v.doc_id == doc["row"]
        assert v.details["steps"] and all(s["rating"] and s["step"] for s in v.details["steps"])
        assert "Rating" in v.details["judge_text"]
    stats = fc.render_stats()
    assert (stats["decodes"], stats["cache_hits"], stats["cache_misses"]) == (0, 2, 0)
    # again: the files written out before are shown, not even the frame cache is read; no video hashed twice
    fc.reset_render_stats()
    again = _view(judged, tmp_path / "shown")
    assert [v.media for v in again] == [v.media for v in views]
    assert (fc.render_stats()["cache_hits"], fc.render_stats()["decodes"]) == (0, 0)
    assert again[0].details["frames"].endswith("as written out before")
    assert filehash.hash_stats()["files"] == 2
    assert fc.active_frame_cache() is None  # the process's own frame-cache setting is left as it was


def test_from_a_cold_cache_the_judges_sampler_renders_the_same_bytes(judged: SimpleNamespace, tmp_path: Path) -> None:
    assert fc.clear_frame_cache(judged.cache / "frames") == 2
    fc.reset_render_stats()
    views = _view(judged, tmp_path / "cold")
    for v, doc in zip(views, judged.docs, strict=True):
        assert _shown(v) == judged.sent[doc["row"]]
        assert "rendered now by the judge's sampler" in v.details["frames"]
    assert (fc.render_stats()["decodes"], fc.render_stats()["cache_misses"]) == (2, 2)
    # rendered into the frame cache, as the judge would: the next viewer decodes nothing
    fc.reset_render_stats()
    assert [_shown(v) for v in _view(judged, tmp_path / "next")] == [_shown(v) for v in views]
    assert (fc.render_stats()["decodes"], fc.render_stats()["cache_hits"]) == (0, 2)


def test_a_missing_video_shows_its_id_and_says_why(judged: SimpleNamespace, tmp_path: Path) -> None:
    gone = Path(judged.docs[1]["video_path"])
    gone.unlink()
    views = _view(judged, tmp_path / "shown")
    assert _shown(views[0]) == judged.sent[0]
    assert views[1].media == (judged.docs[1]["video_id"],)
    assert views[1].details["frames"] == f"video not found: {gone}"
    assert views[1].details["label_set"] == judged.docs[1]["label_set"]  # the data row is still there


def test_a_video_changed_since_it_was_judged_shows_no_frames(judged: SimpleNamespace, tmp_path: Path) -> None:
    """The judge log records the identity (whole-file hash) of the video the judge saw; a file at that path with
    other content now gets no frames, only the reason: never another file's frames beside this judgement."""
    import json

    logs = sorted((judged.run / "emo_tasks_judge").glob("*_judge.jsonl"))
    rows = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    assert all(r["video_identity"] and r["video_identity"].startswith(r["video_id"] + ":") for r in rows)
    changed = Path(judged.docs[0]["video_path"])
    write_clip(changed, seconds=12, fps=4, seed=7)  # same name, same length, other pixels
    views = _view(judged, tmp_path / "shown")
    assert views[0].media == (judged.docs[0]["video_id"],)
    assert "changed since it was judged" in views[0].details["frames"]
    assert _shown(views[1]) == judged.sent[judged.docs[1]["row"]]  # the unchanged one still shows the judge's frames
