"""Each sample-log row counts once: a line lmms-eval's sample log holds twice (an appended or joined log) is an
error naming the lines or the unit, never a silent winner; the report turns it into a note and reports no CIs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from emo_tasks.common import DataError
from emo_tasks.datafiles import read_sample_log
from emo_tasks.multiemo import hooks as multiemo_hooks
from emo_tasks.multiemo.data import EMOTIONS
from emo_tasks.multiemo.registry import images_of
from emo_tasks.mvei import hooks as mvei_hooks
from emo_tasks.mvei.registry import pair_lines, sample_values
from emo_tasks.results.reader import load_run
from emo_tasks.results.report import run_notes

STAMP = "20250101_000000"


def _mvei_line(doc_id: int, pair_id: str) -> dict:
    doc = {"pair_id": pair_id, "dimension": "scene context", "label": "correct", "data_source": "sample"}
    return {"doc_id": doc_id, **mvei_hooks.process_results(doc, [["Correct", "Correct", "Incorrect"]])}


def _mvei_run(tmp_path: Path, lines: list[dict]) -> tuple[Path, Path]:
    """A run folder with an MVEI results file and its sample log, the lines written in the order given."""
    run = tmp_path / "run"
    run.mkdir()
    (run / f"{STAMP}_results.json").write_text(json.dumps({"results": {"mvei_sample": {"acc_total,none": 100.0}}}))
    log = run / f"{STAMP}_samples_mvei_sample.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run, log


def test_a_doc_id_on_two_lines_is_an_error_naming_the_file_and_both_lines(tmp_path: Path) -> None:
    lines = [_mvei_line(0, "p0"), _mvei_line(1, "p1"), _mvei_line(2, "p2")]
    _, log = _mvei_run(tmp_path, [*lines, lines[1]])
    log.write_text(log.read_text().replace("\n", "\n\n", 1))  # a blank line: editor numbering, lines 3 and 5
    with pytest.raises(DataError, match=rf"^{re.escape(str(log))} lines 3 and 5: doc_id 1 is logged twice"):
        read_sample_log(log)
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert read_sample_log(log) == lines  # each doc once: read as it is


def test_a_unit_on_two_lines_is_an_error_naming_it() -> None:
    with pytest.raises(DataError, match="pair_id 'p1' is on two lines"):
        pair_lines([_mvei_line(0, "p1"), _mvei_line(1, "p2"), _mvei_line(2, "p1")])
    with pytest.raises(DataError, match="pair_id 'p1'"):
        sample_values([_mvei_line(0, "p1"), _mvei_line(1, "p1")])

    reference = {"img": {"votes": [2, 0, 14, 6, 0, 3, 0, 0], "n_annotators": 20, "original_label": "awe"}}
    lines = []
    for emotion in EMOTIONS:
        doc = {"image_id": "img", "emotion": emotion, "image_path": "x.png", "data_source": "benchmark"}
        lines.append({"doc_id": len(lines), **multiemo_hooks.process_results(doc, ["Score: 40. Reason: colours."])})
    assert len(images_of(lines, reference=lambda source: reference)["img"]["lines"]) == 8
    twice = [*lines, {**lines[2], "doc_id": len(lines)}]
    with pytest.raises(DataError, match=f"image_id 'img', emotion '{EMOTIONS[2]}' is on two lines"):
        images_of(twice, reference=lambda source: reference)


def test_the_report_notes_the_duplicate_and_reads_no_values(tmp_path: Path) -> None:
    lines = [_mvei_line(0, "p0"), _mvei_line(1, "p1")]
    run_dir, log = _mvei_run(tmp_path, [*lines, lines[0]])
    run = load_run(run_dir)
    assert "mvei_sample" not in run.samples
    (note,) = [n for n in run_notes(run) if "per-sample" in n]
    assert note.startswith(f"mvei_sample: could not read per-sample values from {log.name} (DataError(")
    assert "lines 1 and 3: doc_id 0 is logged twice" in note and note.endswith("); no CIs")
