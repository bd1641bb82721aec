"""VLMEvalKit (and EvalScope, which runs it as a backend) as a second host for our benchmarks (issue 22).

VLMEvalKit has no plugin mechanism: a dataset class is visible when it is in `vlmeval.dataset.DATASET_CLASSES`, its
names in `SUPPORTED_DATASETS`, and the class an attribute of `vlmeval.dataset` (the `--config {"class": ...}` path).
`register()` puts every class the registry names (`Benchmark.vlmeval_datasets`) there; the start-up hook
(`_emo_tasks_autoload`) calls it when a program imports `vlmeval.dataset`, so `python -m vlmeval --data EmoMVEI
...` (and any process that imports it: EvalScope's VLMEvalKit backend does, tested) sees our names with no code change
by the user.

One core, two hosts: the classes load the same validated data, ask the same prompts and score with the same
functions as the lmms-eval tasks (each benchmark's `hooks` and `scoring`); their `evaluate` also writes an
lmms-eval-shaped run folder (`runfolder.write_run`) so `emo-tasks report/compare/view/export` read it unchanged.
Nothing here imports vlmeval unless a class is asked for; installing it is `pip install -e ".[vlmeval]"`.
"""

from __future__ import annotations

from typing import Any

#: Our datasets' `TYPE`: none of VLMEvalKit's own ('Y/N', 'VQA', 'MCQ', ...), so no model wrapper rewrites our
#: prompts (Qwen2-VL appends "answer with short words" to 'VQA') and run.py picks no judge of its own for us.
HOST_TYPE = "EmoTasks"


def dataset_classes() -> list[Any]:
    """Every dataset class the registry names, in registry order (imports vlmeval)."""
    from emo_tasks.benchmarks import all_benchmarks, load_object

    return [load_object(spec)() for b in all_benchmarks() for spec in b.vlmeval_datasets]


def register() -> list[str]:
    """Make our datasets visible to VLMEvalKit (idempotent); returns their names.  A video dataset's names also go
    into `supported_video_datasets` (what run.py builds a `--config` entry `{}` from), each with its defaults."""
    from functools import partial

    import vlmeval.dataset as ds
    from vlmeval.dataset.video_dataset_config import supported_video_datasets

    names: list[str] = []
    for cls in dataset_classes():
        if cls not in ds.DATASET_CLASSES:
            ds.DATASET_CLASSES.append(cls)
        for name in cls.supported_datasets():
            if name not in ds.SUPPORTED_DATASETS:
                ds.SUPPORTED_DATASETS.append(name)
            if cls.MODALITY == "VIDEO":
                supported_video_datasets.setdefault(name, partial(cls, dataset=name))
            names.append(name)
        setattr(ds, cls.__name__, cls)
    return names
