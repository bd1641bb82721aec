"""The judge's frame cache as MME-Emotion uses it: on by default under the emo-tasks cache folder, so judging the
same answers with a second judge model decodes no video (issue 13); EMO_FRAME_CACHE_MAX_MB=0 turns it off."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import API_KEY, fast_env
from fakes import Judge

from judges import frames
from judges.testing import LoopbackServer


def _judge_task(env: dict[str, str]) -> list:
    from emo_tasks.mme_emotion import hooks
    from emo_tasks.mme_emotion.judge import TaskAnswers, judge_tasks

    docs = hooks.load_task("mme_emotion/sample/ER-Lab", env)
    records = [hooks.process_results(doc, ["The voice is loud. Answer: Anger"])["rec_s"] for doc in docs]
    items = [{**hooks.lookup_doc(r), **r} for r in records]
    (judged,) = judge_tasks([TaskAnswers(items, hooks.settings_for(records))], progress=False)
    return judged.judgements


def test_a_second_judge_model_decodes_no_video(tmp_path: Path) -> None:
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        env = {**fast_env(srv.base_url), "EMO_CACHE_DIR": str(tmp_path / "cache"), "EMO_PROGRESS": "0",
               "EMO_RENDER_WORKERS": "0"}  # fmt: skip  # every decode in this process, where it is counted
        frames.reset_render_stats()
        first = _judge_task({**env, "EMO_JUDGE_MODEL": "judge-one"})
        decoded_first = frames.render_stats()["decodes"]
        frames.reset_render_stats()
        second = _judge_task({**env, "EMO_JUDGE_MODEL": "judge-two"})
        stats = frames.render_stats()
        judge_models = {c.model for c in srv.calls} - {"gpt-4.1-2025-04-14"}
    assert all(j.ok for j in first + second) and judge_models == {"judge-one", "judge-two"}
    assert decoded_first == 2  # the two sample videos, once each
    assert stats["decodes"] == 0 and stats["cache_hits"] == 2  # the second judge got the same frames from disk
    assert list((tmp_path / "cache" / "frames").rglob("*")), "frames live under the emo-tasks cache folder"


def test_the_frame_cache_can_be_turned_off_and_a_bad_bound_is_named(tmp_path: Path) -> None:
    from emo_tasks.mme_emotion.settings import MMESettings

    off = MMESettings.from_env({"EMO_JUDGE": "offline", "EMO_FRAME_CACHE_MAX_MB": "0"}, "sample")
    assert off.frame_cache_max_bytes == 0
    with pytest.raises(Exception, match="EMO_FRAME_CACHE_MAX_MB"):
        MMESettings.from_env({"EMO_JUDGE": "offline", "EMO_FRAME_CACHE_MAX_MB": "lots"}, "sample")


def test_frames_are_rendered_in_a_process_pool_before_the_judge_asks(tmp_path: Path) -> None:
    """EMO_RENDER_WORKERS (default: one per core): the videos are decoded in worker processes while the step
    agent's batch runs, so the judge requests find their frames in the cache (this process decodes nothing) and
    get the same JPEG bytes as a decode here would."""
    from judges.media import VideoFramesPart

    try:
        with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
            env = {**fast_env(srv.base_url), "EMO_CACHE_DIR": str(tmp_path / "cache"), "EMO_PROGRESS": "0",
                   "EMO_RENDER_WORKERS": "2"}  # fmt: skip
            frames.reset_render_stats()
            judged = _judge_task(env)
            stats = frames.render_stats()
    finally:
        frames.shutdown_prerender()
    assert all(j.ok for j in judged)
    assert stats["decodes"] == 0 and stats["cache_hits"] == 2  # rendered by the pool, read from the cache here
    from emo_tasks.mme_emotion import hooks

    doc = hooks.load_task("mme_emotion/sample/ER-Lab", {"EMO_CACHE_DIR": str(tmp_path / "cache"), "EMO_JUDGE":
                                                        "offline"})[0]  # fmt: skip
    frames.configure_frame_cache(None)
    direct = VideoFramesPart(doc["video_path"], interval_s=1.0, max_frames=10).frames_jpeg()
    frames.configure_frame_cache(tmp_path / "cache" / "frames", 1 << 30)
    from emo_tasks.mme_emotion.judge import frames_part

    record = {**doc, "answer": ""}
    assert frames.active_frame_cache().get(frames.part_key(frames_part(record))) == direct
