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


def prompt_config(hooks_module: str, task: str) -> dict[str, Any]:
    """What lmms-eval records of the task's prompt (`report.PROMPT_FIELDS`) and metadata, read from the task's own
    YAML (and the template it includes) beside `hooks_module`: a VLMEvalKit run asks the task's `doc_to_text` with
    its default kwargs, as lmms-eval does, so `compare` can pair it with an lmms-eval run of the same task."""
    import importlib

    import yaml

    class Tolerant(yaml.SafeLoader):
        """lmms-eval's `!function module.name` tags read as their names."""

    Tolerant.add_multi_constructor("!", lambda loader, tag, node: f"<function {node.value.rsplit('.', 1)[-1]}>")
    folder = Path(importlib.import_module(hooks_module).__file__).parent
    for path in sorted(folder.glob("*.yaml")):
        conf = yaml.load(path.read_text(encoding="utf-8"), Loader=Tolerant) or {}  # noqa: S506 - SafeLoader's
        if conf.get("task") != task:
            continue
        if conf.get("include"):
            base = yaml.load((folder / conf["include"]).read_text(encoding="utf-8"), Loader=Tolerant) or {}  # noqa: S506
            conf = {**base, **conf}
        out = {"description": "", "num_fewshot": 0}
        out.update({k: conf[k] for k in ("doc_to_text", "doc_to_messages", "lmms_eval_specific_kwargs",
                                          "description", "num_fewshot", "metadata") if k in conf})  # fmt: skip
        return out
    raise ValueError(f"no task YAML for {task} in {folder}")


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
