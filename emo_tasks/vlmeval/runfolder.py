"""An lmms-eval-shaped run folder written from a VLMEvalKit evaluation: `<stamp>_results.json` and
`<stamp>_samples_<task>.jsonl` as lmms-eval 0.7.3 writes them (the fields our readers use), so every `emo-tasks`
tool reads a VLMEvalKit run as it reads an lmms-eval one.  Why a folder per dataset: a folder holding several
results files needs --run in every tool; one evaluation is one run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from emo_tasks.common import atomic_write_text

#: Where beside VLMEvalKit's prediction file the run folder goes: `<its folder>/emo_tasks/<dataset>/`.
FOLDER = "emo_tasks"


def run_dir(eval_file: str | Path, dataset: str) -> Path:
    return Path(eval_file).resolve().parent / FOLDER / dataset


def write_run(
    folder: Path,
    task: str,
    metrics: Mapping[str, Any],
    lines: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
    model: str,
    host: Mapping[str, Any],
) -> Path:
    """Write the results file and the sample log of one task into `folder`; returns the results file.  `host`:
    what the results say of the host run (VLMEvalKit's files, the generation settings known, flags)."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
    n = len(lines)
    results = {
        "results": {task: {"alias": task, **{f"{k},none": v for k, v in metrics.items()}}},
        "configs": {task: {"task": task, **config}},
        "versions": {task: config.get("version", 0.1)},
        "n-samples": {task: {"original": n, "effective": n}},
        "config": {"model": "vlmevalkit", "model_args": f"model={model}"},
        "date": stamp,
        "emo_tasks_vlmeval": dict(host),
    }
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    atomic_write_text(folder / f"{stamp}_samples_{task}.jsonl", text)
    out = folder / f"{stamp}_results.json"
    atomic_write_text(out, json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return out
