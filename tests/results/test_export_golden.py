"""Every `emo-tasks export` format writes the same bytes, and says the same things, as the committed manifest
`tests/data/export_golden.json` records.

Why: the export formats are files the benchmark authors' scripts read unchanged, so a refactoring of the export
code must not change one byte of them.  The runs are the deterministic hand-made ones of `tests/results/test_export.py`;
every format is exported through `export.main_export` (the CLI's function) in several variants (model names, a
partial task set, --force, data missing), and the manifest holds, per variant, the sha256 of every file written
(`{variant: {relative file: sha256}}`, so a file added or gone fails too), the exit code and output of those
exports and of the refusals and errors, and the `export` subcommand's description, help texts and choices.

Normalised, because it legitimately varies between machines and over time: in provenance.json only the values of
`date`, `run_dir`, `results_file`, `emo_tasks_version`, `lmms_eval_version` and `generated_by` (replaced in the
text, so every other byte counts); in messages the test's temporary folder.

`EMO_WRITE_GOLDEN=1 python -m pytest tests/results/test_export_golden.py` writes the manifest instead of comparing (only
for an intended change of a format, with the change reviewed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest
from test_export import (
    DATE,
    MME_ROWS,
    MULTIEMO_DOC,
    MVEI_PAIRS,
    PROJECT,
    _jsonl,
    _results,
    make_mme_run,
    make_multiemo_run,
    make_mvei_run,
)

from emo_tasks.results import export

MANIFEST = Path(__file__).parent.parent / "data" / "export_golden.json"
_VARYING = ("date", "run_dir", "results_file", "emo_tasks_version", "lmms_eval_version", "generated_by")
_PROVENANCE_LINE = re.compile(rf'^(  "(?:{"|".join(_VARYING)})": ).*?(,?)$', re.MULTILINE)


def normalised(rel: str, data: bytes) -> bytes:
    """The bytes that must not vary: provenance.json with the values of `_VARYING` replaced, every other file
    as written."""
    if rel != "provenance.json":
        return data
    text, n = _PROVENANCE_LINE.subn(r'\1"<normalised>"\2', data.decode("utf-8"))
    assert n == len(_VARYING), text  # each top-level field once, nothing else
    json.loads(text)
    return text.encode("utf-8")


def file_hashes(out: Path) -> dict[str, str]:
    """Relative POSIX path -> sha256 of every file below `out` (normalised)."""
    found = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        found[rel] = hashlib.sha256(normalised(rel, path.read_bytes())).hexdigest()
    return found


class Exporter:
    """Runs `export.main_export` and records what it says (exit code, stdout, stderr; the temp folder masked)."""

    def __init__(self, root: Path, capsys: pytest.CaptureFixture) -> None:
        self.root, self.capsys = root, capsys
        self.messages: dict[str, str] = {}

    def __call__(self, key: str, run: Path | str, fmt: str, out: Path | str, name: str | None, **kw: Any) -> int:
        self.capsys.readouterr()
        args = Namespace(run=str(run), format=fmt, out=str(out), model_name=name, **kw)
        code = export.main_export(args)
        said = self.capsys.readouterr()
        self.messages[key] = f"exit {code}\nstdout: {said.out}stderr: {said.err}".replace(str(self.root), "<tmp>")
        return code


def _mvei_docs() -> list[dict[str, Any]]:
    return [
        {"pair_id": p[0], "image_name": f"images/{p[0]}.png", "statement": f"s{i}"} for i, p in enumerate(MVEI_PAIRS)
    ]


def _no_data(*a: Any, **k: Any) -> Any:
    raise FileNotFoundError("no data here")


def exports(root: Path, monkeypatch: pytest.MonkeyPatch, run: Exporter) -> dict[str, dict[str, str]]:
    """Every format in its variants: {variant: {file: sha256}}."""
    import emo_tasks.multiemo.registry as multiemo_results
    import emo_tasks.mvei.hooks as mvei_hooks

    files: dict[str, dict[str, str]] = {}

    def ok(key: str, run_dir: Path, fmt: str, name: str | None, **kw: Any) -> None:
        out = root / "out" / key.replace(":", "_")
        assert run(key, run_dir, fmt, out, name, **kw) == 0, run.messages[key]
        files[key] = file_hashes(out)

    mme = make_mme_run(root / "mme_run")
    ok("mme-official", mme, "mme-official", "My Model")
    ok("mme-official:default-name", mme, "mme-official", None)
    subset = {t: PROJECT[t] for t in ("mme_emotion_sample_er_lab", "mme_emotion_sample_fg_er")}
    ok("mme-official:two-tasks", make_mme_run(root / "mme_two", subset), "mme-official", "odd name/ä")
    forced = root / "out" / "mme-official_force"
    assert run("mme-official:force-first", mme, "mme-official", forced, "First") == 0
    ok("mme-official:force", mme, "mme-official", "Second", force=True)

    monkeypatch.setattr(mvei_hooks, "load_task", lambda name, env: _mvei_docs())
    mvei = make_mvei_run(root / "mvei_run")
    ok("mvei-official", mvei, "mvei-official", "m")
    monkeypatch.setattr(mvei_hooks, "load_task", _no_data)
    ok("mvei-official:no-data", mvei, "mvei-official", None)

    ok("multiemo-table", make_multiemo_run(root / "me_run"), "multiemo-table", "m")
    monkeypatch.setattr(multiemo_results, "reference_images", lambda source: {"img1": MULTIEMO_DOC})
    ok("multiemo-table:reference", make_multiemo_run(root / "me_ref", with_doc=False), "multiemo-table", None)
    return files


def refusals(root: Path, monkeypatch: pytest.MonkeyPatch, run: Exporter) -> None:
    """The refusals and errors (their messages land in `run.messages`)."""
    import emo_tasks.multiemo.registry as multiemo_results

    mme = make_mme_run(root / "bad" / "mme")
    mvei = make_mvei_run(root / "bad" / "mvei")
    run("error:format", mme, "csv", root / "x", "m")
    run("error:no-run", root / "nope", "mme-official", root / "x", "m")
    run("error:empty-name", mme, "mme-official", root / "x", " ")
    run("error:mvei-on-mme", mme, "mvei-official", root / "x", "m")
    run("error:multiemo-on-mme", mme, "multiemo-table", root / "x", "m")
    run("error:mme-on-mvei", mvei, "mme-official", root / "x", "m")
    (root / "a-file").write_text("x")
    run("error:out-is-file", mme, "mme-official", root / "a-file", "m")
    run("error:out-below-file", mme, "mme-official", root / "a-file" / "o", "m")
    no_sample_log = make_mvei_run(root / "bad" / "nolog")
    (no_sample_log / f"{DATE}_samples_mvei_sample.jsonl").unlink()
    run("error:no-sample-log", no_sample_log, "mvei-official", root / "x", "m")

    busy = root / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("x")
    run("refused:out-not-empty", mme, "mme-official", busy, "m")
    run("refused:force-foreign", mme, "mme-official", busy, "m", force=True)

    no_log = root / "bad" / "mme_no_log"
    _results(no_log, {"mme_emotion_sample_er_lab": {"rec_s": 1.0}})
    run("refused:mme-no-judge-log", no_log, "mme-official", root / "x", "m")
    offline = [{**r, "status": "offline"} for r in MME_ROWS if r["task"] == "ER-Lab"]
    _jsonl(no_log / "emo_tasks_judge" / "sample_mme_emotion_er_lab_20260101T000000_judge.jsonl", offline)
    run("refused:mme-offline", no_log, "mme-official", root / "x", "m")
    failed = root / "bad" / "mme_failed"
    _results(failed, {"mme_emotion_sample_er_lab": {"rec_s": 1.0}})
    failing = [{**r, "status": "judge_failed"} for r in MME_ROWS if r["task"] == "ER-Lab"]
    _jsonl(failed / "emo_tasks_judge" / "sample_mme_emotion_er_lab_20260101T000000_judge.jsonl", failing)
    run("error:mme-nothing-scored", failed, "mme-official", root / "x", "m")

    other = make_mme_run(root / "bad" / "other")
    results = other / f"{DATE}_results.json"
    data = json.loads(results.read_text())
    data["results"]["mme_emotion_sample_er_lab"]["n_scored,none"] = 1
    results.write_text(json.dumps(data))
    run("refused:another-runs-judge-log", other, "mme-official", root / "x", "m")

    for fmt, task in (("mvei-official", "mvei_sample"), ("multiemo-table", "multiemo_sample")):
        predict = root / "bad" / f"predict_{task}"
        _results(predict, {task: {}})
        run(f"refused:{fmt}-predict-only", predict, fmt, root / "x", "m")
    _jsonl(mvei / f"{DATE}_samples_mvei_sample.jsonl", [{"doc_id": 0, "acc_total": {}}])
    run("error:mvei-malformed-log", mvei, "mvei-official", root / "x", "m")
    lost = make_multiemo_run(root / "bad" / "me_lost", with_doc=False)
    monkeypatch.setattr(multiemo_results, "reference_images", lambda source: {})
    run("error:multiemo-image-not-in-data", lost, "multiemo-table", root / "x", "m")
    monkeypatch.setattr(multiemo_results, "reference_images", _no_data)
    run("error:multiemo-no-data", lost, "multiemo-table", root / "x", "m")
    assert not (root / "x").exists()


def cli_texts() -> dict[str, Any]:
    """The `export` subcommand's description, and per argument its options, help and choices."""
    sub = argparse.ArgumentParser(prog="emo-tasks").add_subparsers()
    parser = export.add_parser(sub)
    texts: dict[str, Any] = {"description": parser.description}
    for action in parser._actions:
        name = action.dest if not action.option_strings else " ".join(action.option_strings)
        texts[name] = {"help": action.help, "choices": list(action.choices) if action.choices else None}
    return texts


def test_exports_are_byte_identical_to_the_golden_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    run = Exporter(tmp_path, capsys)
    got: dict[str, Any] = {"files": exports(tmp_path, monkeypatch, run)}
    refusals(tmp_path, monkeypatch, run)
    got["messages"] = run.messages
    got["cli"] = cli_texts()
    if os.environ.get("EMO_WRITE_GOLDEN") == "1":
        MANIFEST.parent.mkdir(parents=True, exist_ok=True)
        MANIFEST.write_text(json.dumps(got, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
        return
    want = json.loads(MANIFEST.read_text(encoding="utf-8"))
    assert sorted(got["files"]) == sorted(want["files"])
    for variant, hashes in want["files"].items():
        assert got["files"][variant] == hashes, variant
    assert got["messages"] == want["messages"]
    assert got["cli"] == want["cli"]
