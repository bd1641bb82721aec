"""Images and audio reach the server as the OpenAI API expects them."""

from __future__ import annotations

import base64
import io
import wave
from pathlib import Path

from PIL import Image

from judges import AudioPart, ImagePart, JudgeRequest, user_message
from judges.testing import LoopbackServer, Reply, count_media


def _wav_bytes() -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x01" * 800)
    return buf.getvalue()


def test_image_sources_render_as_jpeg_and_hash_alike(tmp_path: Path) -> None:
    img = Image.new("RGB", (40, 30), (10, 200, 30))
    path = tmp_path / "frame.png"
    img.save(path)
    for part in (ImagePart(img), ImagePart(path), ImagePart(path.read_bytes()), ImagePart(lambda: img)):
        rendered = part.render()
        assert rendered["type"] == "image_url"
        url = rendered["image_url"]["url"]
        assert url.startswith("data:image/jpeg;base64,")
        decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
        assert decoded.format == "JPEG" and decoded.size == (40, 30)
    assert ImagePart(path).digest() == ImagePart(path.read_bytes()).digest()
    assert ImagePart(img, max_side=20).render() != ImagePart(img).render()
    small = Image.open(io.BytesIO(base64.b64decode(ImagePart(img, max_side=20).render()["image_url"]["url"][23:])))
    assert max(small.size) == 20


def test_identity_avoids_encoding() -> None:
    def loader() -> Image.Image:
        raise AssertionError("must not be decoded just to compute a cache key")

    part = ImagePart(loader, identity="video-sha:frame0")
    assert len(part.digest()) == 64


def test_media_reaches_the_server(server: LoopbackServer, make_engine) -> None:
    seen: list[dict] = []

    def responder(body: dict, attempt: int) -> Reply:
        seen.append(body)
        return Reply(text="ok")

    server.responder = responder
    frames = [Image.new("RGB", (16, 16), (i * 20, 0, 0)) for i in range(10)]
    request = JudgeRequest(
        [user_message("rate these", *[ImagePart(f) for f in frames], AudioPart(_wav_bytes(), format="wav"))],
        model="judge-model",
    )
    batch = make_engine(server).run([request])
    assert batch[0].ok
    assert count_media(seen[0]) == (10, 1)
    audio = [p for p in seen[0]["messages"][0]["content"] if p["type"] == "input_audio"][0]["input_audio"]
    assert audio["format"] == "wav" and base64.b64decode(audio["data"]).startswith(b"RIFF")
    assert server.calls[0].images == 10


def test_missing_image_file_is_a_counted_failure_naming_the_file(
    server: LoopbackServer, make_engine, tmp_path: Path
) -> None:
    missing = tmp_path / "nope.jpg"
    batch = make_engine(server).run(
        [
            JudgeRequest([user_message("x", ImagePart(missing))], model="m"),
            JudgeRequest([user_message("fine")], model="m"),
        ]
    )
    assert not batch[0].ok and batch[0].error == "invalid_request" and "nope.jpg" in batch[0].detail
    assert batch[1].ok and batch.stats.failures_by_reason == {"invalid_request": 1}
