"""MME-Emotion's lmms-eval hooks and fail-fast errors, in process and through the real CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from conftest import env_without_secrets

from emo_tasks.mme_emotion import hooks
from emo_tasks.mme_emotion.data import DataError
from emo_tasks.mme_emotion.judge import step_messages
from emo_tasks.mme_emotion.protocol import prompt_hashes, spec_for
from emo_tasks.mme_emotion.sample import write_clip
from emo_tasks.mme_emotion.scoring import TABLE
from emo_tasks.settings import SettingsError
from judges.config import JudgeConfigError

REAL = Path(__file__).parent.parent / "data" / "mme_emotion"
SNAPSHOT = Path(__file__).parent.parent / "data" / "mme_prompt_snapshot.json"


def make_root(tmp_path: Path, n_rows: int = 3, videos: int | None = None) -> Path:
    """A local EMO_DATA_ROOT with the first `n_rows` real ER-Lab rows and generated clips for `videos` of them."""
    root = tmp_path / "data" / "mme_emotion"
    rows = json.loads((REAL / "ER-Lab/question/ER_Lab.json").read_text())[:n_rows]
    clues = json.loads((REAL / "ER-Lab/audio_clue/ER_Lab_qwen2_audio_clues.json").read_text())[:n_rows]
    (root / "ER-Lab/question").mkdir(parents=True)
    (root / "ER-Lab/audio_clue").mkdir(parents=True)
    (root / "ER-Lab/question/ER_Lab.json").write_text(json.dumps(rows))
    (root / "ER-Lab/audio_clue/ER_Lab_qwen2_audio_clues.json").write_text(json.dumps(clues))
    for i, row in enumerate(rows[: n_rows if videos is None else videos]):
        write_clip(root / row["video_id"], seed=i)
    return root


def placeholder(name: str) -> datasets.Dataset:
    return datasets.Dataset.from_list([{"emo_source": name}])


def test_process_docs_loads_rows_and_fails_fast_without_a_judge(tmp_path: Path, monkeypatch) -> None:
    root = make_root(tmp_path)
    monkeypatch.setenv("EMO_DATA_ROOT", str(root.parent))
    with pytest.raises(JudgeConfigError, match="OPENAI_API_KEY.*EMO_JUDGE=offline"):
        hooks.process_docs(placeholder("mme_emotion/benchmark/ER-Lab"))
    monkeypatch.setenv("EMO_JUDGE", "offline")
    docs = hooks.process_docs(placeholder("mme_emotion/benchmark/ER-Lab"))
    assert len(docs) == 3 and docs[0]["mme_task"] == "ER-Lab" and docs[0]["audio_clue"]
    assert hooks.doc_to_visual(docs[0]) == [str(root / docs[0]["video_id"])]


def test_process_docs_checks_settings_first_and_registers_them_with_the_docs(tmp_path: Path, monkeypatch) -> None:
    root = make_root(tmp_path)
    monkeypatch.setenv("EMO_DATA_ROOT", str(root.parent))
    monkeypatch.setenv("EMO_JUDGE", "offline")
    monkeypatch.setenv("EMO_MME_ALPHA", "2")
    with pytest.raises(SettingsError, match=r"EMO_MME_ALPHA='2'.*\[0.0, 1.0\]"):
        hooks.process_docs(placeholder("mme_emotion/benchmark/ER-Lab"))
    monkeypatch.setenv("EMO_MME_ALPHA", "0.25")
    monkeypatch.setenv("EMO_VIDEO_REMUX", "0")
    docs = hooks.process_docs(placeholder("mme_emotion/benchmark/ER-Lab"))
    loaded = hooks.STATE.tasks.get("benchmark", "ER-Lab")
    assert (loaded.settings.alpha, loaded.settings.judge_mode, loaded.settings.common.video_remux) == (
        0.25,
        "offline",
        False,
    )
    assert sorted(loaded.docs) == [0, 1, 2] and loaded.docs[1]["video_id"] == docs[1]["video_id"]
    record = hooks.process_results(docs[1], ["Answer: anger"])["rec_s"]
    assert hooks.lookup_doc(record)["video_path"] == docs[1]["video_path"]
    assert hooks.settings_for([record]) is loaded.settings
    with pytest.raises(KeyError, match="process_docs did not run"):
        hooks.lookup_doc({**record, "mme_task": "IR"})


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # bpe_openai's own use of importlib.resources
def test_evaluate_offline_in_process_writes_the_judge_log(tmp_path: Path, monkeypatch) -> None:
    root = make_root(tmp_path)
    monkeypatch.setenv("EMO_DATA_ROOT", str(root.parent))
    monkeypatch.setenv("EMO_JUDGE", "offline")
    docs = hooks.process_docs(placeholder("mme_emotion/benchmark/ER-Lab"))
    answers = ["Answer: " + docs[0]["label"], "Answer: none of these", ""]
    records = [hooks.process_results(d, [a])["rec_s"] for d, a in zip(docs, answers, strict=True)]

    class Args:
        output_path = str(tmp_path / "out")

    metrics = hooks.evaluate(records, Args())
    assert list(metrics) == list(TABLE.names)
    assert (metrics["rec_s"].total, metrics["rec_s"].count) == (100.0, 3)
    assert (metrics["n_scored"], metrics["n_judge_failed"], metrics["rea_s"]) == (3, 0, None)
    assert hooks.evaluate(records) is metrics  # memoised: the eight aggregations share one pass
    (log,) = (tmp_path / "out" / "emo_tasks_judge").glob("*_judge.jsonl")
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [list(r) for r in rows] == [LOG_FIELDS] * 3
    assert [(r["status"], r["recognition"], r["answer"]) for r in rows] == [
        ("offline", 1.0, answers[0]), ("offline", 0.0, answers[1]), ("offline", 0.0, ""),
    ]  # fmt: skip
    summary = json.loads(log.with_name(log.name.replace("_judge.jsonl", "_summary.json")).read_text())
    assert list(summary) == SUMMARY_KEYS
    assert summary["judge_mode"] == "offline" and summary["judge_models"] is None and summary["alpha"] == 0.5


LOG_FIELDS = [
    "task", "row", "video_id", "label", "answer", "status", "failed_stage", "failure_reason", "failure_detail",
    "audio_clue", "step_text", "steps", "judge_text", "ratings", "recognition", "reasoning", "n_steps",
    "strict_recognition", "predicted_labels", "cached", "video_identity", "raw_answers",
]  # fmt: skip
SUMMARY_KEYS = [
    "benchmark", "tasks", "data_source", "judge_mode", "judge_protocol", "audio_clues", "judge_models",
    "judge_fingerprint", "alpha",
    "prompt_hashes", "n_samples", "metrics", "judge_failures", "n_rule_differs", "per_category", "seconds",
    "n_judge_truncated", "judge_shutdown",
]  # fmt: skip


def test_missing_and_corrupt_videos_are_named(tmp_path: Path, monkeypatch) -> None:
    root = make_root(tmp_path, n_rows=3, videos=1)
    monkeypatch.setenv("EMO_DATA_ROOT", str(root.parent))
    monkeypatch.setenv("EMO_JUDGE", "offline")
    rows = json.loads((root / "ER-Lab/question/ER_Lab.json").read_text())
    with pytest.raises(DataError, match="2 of 3 videos are missing") as err:
        hooks.process_docs(placeholder("mme_emotion/benchmark/ER-Lab"))
    assert rows[1]["video_id"] in str(err.value) and rows[2]["video_id"] in str(err.value)
    corrupt = root / rows[1]["video_id"]
    corrupt.parent.mkdir(parents=True, exist_ok=True)
    corrupt.write_bytes(b"\x00not a video" * 100)
    shutil.copy(root / rows[0]["video_id"], root / rows[2]["video_id"])
    docs = hooks.process_docs(placeholder("mme_emotion/benchmark/ER-Lab"))
    with pytest.raises(DataError, match=str(corrupt)):
        hooks.doc_to_visual(docs[1])


def test_prompt_medium_and_messages() -> None:
    doc = {"mme_task": "ML-ER", "label_set": ["anger", "fear"], "video_path": "/v.mp4"}
    assert "Listen to the audio" in hooks.doc_to_text(doc, {"medium": "audio"})
    assert "Look at the video frames" in hooks.doc_to_text(doc, {"medium": "video frames"})
    text = hooks.doc_to_text(doc, {"medium": "video", "pre_prompt": "PRE ", "post_prompt": " POST"})
    assert text.startswith("PRE Watch the video") and text.endswith(" POST") and "anger, fear" in text
    custom = hooks.doc_to_text(doc, {"prompt": "Pick from {labels} ({target})."})
    assert custom == "Pick from anger, fear (emotion)."
    with pytest.raises(ValueError, match="medium"):
        hooks.doc_to_text(doc, {"medium": "smell"})


def test_doc_to_messages_puts_the_media_first(tmp_path: Path) -> None:
    clip = write_clip(tmp_path / "c.mp4")
    doc = {"mme_task": "IR", "label_set": ["neutral", "agreeing"], "video_path": str(clip)}
    msgs = hooks.doc_to_messages(doc, {"medium": "video"})
    assert msgs[0]["content"][0] == {"type": "video", "url": str(clip)}
    assert msgs[0]["content"][1]["type"] == "text"
    assert hooks.doc_to_messages(doc, {"medium": "audio"})[0]["content"][0]["type"] == "audio"
    mkv = write_clip(tmp_path / "d.mkv")  # chat models get the same .mp4 remux as doc_to_visual
    url = hooks.doc_to_messages({**doc, "video_path": str(mkv)}, {"medium": "video"})[0]["content"][0]["url"]
    assert url.endswith(".mp4") and url == hooks.doc_to_visual({"video_path": str(mkv)})[0]


def _snapshot() -> dict:
    """One real row per task: the exact prompts our defaults produce (lmms-eval's prompt_stability idea)."""
    out = {"hashes": prompt_hashes(), "tasks": {}}
    for key in ("ER-Lab", "ER-Wild", "Noise-ER", "FG-ER", "ML-ER", "SA", "FG-SA", "IR"):
        spec = spec_for(key)
        row = json.loads((REAL / spec.question_relpath).read_text())[0]
        doc = {"mme_task": key, "label_set": row["label_set"], "video_path": "x.mp4"}
        from emo_tasks.mme_emotion.judge import judge_text

        out["tasks"][key] = {
            "model_prompt": hooks.doc_to_text(doc, {"medium": "video"}),
            "step_prompt": step_messages(spec, "ANSWER")[1]["content"],
            "judge_prompt": judge_text(
                spec, audio_clue="CLUE", ground_truth=row["label"], steps_text="<step>Step 1: x.</step>", n_steps=1
            ),
        }
    return out


def test_prompts_do_not_drift_silently() -> None:
    """Regenerate on purpose with EMO_UPDATE_SNAPSHOTS=1 when a prompt change is intended."""
    import os

    current = _snapshot()
    if os.environ.get("EMO_UPDATE_SNAPSHOTS") == "1" or not SNAPSHOT.exists():
        SNAPSHOT.write_text(json.dumps(current, indent=1, ensure_ascii=False) + "\n")
    assert current == json.loads(SNAPSHOT.read_text())


@pytest.mark.slow
def test_cli_benchmark_task_without_judge_stops_before_inference_and_says_what_to_set(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    env = env_without_secrets()
    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", EMO_CACHE_DIR=str(tmp_path / "cache"),
               EMO_DATA_ROOT=str(root.parent))  # fmt: skip
    env.pop("EMO_JUDGE", None)
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--tasks", "mme_emotion_er_lab",
           "--output_path", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert not list((tmp_path / "out").rglob("*_results.json"))
    assert "OPENAI_API_KEY" in out and "EMO_JUDGE=offline" in out
    assert "Running generate_until requests" not in out  # failed before inference
    # offline and with --limit: two of the three rows are evaluated
    env["EMO_JUDGE"] = "offline"
    proc = subprocess.run(cmd + ["--limit", "2"], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    files = list((tmp_path / "out").rglob("*_results.json"))
    assert files, proc.stderr[-3000:]
    assert "Running generate_until requests" in proc.stdout + proc.stderr  # the marker the first run must lack
    res = json.loads(files[0].read_text())["results"]["mme_emotion_er_lab"]
    assert res["n_scored,none"] == 2 and res["rea_s,none"] is None


def test_hub_source_offline_says_how_to_use_local_data(monkeypatch) -> None:
    from emo_tasks.mme_emotion.data import benchmark_root

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match="EMO_DATA_ROOT") as err:
        benchmark_root(None, "emo-tasks-test/not-cached")
    assert "emo-tasks-test/not-cached" in str(err.value)


def test_hub_snapshot_archives_are_extracted_and_the_layout_found(tmp_path: Path) -> None:
    import zipfile

    from emo_tasks.mme_emotion import data

    snapshot = tmp_path / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    with zipfile.ZipFile(snapshot / "MME-Emotion.zip", "w") as zf:
        zf.write(REAL / "ER-Lab/question/ER_Lab.json", "MME-Emotion/ER-Lab/question/ER_Lab.json")
    assert data._find_layout(snapshot) is None
    target = tmp_path / "extracted"
    data._extract_archives(snapshot, target)
    assert data._find_layout(target) == target / "MME-Emotion"
    assert (target / ".extracted").is_file()
