"""The three sample tasks through lmms-eval's REAL Qwen2.5-VL model classes, offline on CPU.

A tiny random-weight Qwen2.5-VL checkpoint is built locally (tests/tools/tiny_qwen.py, once per session) and
`lmms-eval --model qwen2_5_vl` (chat class) and `--model qwen2_5_vl --force_simple` (simple class) run
mme_emotion_sample, mvei_sample and multiemo_sample through tests/tools/run_lmms_probe.py, which records what
each request hands to the Qwen2.5-VL processor and to `generate`. lmms-eval exits 0 even when evaluation raised,
so both the results file and the probe are checked: every MVEI / MultiEmo request carries one image, every
MME-Emotion request carries one video -- including the rows whose source container is .avi or .mkv (the simple
class drops videos whose path does not end in .mp4/.avi/.mov unless `doc_to_visual` hands over a remux).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import env_without_secrets

TOOLS = Path(__file__).parent / "tools"
TASKS = ["mme_emotion_sample", "mvei_sample", "multiemo_sample"]
MIN_PIXELS = 28 * 28
MAX_PIXELS = 4 * 28 * 28
MAX_NEW_TOKENS = 8
MME_SUBTASKS = 8
MME_ROWS = 16
MVEI_PAIRS, MVEI_REPEATS = 16, 3
MULTIEMO_IMAGES, MULTIEMO_PER_IMAGE = 6, 8
# MME-Emotion sample rows whose source video is not an .mp4 (tests/... sample_rows.json): 1 .avi, 3 .mkv.
EXPECTED_CONTAINERS = {".avi": 1, ".mkv": 3}
CLASSES = {
    "chat": ([], "lmms_eval.models.chat.qwen2_5_vl"),
    "simple": (["--force_simple"], "lmms_eval.models.simple.qwen2_5_vl"),
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint, built once per session in a subprocess (keeps torch out of the pytest process)."""
    out = tmp_path_factory.mktemp("tiny_qwen25vl")
    env = env_without_secrets()
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, str(TOOLS / "tiny_qwen.py"), str(out)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        assert (out / name).is_file(), f"{name} missing from the tiny checkpoint"
    return out


def _run(model_class: str, checkpoint: Path, work: Path) -> tuple[list[dict[str, Any]], dict[str, Any], str, float]:
    extra_args, _ = CLASSES[model_class]
    probe = work / "probe.jsonl"
    out_dir = work / "out"
    env = env_without_secrets()  # no OPENAI_* / EMO_* from the developer: MME-Emotion scores judge-free, offline
    env.pop("EMO_VIDEO_REMUX", None)
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        EMO_CACHE_DIR=str(work / "cache"),
        EMO_PROGRESS="0",
    )
    model_args = ",".join(
        [
            f"pretrained={checkpoint}",
            # both: device_map=cpu alone still moves the inputs to torch.device(device), whose default is "cuda"
            "device=cpu",
            "device_map=cpu",
            f"max_pixels={MAX_PIXELS}",
            f"min_pixels={MIN_PIXELS}",
            "max_num_frames=2",
        ]
    )
    cmd = [
        sys.executable,
        str(TOOLS / "run_lmms_probe.py"),
        str(probe),
        "--model",
        "qwen2_5_vl",
        *extra_args,
        "--model_args",
        model_args,
        "--tasks",
        ",".join(TASKS),
        "--gen_kwargs",
        f"max_new_tokens={MAX_NEW_TOKENS}",
        "--batch_size",
        "1",
        "--output_path",
        str(out_dir),
    ]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, timeout=540)
    elapsed = time.monotonic() - start
    log = proc.stdout + proc.stderr
    (work / "lmms_eval.log").write_text(log)
    assert proc.returncode == 0, log[-6000:]
    assert "Error during evaluation" not in log, log[-6000:]
    files = sorted(out_dir.rglob("*_results.json"))
    assert files, f"no results file under {out_dir} (lmms-eval exits 0 even when evaluation raised):\n{log[-6000:]}"
    assert probe.is_file(), f"the probe recorded nothing:\n{log[-6000:]}"
    records = [json.loads(line) for line in probe.read_text().splitlines() if line.strip()]
    return records, json.loads(files[-1].read_text()), log, elapsed


def _task(record: dict[str, Any]) -> str:
    (task,) = record["task"]  # batch size 1: one request per processor call
    return task


def _where(record: dict[str, Any]) -> str:
    source = (record.get("doc_video_path") or record.get("doc_image_path") or [None])[0]
    return f"{_task(record)} doc {record['doc_id']} ({source}) visuals={record.get('visuals')}"


@pytest.mark.parametrize("model_class", list(CLASSES))
def test_sample_tasks_through_real_qwen25vl_class(
    model_class: str, tiny_qwen: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    records, results, log, elapsed = _run(model_class, tiny_qwen, tmp_path)
    request.node.user_properties.append(("wall_time_s", round(elapsed, 1)))
    print(f"\n[qwen2_5_vl {model_class}] lmms-eval run: {elapsed:.1f} s")

    # --- the results file ---------------------------------------------------------------------------------
    res = results["results"]
    assert results["config"]["model"] == "qwen2_5_vl"
    assert res["mme_emotion_sample"]["n_scored,none"] == MME_ROWS
    assert res["mme_emotion_sample"]["n_judge_failed,none"] == 0
    assert res["mvei_sample"]["n_pairs,none"] == MVEI_PAIRS
    assert res["multiemo_sample"]["n_images,none"] == MULTIEMO_IMAGES
    n_samples = results["n-samples"]
    assert n_samples["mvei_sample"]["effective"] == MVEI_PAIRS
    assert n_samples["multiemo_sample"]["effective"] == MULTIEMO_IMAGES * MULTIEMO_PER_IMAGE
    mme_subtasks = [t for t in n_samples if t.startswith("mme_emotion_sample_")]
    assert len(mme_subtasks) == MME_SUBTASKS
    assert sum(n_samples[t]["effective"] for t in mme_subtasks) == MME_ROWS
    # --gen_kwargs is merged into every task's generation_kwargs (the task's other keys stay)
    for name, cfg in results["configs"].items():
        assert cfg["generation_kwargs"]["max_new_tokens"] == MAX_NEW_TOKENS, name

    # --- the probe: what the model class handed to the processor and to generate ----------------------------
    assert not [r for r in records if r["kind"] == "probe_error"], records
    calls = [r for r in records if r["kind"] == "processor"]
    generates = [r for r in records if r["kind"] == "generate"]
    n_requests = MME_ROWS + MVEI_PAIRS * MVEI_REPEATS + MULTIEMO_IMAGES * MULTIEMO_PER_IMAGE
    assert len(calls) == n_requests, Counter(_task(r) for r in calls)
    assert len(generates) == n_requests
    assert {r["caller"] for r in calls} == {CLASSES[model_class][1]}
    assert {r["max_new_tokens"] for r in generates} == {MAX_NEW_TOKENS}
    assert all(0 < r["new_tokens"] <= MAX_NEW_TOKENS for r in generates)

    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in calls:
        by_task["mme_emotion_sample" if _task(r).startswith("mme_emotion_sample_") else _task(r)].append(r)

    def grid_ok(grid: Any) -> bool:
        return (
            isinstance(grid, list)
            and len(grid) == 1
            and grid[0][0] >= 1
            and MIN_PIXELS <= grid[0][1] * grid[0][2] * 14 * 14 <= MAX_PIXELS
        )

    # images: one per request, no video
    for task in ("mvei_sample", "multiemo_sample"):
        bad = [
            _where(r)
            for r in by_task[task]
            if not (r["n_images"] == 1 and r["n_videos"] == 0 and grid_ok(r["image_grid_thw"]))
            or r["video_grid_thw"] is not None
        ]
        assert not bad, f"{model_class}: {task} requests without exactly one image:\n" + "\n".join(bad)
    assert len(by_task["mvei_sample"]) == MVEI_PAIRS * MVEI_REPEATS
    assert Counter(Counter(r["doc_id"][0] for r in by_task["mvei_sample"]).values()) == {MVEI_REPEATS: MVEI_PAIRS}
    per_image = Counter(r["doc_image_path"][0] for r in by_task["multiemo_sample"])
    assert Counter(per_image.values()) == {MULTIEMO_PER_IMAGE: MULTIEMO_IMAGES}, per_image

    # videos: one per MME-Emotion request, whatever the source container
    mme = by_task["mme_emotion_sample"]
    assert len({(_task(r), r["doc_id"][0]) for r in mme}) == MME_ROWS
    containers = Counter(Path(r["doc_video_path"][0]).suffix.lower() for r in mme)
    for suffix, n in EXPECTED_CONTAINERS.items():
        assert containers[suffix] == n, containers
    no_video = [
        _where(r)
        for r in mme
        if not (r["n_videos"] == 1 and r["n_images"] == 0 and grid_ok(r["video_grid_thw"]) and r["pixel_values_videos"])
    ]
    assert not no_video, f"{model_class}: MME-Emotion requests that reached the model without a video:\n" + "\n".join(
        no_video
    )
