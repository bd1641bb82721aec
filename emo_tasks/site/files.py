"""The site's files: JSON made safe to load as a `<script>`, secrets kept out, the staging folder and `--force`.

Why scripts: a page opened from `file://` may not fetch() or XHR other files, but it may load `<script src>`
files; each data file is one call `emoSite.receive(name, <JSON>)`.  Model and judge text is hostile input, so the
JSON is written ASCII-only with `<`, `>` and `&` escaped (`</script>` cannot end the script, `<!--` cannot open a
comment), U+2028/U+2029 escaped (ensure_ascii does it) and lone surrogates replaced by U+FFFD; NaN and infinities
become null (JSON has neither).

Secrets: results files record `model_args` as the user typed them (`api_key=...`, a URL with a password), and
model output may repeat an environment variable; every string the site writes goes through `redact`.

The folder: `--out` must be new or empty; `--force` replaces an earlier site there by removing exactly the files
its marker (`emo-site.json`) lists, and refuses when anything else is there.  The site is written into a hidden
folder beside `--out` and moved into place once complete, as `emo-tasks export` does (`emo_tasks.results.export`, whose
folder checks are reused).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from emo_tasks.results.export import ExportError, ExportRefused, check_out, files_under, remove_listed
from emo_tasks.results.redact import MASK, Redactor  # noqa: F401 - re-exported for the site

MARKER = "emo-site.json"
SCHEMA = "emo-tasks-site/1"

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(obj: Any, redact: Redactor) -> Any:
    """`obj` as JSON-ready data: strings (keys too) redacted and lone surrogates replaced, NaN/inf as None, tuples
    as lists, anything else (a Path, a set) as its text."""
    if isinstance(obj, str):
        return redact(_SURROGATE.sub("\ufffd", obj))
    if obj is None or isinstance(obj, bool | int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {clean(str(k), redact): clean(v, redact) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean(v, redact) for v in obj]
    return clean(str(obj), redact)


def script_json(obj: Any) -> str:
    """JSON (already `clean`) that is safe inside a script file and inside `<script>` in HTML: ASCII only, with
    `<`, `>` and `&` as \\u escapes (they occur in JSON only inside strings, where the escape means the same)."""
    text = json.dumps(obj, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def write_script(path: Path, name: str, data: Any, redact: Redactor) -> int:
    """One data file: `emoSite.receive(name, data);`; returns its size in bytes."""
    text = f"emoSite.receive({script_json(name)},{script_json(clean(data, redact))});\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="ascii")
    return len(text)


# ------------------------------------------------------------------------------------------------ the folder
def earlier_site(out: Path) -> list[str] | None:
    """The files an earlier site in `out` lists in its marker (relative POSIX paths); None without a readable one."""
    try:
        listed = json.loads((out / MARKER).read_text(encoding="utf-8")).get("files")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None
    return sorted(f for f in listed if isinstance(f, str)) if isinstance(listed, list) else None


def check_target(out: Path, force: bool) -> list[str]:
    """What may be removed from `out` before the new site goes there ([] when it is new or empty).  Refused (exit
    2) when it is not empty and `force` is not given, or when it holds a file the earlier site did not list."""
    present = files_under(out) if out.is_dir() else []
    if not present:
        return []
    if not force:
        raise ExportRefused(f"--out {out} is not empty; use --force to replace the earlier site in it, or choose "
                            "a new folder")  # fmt: skip
    listed = earlier_site(out)
    others = present if listed is None else sorted(set(present) - set(listed))
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise ExportRefused(f"--out {out} holds files no `emo-tasks view` wrote ({shown}); --force only replaces an "
                            "earlier site: move them away or choose an empty or new folder")  # fmt: skip
    return present


def write_marker(stage: Path, generated_by: str, runs: list[str]) -> list[str]:
    """The marker listing every file of the site (itself included): what a later `--force` removes."""
    files = sorted({*files_under(stage), MARKER})
    marker = {"schema": SCHEMA, "generated_by": generated_by, "runs": runs, "files": files}
    (stage / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    return files


@contextlib.contextmanager
def staged(out: Path, force: bool) -> Iterator[Path]:
    """A hidden folder beside `out` to write the site into; on success it replaces `out` (after removing the
    earlier site's files, checked again now), on any failure it is deleted and `out` is left as it was."""
    check_out(out)
    out = out.resolve() if out.is_symlink() else out
    check_target(out, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.parent / f".emo-view-{secrets.token_hex(6)}"
    try:
        stage.mkdir()
        yield stage
        remove_listed(out, check_target(out, force))
        if not out.exists() or not any(out.iterdir()):
            os.replace(stage, out)  # new or empty: the site appears whole
            return
        for rel in files_under(stage):  # only empty folders of the earlier site are left: merge into them
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / rel, out / rel)
    except OSError as exc:
        raise ExportError(f"--out {out}: {exc.strerror or exc} ({exc.filename or out})") from exc
    finally:
        shutil.rmtree(stage, ignore_errors=True)
