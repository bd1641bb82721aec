"""What a site may contain (issue 42, item 5): a run folder is untrusted input (a leaderboard maintainer views runs
others sent), so `emo-tasks view` places media only from inside the run folder (after resolving links) or from the
benchmark's own data (the bundled sample, the data folder the environment names, the Hub cache's repository of the
dataset, MME-Emotion's frames written by the viewer), always as copies; anything else is named as text, marked "not
shown: outside the run and the data", and counted (one line on stderr, and in the overview).

Fast: the hand-made runs of tests/site/test_view_site.py, viewed in process through the CLI.  Each test checks the
whole site tree: no symbolic link, every file with one link (a copy, never a hard link to the user's file), no
file holding a private file's bytes or its thumbnail.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from conftest import with_mme_sample
from test_view_site import ER_LAB, mme_run, mvei_run, one_line, site_data, view

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # bpe_openai's own use of importlib.resources

NOTICE = "not shown: outside the run and the data"


def jpeg(path: Path, color: str, size: tuple[int, int] = (64, 48)) -> bytes:
    """A small JPEG at `path` (within the thumbnail size: a site would hold its very bytes); its bytes."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path, "JPEG", quality=90)
    return path.read_bytes()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_tree(site: Path, private: list[bytes]) -> None:
    """No link of any kind in the site, and nothing of the private files: neither their bytes nor a thumbnail
    named by their content."""
    assert site.is_dir()
    for path in site.rglob("*"):
        st = os.lstat(path)
        assert not stat.S_ISLNK(st.st_mode), f"a symbolic link in the site: {path}"
        if stat.S_ISREG(st.st_mode):
            assert st.st_nlink == 1, f"{path} shares its file with another name (a hard link): {st.st_nlink}"
            data = path.read_bytes()
            assert all(data != p for p in private), f"{path} holds a private file's bytes"
    for p in private:
        assert not (site / "media" / f"{sha(p)}.jpg").exists()


def test_mvei_media_only_from_the_run_and_the_data_as_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants
    from PIL import Image

    from emo_tasks.mvei.sample import sample_file

    home = tmp_path / "home"  # the maintainer's own files: never in a site
    private = jpeg(home / "private.jpg", "red")
    Image.new("RGB", (800, 600), "purple").save(home / "private2.png")
    private2 = (home / "private2.png").read_bytes()
    # the benchmark's data: EMO_DATA_ROOT/mvei, the Hub cache's repository (a snapshot of links into its blobs),
    # the bundled sample the package generates
    data = tmp_path / "data"
    monkeypatch.setenv("EMO_DATA_ROOT", str(data))
    from_data = jpeg(data / "mvei" / "images" / "d0.jpg", "green")
    hub = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    repo = hub / "datasets--wudq--MVEI"
    from_hub = jpeg(repo / "blobs" / "0123abcd", "blue")
    snap = repo / "snapshots" / "rev1" / "images" / "h.jpg"
    snap.parent.mkdir(parents=True)
    snap.symlink_to("../../../blobs/0123abcd")
    sample_data = sample_file(Path(os.environ["EMO_CACHE_DIR"]))
    sample_png = sorted((sample_data.parent / "images").glob("*.png"))[0]
    # the run: its own image, a link leading out of it, an absolute path and a '..' path out of it
    run = tmp_path / "run"
    own = jpeg(run / "images" / "own.jpg", "yellow")
    media_of = {
        0: ["leak.jpg", "images/own.jpg"],
        1: [str(home / "private2.png")],
        2: ["../home/private.jpg", str(data / "mvei" / "images" / "d0.jpg")],
        3: [str(snap), str(sample_png)],
    }
    mvei_run(run, media_of=media_of)
    (run / "leak.jpg").symlink_to(home / "private.jpg")

    code, out, err = view(capsys, run, "--out", tmp_path / "site")
    assert code == 0, err
    assert one_line(err) == (
        "emo-tasks view: 3 media files not shown: outside the run folder and the benchmark's data "
        "(docs/view.md: What a site may contain)"
    )
    assert ", 4 thumbnails;" in out
    site = tmp_path / "site"
    check_tree(site, [private, private2])
    overview, samples = site_data(site)
    assert overview["media_not_shown"] == 3 and overview["runs"][0]["media_not_shown"] == 3
    recs = samples["r1/mvei_sample"]
    shown = {m["text"]: m for r in recs for m in r["media"]}
    for entry in ("leak.jpg", str(home / "private2.png"), "../home/private.jpg"):
        assert shown[entry] == {"text": entry, "outside": True}, shown[entry]
    placed = {"images/own.jpg": own, str(data / "mvei" / "images" / "d0.jpg"): from_data, str(snap): from_hub}
    for entry, content in placed.items():  # small JPEGs: their very bytes, copied
        assert shown[entry] == {"thumb": f"media/{sha(content)}.jpg", "text": entry}
        assert (site / "media" / f"{sha(content)}.jpg").read_bytes() == content
    assert shown[str(sample_png)]["thumb"] == f"media/{sha(sample_png.read_bytes())}.jpg"
    for source in (run / "images" / "own.jpg", data / "mvei" / "images" / "d0.jpg", repo / "blobs" / "0123abcd"):
        assert os.stat(source).st_nlink == 1, f"{source} was hard-linked"  # neither into the site nor the cache

    # a second site takes the thumbnails from the cache: copies again, never links to the cache's files
    code, _, err = view(capsys, run, "--out", tmp_path / "site2")
    assert code == 0, err
    check_tree(tmp_path / "site2", [private, private2])
    assert sorted(p.name for p in (tmp_path / "site2" / "media").iterdir()) == sorted(
        p.name for p in (site / "media").iterdir()
    )


def test_a_run_with_nothing_outside_prints_no_notice(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "run"
    own = jpeg(run / "images" / "own.jpg", "yellow")
    mvei_run(run, media_of={0: ["images/own.jpg"]})
    code, out, err = view(capsys, run, "--out", tmp_path / "site")
    assert code == 0 and err == "", err
    check_tree(tmp_path / "site", [])
    overview, _ = site_data(tmp_path / "site")
    assert overview["media_not_shown"] == 0
    assert (tmp_path / "site" / "media" / f"{sha(own)}.jpg").read_bytes() == own


def test_mme_media_and_frames_only_from_the_data(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """An MME-Emotion judge log naming an image or a video outside the data by its `video_id`: the image is not
    placed, and no frame of the video is made (the frames come only from the data's own rows)."""
    from judges.frames import render_stats

    cache = with_mme_sample(Path(os.environ["EMO_CACHE_DIR"]))
    home = tmp_path / "home"
    private = jpeg(home / "private.jpg", "red")
    clip = sorted((cache / "samples").rglob("*.mp4"))[0]
    shutil.copyfile(clip, home / "private.mp4")
    run = mme_run(tmp_path / "mme")
    log = next((run / "emo_tasks_judge").glob("*_judge.jsonl"))
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    rows[0]["video_id"], rows[1]["video_id"] = str(home / "private.jpg"), "../../home/private.mp4"
    (run / "v.mp4").symlink_to(home / "private.mp4")
    rows[2]["video_id"] = "v.mp4"  # a link in the run to the video: not in the data either
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))

    decodes = render_stats().get("decodes", 0)
    code, _, err = view(capsys, run, "--out", tmp_path / "site")
    assert code == 0, err
    assert one_line(err).startswith("emo-tasks view: 1 media file not shown: outside the run folder")
    check_tree(tmp_path / "site", [private, (home / "private.mp4").read_bytes()])
    assert render_stats().get("decodes", 0) == decodes  # no video decoded
    assert not list((cache / "view_frames").rglob("*.jpg"))  # no frame written
    _, samples = site_data(tmp_path / "site")
    recs = samples[f"r1/{ER_LAB}"]
    assert recs[0]["media"] == [{"text": str(home / "private.jpg"), "outside": True}]
    assert recs[1]["media"] == [{"text": "../../home/private.mp4"}]  # a video is text, never placed
    assert all("not in the task's data" in r["details"]["frames"] for r in recs[:3])
