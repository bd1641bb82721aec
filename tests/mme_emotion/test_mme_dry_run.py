"""The dry run's arithmetic: image tokens as the OpenAI API counts them, the frames the judge's sampler sends
(probed, not decoded), the input tokens of a judge request, and the live-clue plan against a loopback server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import API_KEY
from PIL import Image

from emo_tasks.common import LastResult
from emo_tasks.judging.tokens import count_tokens
from emo_tasks.mme_emotion import hooks
from emo_tasks.mme_emotion.dry_run import (
    input_tokens,
    probe_frames,
    request_texts,
    sampled_frame_count,
    thumbnail_size,
)
from emo_tasks.mme_emotion.sample import write_clip
from judges import JudgeRequest, VideoFramesPart, text_message, user_message
from judges.media import image_tokens, sample_video_frames
from judges.testing import LoopbackServer, Reply, last_user_text

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # bpe_openai's importlib.resources use


# --------------------------------------------------------------------------------------------- image tokens
@pytest.mark.parametrize(
    ("width", "height", "detail", "tokens"),
    [
        # OpenAI's worked examples: 1024 x 1024 high -> 768 x 768, 4 tiles -> 765;
        (1024, 1024, "high", 765),
        # 2048 x 4096 -> fits 1024 x 2048 -> shortest side 768: 768 x 1536, 6 tiles -> 1105;
        (2048, 4096, "high", 1105),
        # small images are never scaled up: 1 tile -> 255;
        (320, 240, "high", 255),
        (320, 240, None, 255),
        (96, 72, "auto", 255),
        # 1920 x 1080 -> 1365 x 768: 3 x 2 tiles -> 1105; 4096 x 8192 -> 1024 x 2048 -> 768 x 1536 -> 1105
        (1920, 1080, None, 1105),
        (4096, 8192, "high", 1105),
        # 512 x 512 is one tile, 513 x 512 two
        (512, 512, "high", 255),
        (513, 512, "high", 425),
        # low detail is flat
        (4096, 4096, "low", 85),
        (10, 10, "low", 85),
    ],
)
def test_image_tokens_match_openai_counting(width: int, height: int, detail: str | None, tokens: int) -> None:
    assert image_tokens(width, height, detail) == tokens


def test_image_tokens_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="detail"):
        image_tokens(10, 10, "medium")
    with pytest.raises(ValueError, match="positive"):
        image_tokens(0, 10)


# --------------------------------------------------------------------------------------------- frames
@pytest.mark.parametrize("size", [(96, 72), (72, 96), (1000, 3), (640, 480), (50, 50)])
@pytest.mark.parametrize("max_side", [None, 64, 50, 500])
def test_thumbnail_size_is_pils(size: tuple[int, int], max_side: int | None) -> None:
    img = Image.new("L", size)
    if max_side:
        img.thumbnail((max_side, max_side))
    assert thumbnail_size(*size, max_side) == img.size


def test_sampled_frame_count_is_the_samplers_rule() -> None:
    assert sampled_frame_count(24, 8.0, 1.0, 10) == 3  # frames 0, 8, 16
    assert sampled_frame_count(25, 8.0, 1.0, 10) == 4  # ... and 24
    assert sampled_frame_count(300, 25.0, 1.0, 10) == 10  # capped
    assert sampled_frame_count(5, 0.0, 1.0, 10) == 5  # no rate: every frame
    assert sampled_frame_count(0, 25.0, 1.0, 10) == 0


@pytest.mark.parametrize(
    ("suffix", "seconds", "fps", "size"),
    [(".mp4", 3.0, 8, (96, 72)), (".avi", 2.0, 5, (64, 48)), (".mkv", 3.0, 8, (96, 72)),
     (".mp4", 12.5, 4, (80, 60)), (".mp4", 1.0, 10, (32, 24))],
)  # fmt: skip
def test_probe_counts_the_frames_the_sampler_keeps(tmp_path: Path, suffix: str, seconds: float, fps: int, size) -> None:
    path = write_clip(tmp_path / f"clip{suffix}", seconds=seconds, fps=fps, size=size)
    for interval, max_frames, max_side in ((1.0, 10, None), (0.5, 10, 40), (1.0, 3, None), (0.1, 10, None)):
        frames = sample_video_frames(path, interval, max_frames)
        plan = probe_frames(str(path), interval, max_frames, max_side)
        expected_size = frames[0].size if not max_side else thumbnail_size(*frames[0].size, max_side)
        assert (plan.count, (plan.width, plan.height)) == (len(frames), expected_size), (interval, max_frames)


def test_probe_of_a_missing_or_broken_file_is_no_frames(tmp_path: Path) -> None:
    assert probe_frames(str(tmp_path / "missing.mp4"), 1.0, 10, None).count == 0
    (tmp_path / "broken.mp4").write_bytes(b"\x00not a video" * 50)
    assert probe_frames(str(tmp_path / "broken.mp4"), 1.0, 10, None).count == 0


def test_input_tokens_are_text_tokens_plus_every_frames_image_tokens(tmp_path: Path) -> None:
    path = write_clip(tmp_path / "clip.mp4", seconds=4.0, fps=6, size=(1024, 768))
    frames = VideoFramesPart(path, interval_s=1.0, max_frames=10)
    req = JudgeRequest(messages=[text_message("system", "Be fair."), user_message("Rate this.", frames)])
    assert request_texts(req) == ["Be fair.", "Rate this."]
    text = sum(count_tokens(["Be fair.", "Rate this."]))
    # 4 frames of 1024 x 768 -> 1024 x 768 (shortest side 768), 2 x 2 tiles -> 765 each
    assert input_tokens([req]) == [text + 4 * 765]
    low = VideoFramesPart(path, interval_s=1.0, max_frames=10, detail="low", max_side=200)
    assert input_tokens([JudgeRequest(messages=[user_message("x", low)])], [7]) == [count_tokens(["x"])[0] + 4 * 85 + 7]


# --------------------------------------------------------------------------------------------- live clues
class LiveJudge:
    def __call__(self, body: dict, attempt: int) -> Reply:
        text = last_user_text(body)
        if text.startswith("Describe the emotional cues"):
            return Reply(text="live clue: a tense voice", completion_tokens=6)
        if text.startswith("Given the following answer"):
            return Reply(text="<step>Step 1: Tense. Step 2: The emotion is anger.</step>", completion_tokens=9)
        if "Rating Requirements" in text:
            n = int(re.search(r"has (\d+) step\(s\)", text).group(1))
            return Reply(text="<score>" + ", ".join(f"Step {i + 1}: 1/1" for i in range(n)) + "</score>")
        return Reply(kind="status", status=400, text="unexpected request")


def test_plan_with_live_clues_has_an_audio_agent(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(hooks.STATE, "memo", LastResult())
    with LoopbackServer(responder=LiveJudge(), expected_api_key=API_KEY) as srv:
        env = {
            "EMO_CACHE_DIR": str(tmp_path / "cache"), "EMO_PROGRESS": "0", "OPENAI_BASE_URL": srv.base_url,
            "OPENAI_API_KEY": API_KEY, "EMO_MME_AUDIO_CLUES": "live", "EMO_AUDIO_MODEL": "audio-model",
        }  # fmt: skip
        docs = hooks.load_task("mme_emotion/sample/IR", env)
        records = [hooks.process_results(d, ["Answer: happy"])["rec_s"] for d in docs]
        before = {p["agent"]: p for p in hooks.plan(records)}
        assert list(before) == ["step", "audio", "judge"] and srv.calls == []
        assert (before["audio"]["model"], before["audio"]["requests"], before["audio"]["to_send"]) == (
            "audio-model", 2, 2,
        )  # fmt: skip
        assert before["judge"]["estimated"] == 2
        hooks.evaluate(records, SimpleNamespace(output_path=str(tmp_path / "out"), log_samples=True))
        sent = {m: sum(1 for c in srv.calls if c.model == m) for m in ("audio-model", "gpt-4o-2024-11-20")}
        assert sent == {"audio-model": before["audio"]["to_send"], "gpt-4o-2024-11-20": before["judge"]["to_send"]}
        after = {p["agent"]: p for p in hooks.plan(records)}
    assert [(a["cached"], a["to_send"], a["estimated"]) for a in after.values()] == [(2, 0, 0)] * 3
    # completion tokens of the cached answers, once per distinct request (two clips, one step prompt)
    assert (after["audio"]["output_tokens_cached"], after["step"]["output_tokens_cached"]) == (2 * 6, 9)
    (summary,) = (tmp_path / "out" / "emo_tasks_judge").glob("*_summary.json")
    data = json.loads(summary.read_text())
    assert list(data["usage"]) == list(data["api_models"]) == ["step", "audio", "judge"]
    assert data["api_models"]["audio"] == {"audio-model": 2}
