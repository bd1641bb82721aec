"""Run lmms-eval's CLI while recording what a Qwen2.5-VL model class actually hands to the model.

    python tests/tools/run_lmms_probe.py <probe.jsonl> <lmms-eval args...>

Before `lmms_eval.__main__.cli_evaluate()` runs with the remaining arguments, two class-level wrappers are put in:

* `Qwen2_5_VLProcessor.__call__` appends one JSON line `{"kind": "processor", ...}` per call: the number of
  images and videos passed in, `image_grid_thw` / `video_grid_thw` (values), the pixel tensor shapes, the prompt
  length (characters and tokens) and, read from the calling frame of lmms-eval's `generate_until`, the model class
  module, task, doc ids, the doc's own `video_path` / `image_path` and the visuals `doc_to_visual` returned;
* `Qwen2_5_VLForConditionalGeneration.generate` appends `{"kind": "generate", "max_new_tokens": ..., "new_tokens":
  ...}` per call.

Everything read from frames is best effort (`None` when absent); the wrappers never change the call's result.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any

PROBE_ENV = "EMO_QWEN_PROBE"


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return type(value).__name__


def _write(path: str, record: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(_jsonable(record)) + "\n")


def _count(items: Any) -> int:
    if items is None:
        return 0
    if isinstance(items, (list, tuple)):
        return len(items)
    return 1


def _shape(tensor: Any) -> list[int] | None:
    return list(tensor.shape) if hasattr(tensor, "shape") else None


def _describe_visual(visual: Any) -> Any:
    if isinstance(visual, (str, os.PathLike)):
        return os.fspath(visual)
    if isinstance(visual, dict):
        return {k: (v if isinstance(v, (str, int, float)) else type(v).__name__) for k, v in visual.items()}
    return type(visual).__name__


def _caller_context(frame: Any) -> dict[str, Any]:
    """Model class, task and docs from lmms-eval's `generate_until` frame (batch of doc ids, one task)."""
    found = frame
    while found is not None and found.f_code.co_name not in {"generate_until", "generate_until_multi_round"}:
        found = found.f_back
    if found is None:
        return {"caller": None}
    local = found.f_locals
    out: dict[str, Any] = {"caller": found.f_globals.get("__name__")}
    try:
        doc_ids = list(local.get("doc_id") or local.get("batched_doc_id") or [])
        task = local.get("task") or local.get("batched_task")
        split = local.get("split") or local.get("batched_split")
        tasks = [task] * len(doc_ids) if isinstance(task, str) else list(task or [])
        splits = [split] * len(doc_ids) if isinstance(split, str) else list(split or [])
        out["task"] = tasks
        out["doc_id"] = doc_ids
        model = local.get("self")
        docs = []
        if model is not None:
            docs = [model.task_dict[t][s][i] for t, s, i in zip(tasks, splits, doc_ids, strict=True)]
        out["doc_video_path"] = [d.get("video_path") for d in docs]
        out["doc_image_path"] = [d.get("image_path") for d in docs]
    except Exception as exc:  # noqa: BLE001 - best effort
        out["context_error"] = f"{type(exc).__name__}: {exc}"
    visuals = local.get("visual_list")  # simple class: doc_to_visual's return per doc
    if visuals is None and "videos" in local:  # chat class: media extracted from doc_to_messages
        visuals = [list(local.get("visuals") or []) + list(local.get("videos") or [])]
    if visuals is not None:
        out["visuals"] = [[_describe_visual(v) for v in (vs or [])] for vs in visuals]
    return out


def install(probe_path: str) -> None:
    from transformers import Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor

    original_call = Qwen2_5_VLProcessor.__call__
    original_generate = Qwen2_5_VLForConditionalGeneration.generate

    @functools.wraps(original_call)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original_call(self, *args, **kwargs)
        try:
            text = kwargs.get("text", args[1] if len(args) > 1 else None)
            texts = [text] if isinstance(text, str) else list(text or [])
            images = kwargs.get("images", args[0] if args else None)
            videos = kwargs.get("videos")
            record: dict[str, Any] = {
                "kind": "processor",
                "n_images": _count(images),
                "n_videos": _count(videos),
                "image_grid_thw": result.get("image_grid_thw"),
                "video_grid_thw": result.get("video_grid_thw"),
                "pixel_values": _shape(result.get("pixel_values")),
                "pixel_values_videos": _shape(result.get("pixel_values_videos")),
                "video_input_shapes": [_shape(v) for v in videos] if isinstance(videos, (list, tuple)) else None,
                "text_chars": [len(t) for t in texts],
                "input_tokens": _shape(result.get("input_ids")),
            }
            record.update(_caller_context(sys._getframe(1)))
            _write(probe_path, record)
        except Exception as exc:  # noqa: BLE001 - the probe must never break the run
            _write(probe_path, {"kind": "probe_error", "error": f"{type(exc).__name__}: {exc}"})
        return result

    @functools.wraps(original_generate)
    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original_generate(self, *args, **kwargs)
        try:
            input_ids = kwargs.get("input_ids")
            prompt = input_ids.shape[1] if input_ids is not None else None
            new = out.shape[1] - prompt if (prompt is not None and hasattr(out, "shape")) else None
            _write(
                probe_path,
                {
                    "kind": "generate",
                    "max_new_tokens": kwargs.get("max_new_tokens"),
                    "do_sample": kwargs.get("do_sample"),
                    "new_tokens": new,
                },
            )
        except Exception as exc:  # noqa: BLE001
            _write(probe_path, {"kind": "probe_error", "error": f"{type(exc).__name__}: {exc}"})
        return out

    Qwen2_5_VLProcessor.__call__ = call
    Qwen2_5_VLForConditionalGeneration.generate = generate


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        sys.exit("usage: run_lmms_probe.py <probe.jsonl> <lmms-eval args...>")
    probe_path = os.path.abspath(argv[1])
    os.environ[PROBE_ENV] = probe_path
    install(probe_path)
    sys.argv = ["lmms-eval", *argv[2:]]
    from lmms_eval.__main__ import cli_evaluate

    cli_evaluate()


if __name__ == "__main__":
    main(sys.argv)
