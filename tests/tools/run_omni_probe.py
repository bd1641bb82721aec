"""Run lmms-eval's CLI while recording what a Qwen-Omni model class hands to its processor and to `generate`.

    python tests/tools/run_omni_probe.py <probe.jsonl> <lmms-eval args...>

Class-level wrappers, put in before `lmms_eval.__main__.cli_evaluate()` runs with the remaining arguments:

* `Qwen2_5OmniProcessor.__call__` / `Qwen3OmniMoeProcessor.__call__` append one JSON line `{"kind": "processor"}`
  per call: the `use_audio_in_video` the class passed, how many audio waveforms (and their lengths in samples) and
  videos it passed, what came out (`input_features` shape, the audio frames `feature_attention_mask` keeps, the
  number of audio placeholder tokens in `input_ids`, `video_grid_thw`), the calling model class's module, and the
  exception if the processor raised (re-raised unchanged);
* `...ForConditionalGeneration.generate` appends `{"kind": "generate"}`: the `input_features` shape reaching the
  model, `use_audio_in_video`, `max_new_tokens` and the number of new tokens.

One shim, because the classes cannot run on a CPU-only machine otherwise: with `device_map=auto` (the only setting
that does not load the model onto `cuda:N`) both classes move the inputs to "cuda" (`inputs.to("cuda")`,
lmms_eval/models/simple/qwen2_5_omni.py:268, chat/qwen2_5_omni.py:51, and the qwen3_omni equivalents); without CUDA,
`BatchFeature.to("cuda")` goes to the CPU instead.  Nothing else is changed.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any


def _write(path: str, record: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def _shape(tensor: Any) -> list[int] | None:
    return list(tensor.shape) if hasattr(tensor, "shape") else None


def _caller(frame: Any) -> str | None:
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("lmms_eval.models."):
            return name
        frame = frame.f_back
    return None


def _wrap_processor(cls: type, probe: str) -> None:
    original = cls.__call__

    @functools.wraps(original)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        audio = kwargs.get("audio")
        videos = kwargs.get("videos")
        record: dict[str, Any] = {
            "kind": "processor",
            "processor": cls.__name__,
            "caller": _caller(sys._getframe(1)),
            "use_audio_in_video": kwargs.get("use_audio_in_video"),
            "n_audio": len(audio) if isinstance(audio, list | tuple) else (0 if audio is None else 1),
            "audio_samples": [int(getattr(a, "shape", [len(a)])[-1]) for a in audio]
            if isinstance(audio, list | tuple)
            else None,
            "n_videos": len(videos) if isinstance(videos, list | tuple) else (0 if videos is None else 1),
        }
        try:
            result = original(self, *args, **kwargs)
        except Exception as exc:
            record["error"] = f"{type(exc).__name__}: {exc}"
            _write(probe, record)
            raise
        ids = result.get("input_ids")
        mask = result.get("feature_attention_mask")
        record.update(
            input_features=_shape(result.get("input_features")),
            audio_frames=int(mask.sum()) if mask is not None else 0,
            audio_tokens=int((ids == self.audio_token_id).sum()) if ids is not None else None,
            video_tokens=int((ids == self.video_token_id).sum()) if ids is not None else None,
            video_grid_thw=result["video_grid_thw"].tolist() if result.get("video_grid_thw") is not None else None,
        )
        _write(probe, record)
        return result

    cls.__call__ = call


def _wrap_generate(cls: type, probe: str) -> None:
    original = cls.generate

    @functools.wraps(original)
    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        record: dict[str, Any] = {
            "kind": "generate",
            "model": cls.__name__,
            "input_features": _shape(kwargs.get("input_features")),
            "use_audio_in_video": kwargs.get("use_audio_in_video"),
            "max_new_tokens": kwargs.get("max_new_tokens"),
        }
        try:
            out = original(self, *args, **kwargs)
        except Exception as exc:
            record["error"] = f"{type(exc).__name__}: {exc}"
            _write(probe, record)
            raise
        seq = out[0] if isinstance(out, tuple) else out
        prompt = kwargs["input_ids"].shape[1] if kwargs.get("input_ids") is not None else None
        record["new_tokens"] = seq.shape[1] - prompt if prompt is not None and hasattr(seq, "shape") else None
        _write(probe, record)
        return out

    cls.generate = generate


def _cpu_for_cuda() -> None:
    import torch
    from transformers import BatchFeature

    if torch.cuda.is_available():
        return
    original = BatchFeature.to

    @functools.wraps(original)
    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        args = tuple("cpu" if a == "cuda" else a for a in args)
        if kwargs.get("device") == "cuda":
            kwargs["device"] = "cpu"
        return original(self, *args, **kwargs)

    BatchFeature.to = to


def install(probe: str) -> None:
    from transformers import (
        Qwen2_5OmniForConditionalGeneration,
        Qwen2_5OmniProcessor,
        Qwen3OmniMoeForConditionalGeneration,
        Qwen3OmniMoeProcessor,
    )

    for processor in (Qwen2_5OmniProcessor, Qwen3OmniMoeProcessor):
        _wrap_processor(processor, probe)
    for model in (Qwen2_5OmniForConditionalGeneration, Qwen3OmniMoeForConditionalGeneration):
        _wrap_generate(model, probe)
    _cpu_for_cuda()


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        sys.exit("usage: run_omni_probe.py <probe.jsonl> <lmms-eval args...>")
    install(os.path.abspath(argv[1]))
    sys.argv = ["lmms-eval", *argv[2:]]
    from lmms_eval.__main__ import cli_evaluate

    cli_evaluate()


if __name__ == "__main__":
    main(sys.argv)
