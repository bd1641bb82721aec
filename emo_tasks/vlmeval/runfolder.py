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


def prompt_config(task: str) -> dict[str, Any]:
    """What lmms-eval records of the task's prompt (`report.PROMPT_FIELDS`) and its metadata, from the task's YAML
    (`common.task_configs`): a VLMEvalKit run asks the task's `doc_to_text` with its default kwargs, as lmms-eval
    does, so `compare` can pair it with an lmms-eval run of the same task.  A `!function` is written as lmms-eval
    writes it ("<function name>", as `compare` reads it without the address)."""
    from emo_tasks.common import FunctionRef, task_configs
    from emo_tasks.report import PROMPT_FIELDS

    conf = task_configs().get(task)
    if conf is None:
        raise ValueError(f"no task YAML for {task} under emo_tasks/")
    out: dict[str, Any] = {"description": "", "num_fewshot": 0}  # lmms-eval's defaults
    for key in (*PROMPT_FIELDS, "metadata"):
        if key in conf:
            value = conf[key]
            out[key] = f"<function {value.rsplit('.', 1)[-1]}>" if isinstance(value, FunctionRef) else value
    return out


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
    when: float | None = None,
) -> Path:
    """Write the results file and the sample log of one task into `folder`; returns the results file.  `host`:
    what the results say of the host run (VLMEvalKit's files, the generation settings known, flags).  `when`: the
    time the files are named by (the prediction file's mtime: evaluating the same predictions again rewrites the
    same run instead of adding a second one to the folder); now when not given."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = (datetime.fromtimestamp(when) if when is not None else datetime.now()).strftime("%Y%m%d_%H%M%S")
    n = len(lines)
    results = {
        "results": {task: {"alias": task, **{f"{k},none": v for k, v in metrics.items()}}},
        "configs": {task: {"task": task, **config}},
        "versions": {task: (config.get("metadata") or {}).get("version")},
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
