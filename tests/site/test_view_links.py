"""`emo-tasks view` over a run whose images are symbolic links (issue 32, item 2): the site holds the images' bytes as
regular files, never a link, and a thumbnail cache holding a link (as earlier versions left it) is made again.

The run is real: lmms-eval's `--model dummy` on `mvei_sample`, whose data folder (the bundled sample in the run's
EMO_CACHE_DIR) lists small JPEG images that are links into a `blobs/` folder beside them, as the Hugging Face cache
lays out a snapshot (`snapshots/<rev>/img.jpg -> ../../blobs/<sha>`).  lmms-eval logs each image's path as the
model read it (the link): that is what `view` finds in the sample log.  Small JPEGs because a JPEG within the
thumbnail size is placed as it is (hard-linked then, copied now), which is where a link was placed as a link.
Each test points the links as it needs (relative, absolute, or regular files again) and views the one run through
the CLI.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env, run_emo
from test_view_site import site_data

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


class LinkedRun:
    """The lmms-eval run and its data folder; `point(kind)` makes every image a relative link, an absolute link or
    a regular file (the same bytes each time)."""

    def __init__(self, root: Path) -> None:
        from PIL import Image

        from emo_tasks.mvei.sample import sample_file

        self.root, self.cache = root, root / "lmms_cache"
        data_file = sample_file(self.cache)  # the bundled sample, generated as lmms-eval would
        self.data = data_file.parent
        rows = json.loads(data_file.read_text(encoding="utf-8"))
        self.blobs: dict[str, bytes] = {}  # image name -> its JPEG bytes
        for row in rows.values():
            png = self.data / row["image_path"]
            buf = io.BytesIO()
            with Image.open(png) as im:
                im.convert("RGB").save(buf, "JPEG", quality=90)  # 128 x 96: within the thumbnail size
            png.unlink()
            row["image_path"] = row["image_path"][: -len(".png")] + ".jpg"
            self.blobs[row["image_path"]] = buf.getvalue()
        data_file.write_text(json.dumps(rows, indent=1), encoding="utf-8")
        self.point("relative")
        self.out = root / "run"
        cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", "response=Correct.", "--tasks",
               "mvei_sample", "--batch_size", "1", "--output_path", str(self.out), "--log_samples"]  # fmt: skip
        proc = subprocess.run(cmd, env=cli_env(self.cache), capture_output=True, text=True, timeout=900, cwd=root)
        assert list(self.out.rglob("*_samples_mvei_sample.jsonl")), proc.stdout[-2000:] + proc.stderr[-4000:]

    def sha(self, image: str) -> str:
        return hashlib.sha256(self.blobs[image]).hexdigest()

    def point(self, kind: str) -> None:
        """Every image of the data folder as `kind`: "relative" (`images/x.jpg -> ../blobs/<sha>`), "absolute" (to
        the blob's absolute path) or "file" (the bytes themselves, the blobs gone)."""
        blobs = self.data / "blobs"
        shutil.rmtree(blobs, ignore_errors=True)
        if kind != "file":
            blobs.mkdir()
        for image, data in self.blobs.items():
            path = self.data / image
            path.unlink(missing_ok=True)
            if kind == "file":
                path.write_bytes(data)
                continue
            (blobs / self.sha(image)).write_bytes(data)
            path.symlink_to(f"../blobs/{self.sha(image)}" if kind == "relative" else blobs / self.sha(image))

    def logged_media(self) -> list[str]:
        """The image paths the sample log names (lmms-eval also logs the doc's portable name, `images/x.jpg`)."""
        log = next(self.out.rglob("*_samples_mvei_sample.jsonl"))
        media = [m for line in log.read_text().splitlines() for m in json.loads(line)["input_media"]]
        return [m for m in media if os.path.isabs(m)]


@pytest.fixture(scope="module")
def linked(tmp_path_factory: pytest.TempPathFactory) -> LinkedRun:
    return LinkedRun(tmp_path_factory.mktemp("view_links"))


def view(linked: LinkedRun, site: Path, cache: Path) -> subprocess.CompletedProcess:
    """The view with a cache of its own (not the run's, which holds the bundled sample): EMO_MVEI_FILE names the
    run's data, so its folder is the benchmark's data a site may show (docs/view.md, What a site may contain)."""
    env = cli_env(cache, EMO_MVEI_FILE=str(linked.data / "mvei.json"))
    return run_emo(env, "view", str(linked.out), "--out", str(site))


def check_site(linked: LinkedRun, site: Path) -> None:
    """Every file of the site is a regular file; every image of the run is shown by its own bytes."""
    links = [Path(top, n) for top, dirs, files in os.walk(site) for n in dirs + files if Path(top, n).is_symlink()]
    assert links == [], links
    _, samples = site_data(site)
    media = [m for r in samples["r1/mvei_sample"] for m in r["media"]]
    shown = {m["text"]: m.get("thumb") for m in media if os.path.isabs(m["text"])}
    assert len(shown) == len(linked.blobs) == 16
    for entry, thumb in shown.items():
        image = Path(entry).relative_to(linked.data).as_posix()
        assert thumb == f"media/{linked.sha(image)}.jpg", (entry, thumb)
        assert (site / thumb).read_bytes() == linked.blobs[image]


def no_links_in(cache: Path) -> None:
    entries = list((cache / "view_thumbs").iterdir())
    assert entries and not [p for p in entries if p.is_symlink() or not p.is_file()], entries


def test_the_run_logged_the_links(linked: LinkedRun) -> None:
    media = linked.logged_media()
    assert len(media) == 16 and all(Path(m).is_symlink() for m in media)  # what view is given: the links


def test_relative_links_as_the_hub_cache_lays_them_out(linked: LinkedRun, tmp_path: Path) -> None:
    """Before: `images/x.jpg -> ../blobs/<sha>` was hard-linked as a link into the cache and the site, where it
    points at nothing: exit 3, "No such file or directory (.emo-view-.../media/<sha>.jpg)"."""
    linked.point("relative")
    proc = view(linked, tmp_path / "site", tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    check_site(linked, tmp_path / "site")
    no_links_in(tmp_path / "cache")


def test_absolute_links_never_become_links_in_the_site(linked: LinkedRun, tmp_path: Path) -> None:
    """Before: the site held symlinks to the blobs' absolute paths (broken once zipped or served elsewhere, and
    naming a local path)."""
    linked.point("absolute")
    proc = view(linked, tmp_path / "site", tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    check_site(linked, tmp_path / "site")
    no_links_in(tmp_path / "cache")
    for target in {os.readlink(m) for m in linked.logged_media()}:
        assert os.path.isabs(target)  # the links were absolute ones


def test_a_later_site_over_the_same_bytes_after_the_links_are_gone(linked: LinkedRun, tmp_path: Path) -> None:
    """A site over absolute links, then the blobs are gone and the images are plain files with the same bytes: the
    second site (same thumbnail cache) is written.  Before: the cache held the links, now broken: exit 3 until the
    cache was cleared."""
    cache = tmp_path / "cache"
    linked.point("absolute")
    assert view(linked, tmp_path / "first", cache).returncode == 0
    linked.point("file")
    proc = view(linked, tmp_path / "second", cache)
    assert proc.returncode == 0, proc.stderr
    check_site(linked, tmp_path / "second")
    no_links_in(cache)


def test_a_cache_entry_that_is_a_link_is_made_again(linked: LinkedRun, tmp_path: Path) -> None:
    """A thumbnail cache as earlier versions left it: an entry that is a broken link, one that is a link to the very
    image.  Both are made again as regular files holding the image's bytes, and the site holds no link."""
    linked.point("file")
    thumbs = tmp_path / "cache" / "view_thumbs"
    thumbs.mkdir(parents=True)
    first, second = sorted(linked.blobs)[:2]
    (thumbs / f"{linked.sha(first)}.jpg").symlink_to(tmp_path / "gone" / "blob")
    (thumbs / f"{linked.sha(second)}.jpg").symlink_to(linked.data / second)
    proc = view(linked, tmp_path / "site", tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    check_site(linked, tmp_path / "site")
    no_links_in(tmp_path / "cache")
    for image in (first, second):
        assert (thumbs / f"{linked.sha(image)}.jpg").read_bytes() == linked.blobs[image]
