"""Videos in containers some lmms-eval model classes do not take as video are handed over as a cached .mp4."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from emo_tasks.common import DataError
from emo_tasks.mme_emotion import hooks
from emo_tasks.mme_emotion.remux import model_ready_path
from emo_tasks.mme_emotion.sample import write_clip
from judges.media import sample_video_frames


def _streams(path: str) -> list[str]:
    with av.open(path) as c:
        return [f"{s.type}:{s.codec_context.name}" for s in c.streams]


def _webm(path: Path) -> Path:
    with av.open(str(path), "w") as c:
        vs = c.add_stream("libvpx", rate=8)
        vs.width, vs.height, vs.pix_fmt = 64, 48, "yuv420p"
        for i in range(24):
            for pk in vs.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), i * 10, np.uint8), format="rgb24")):
                c.mux(pk)
        for pk in vs.encode():
            c.mux(pk)
    return path


def test_mkv_is_stream_copied_to_a_cached_mp4(tmp_path: Path) -> None:
    src = write_clip(tmp_path / "clip.mkv")
    out = model_ready_path(str(src), cache_dir=tmp_path / "cache")
    assert out.endswith(".mp4") and Path(out).parent == tmp_path / "cache" / "remux"
    assert _streams(out) == ["video:h264", "audio:aac"] == _streams(str(src))  # copied, not re-encoded
    assert len(sample_video_frames(out)) == len(sample_video_frames(src)) == 3
    mtime = Path(out).stat().st_mtime_ns
    assert model_ready_path(str(src), cache_dir=tmp_path / "cache") == out
    assert Path(out).stat().st_mtime_ns == mtime  # reused, not redone


def test_webm_that_mp4_cannot_hold_is_transcoded_keeping_its_frame_rate(tmp_path: Path) -> None:
    out = model_ready_path(str(_webm(tmp_path / "w.webm")), cache_dir=tmp_path / "cache")
    assert _streams(out) == ["video:h264"]
    assert len(sample_video_frames(out)) == 3  # 3 s at 8 fps, one frame per second


def test_portable_containers_and_the_switch_keep_the_original(tmp_path: Path, monkeypatch) -> None:
    for name in ("a.mp4", "b.avi"):
        src = write_clip(tmp_path / name)
        assert model_ready_path(str(src), cache_dir=tmp_path / "cache") == str(src)
    mkv = write_clip(tmp_path / "c.mkv")
    assert model_ready_path(str(mkv), cache_dir=tmp_path / "cache", enabled=False) == str(mkv)
    monkeypatch.setenv("EMO_VIDEO_REMUX", "0")  # doc_to_visual reads the switch through the settings
    assert hooks.doc_to_visual({"video_path": str(mkv)}) == [str(mkv)]
    assert not (tmp_path / "cache").exists()


def test_doc_to_visual_hands_models_an_mp4_and_names_unconvertible_files(tmp_path: Path) -> None:
    mkv = write_clip(tmp_path / "d.mkv")
    (visual,) = hooks.doc_to_visual({"video_path": str(mkv)})
    assert visual.endswith(".mp4") and Path(visual).is_file()
    bad = tmp_path / "bad.mkv"
    bad.write_bytes(b"\x1a\x45\xdf\xa3" + b"\x00" * 64)
    with pytest.raises(DataError, match=str(bad)):
        model_ready_path(str(bad), cache_dir=tmp_path / "cache")
