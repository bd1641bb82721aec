"""MultiEmo-Bench's second stages: the LLM-as-a-judge stage over saved predictions (against a real loopback
server) and the human split-half baseline, through their functions and their command lines."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import API_KEY, env_without_secrets

from emo_tasks.common import DataError
from emo_tasks.multiemo import scoring
from emo_tasks.multiemo.data import EMOTIONS, load_images
from emo_tasks.multiemo.judge import build_requests, load_predictions, run_judge_stage
from emo_tasks.multiemo.sample import sample_file
from emo_tasks.multiemo.settings import MultiEmoSettings
from emo_tasks.settings import environ
from judges import reset_engine
from judges.testing import LoopbackServer, Reply, count_media, last_user_text

JUDGE_MODEL = "loopback-judge-7b"
MODEL_A = "qwen-fake-ALPHA"
MODEL_B = "llava-fake-BETA"
UNPARSED = ("tie_two", "awe")  # model B's answer here has no score
CANDIDATE = re.compile(r"Candidate (\d+): score ([0-9.]+)\.")
SCORE_KEYS = (
    "precision_ours",
    "precision_original",
    "precision_single",
    "cheb",
    "canberra",
    "wasserstein",
    "kl",
    "js",
    "cosine",
    "srcc",
    "plcc",
)
BASELINE_KEYS = ("cheb", "canberra", "wasserstein", "cosine", "srcc", "plcc")


# ------------------------------------------------------------------------------------------------ fixtures
def score_a(i: int, j: int) -> int:
    return (i * 37 + j * 11) % 101


def score_b(i: int, j: int) -> int:
    return (score_a(i, j) + 23) % 101  # never equal to A's: a candidate's score tells which model it is


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return sample_file(tmp_path / "data")


@pytest.fixture
def prediction_files(tmp_path: Path, data: Path) -> tuple[Path, Path]:
    """Model A as our predictions file, model B as an lmms-eval samples file (one unparsed row)."""
    images = load_images(data)
    a_rows, b_lines = [], []
    for i, img in enumerate(images):
        for j, emotion in enumerate(EMOTIONS):
            sa = score_a(i, j)
            a_rows.append(
                {
                    "image_id": img["image_id"],
                    "emotion": emotion,
                    "score": sa,
                    "reason": f"The colours suggest {emotion} at about {sa}.",
                    "parse_status": "parsed",
                    "answer": f"Score: {sa}. Reason: The colours suggest {emotion} at about {sa}.",
                }
            )
            sb = score_b(i, j)
            record: dict[str, Any] = {
                "image_id": img["image_id"],
                "emotion": emotion,
                "answer": f"Score: {sb}. Reason: Texture and light evoke {emotion}.",
                "score": float(sb),
                "reason": f"Texture and light evoke {emotion}.",
                "parse_status": "parsed",
                "data_source": "sample",
            }
            if (img["image_id"], emotion) == UNPARSED:
                record.update(answer="I would rather not say.", score=None, reason=None, parse_status="missing")
            b_lines.append(
                {
                    "doc_id": len(b_lines),
                    "doc": {"image_id": img["image_id"], "emotion": emotion, "data_source": "sample"},
                    "target": "",
                    "resps": [[record["answer"]]],
                    "filtered_resps": [record["answer"]],
                    # as emo_tasks.multiemo.hooks.process_results logs it: the score under "predicted_score"
                    **{
                        name: {k if k != "score" else "predicted_score": v for k, v in record.items()}
                        for name in ("precision_ours", "cheb", "srcc")
                    },
                }
            )
    a = tmp_path / MODEL_A / "emo_tasks_judge" / "multiemo_20250101T000000_predictions.jsonl"
    b = tmp_path / MODEL_B / f"{MODEL_B}_samples_multiemo_sample.jsonl"
    for path, rows in ((a, a_rows), (b, b_lines)):
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return a, b


def mean_answer(text: str) -> str:
    scores = [float(s) for _, s in CANDIDATE.findall(text)]
    mean = sum(scores) / len(scores)
    lines = [f"Candidate {n} - why it could be correct: plausible. Why it could be wrong: vague." for n in range(1, 3)]
    return "\n\n".join([*lines, f"Conclusion: the candidates' mean, {mean:g}, is fair.\nFinal score: {mean:g}"])


class Recorder:
    """Responder answering each prompt with the mean of its candidates' scores; keeps every request body."""

    def __init__(self, garbage_for: str | None = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.garbage_for = garbage_for

    def __call__(self, body: dict[str, Any], attempt: int) -> Reply:
        self.bodies.append(body)
        text = last_user_text(body)
        if text == self.garbage_for:
            return Reply(text="I cannot decide on a number for this one.")
        return Reply(text=mean_answer(text))


def expected_metrics(data: Path, drop: tuple[str, str] | None = None) -> dict[str, Any]:
    """score_images over the candidates' mean scores, computed here independently of the stage."""
    results = []
    for i, img in enumerate(load_images(data)):
        scores: list[float | None] = []
        for j, emotion in enumerate(EMOTIONS):
            found = [score_a(i, j)] + ([] if (img["image_id"], emotion) == UNPARSED else [score_b(i, j)])
            scores.append(None if (img["image_id"], emotion) == drop else sum(found) / len(found))
        results.append(
            scoring.ImageResult(
                image_id=img["image_id"],
                votes=tuple(img["votes"]),
                n_annotators=img["n_annotators"],
                original_label=img["original_label"],
                scores=tuple(scores),
            )
        )
    return dict(scoring.score_images(results))


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def assert_scores_equal(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert set(SCORE_KEYS) <= want.keys()
    bad = {k: (got.get(k), v) for k, v in want.items() if not same(got.get(k), v)}
    assert not bad, bad


def use_server(monkeypatch: pytest.MonkeyPatch, srv: LoopbackServer, cache: Path) -> None:
    for name, value in {
        "OPENAI_BASE_URL": srv.base_url,
        "OPENAI_API_KEY": API_KEY,
        "EMO_JUDGE_MODEL": JUDGE_MODEL,
        "EMO_CACHE_DIR": str(cache),
        "EMO_JUDGE_BACKOFF_BASE": "0.01",
        "EMO_JUDGE_BACKOFF_MAX": "0.05",
        "EMO_JUDGE_TIMEOUT": "10",
    }.items():
        monkeypatch.setenv(name, value)
    reset_engine()


def stage_settings(data: Path) -> MultiEmoSettings:
    """What the judge stage's command line builds at its entry point."""
    return MultiEmoSettings.from_env(environ(), "benchmark", data_file=data)


def prompt_texts(requests: list) -> list[str]:
    return [req.messages[0]["content"][-1]["text"] for _, req in requests]


# ------------------------------------------------------------------------------------------------ inputs
def test_load_predictions_reads_both_shapes_and_counts_unparsed(prediction_files: tuple[Path, Path]) -> None:
    a, b = (load_predictions(p) for p in prediction_files)
    assert (len(a), a.n_unparsed, a.n_rows) == (48, 0, 48)
    assert (len(b), b.n_unparsed, b.n_rows) == (47, 1, 48)
    assert UNPARSED not in b and UNPARSED in a
    assert b[("clear_awe", "awe")]["score"] == float(score_b(0, 2))


def test_load_predictions_rejects_unknown_shapes(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"doc_id": 0, "resps": [["x"]]}) + "\n")
    with pytest.raises(DataError, match="line 1.*precision_ours"):
        load_predictions(bad)
    with pytest.raises(DataError, match="not found"):
        load_predictions(tmp_path / "absent.jsonl")


def test_prompts_are_anonymised_shuffled_and_reproducible(data: Path, prediction_files: tuple[Path, Path]) -> None:
    images = load_images(data)
    preds = [load_predictions(p) for p in prediction_files]
    requests = build_requests(images, preds, seed=0)
    assert len(requests) == 48
    texts = prompt_texts(requests)
    assert texts == prompt_texts(build_requests(images, preds, seed=0))
    assert texts != prompt_texts(build_requests(images, preds, seed=1))
    for _, req in requests:
        assert req.role == "judge" and req.temperature == 0
        assert req.validate("Conclusion: fine.\nFinal score: 55") is None
        assert req.validate("Conclusion: fine.") and req.validate("Final score: 140")


# ------------------------------------------------------------------------------------------------ the stage
def test_judge_stage_against_loopback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data: Path, prediction_files: tuple[Path, Path]
) -> None:
    recorder = Recorder()
    with LoopbackServer(responder=recorder, expected_api_key=API_KEY) as srv:
        use_server(monkeypatch, srv, tmp_path / "cache")
        rows, metrics = run_judge_stage(data, prediction_files, seed=0, settings=stage_settings(data))

        assert len(srv.calls) == 48 and all(c.auth_ok for c in srv.calls)
        for body in recorder.bodies:
            assert count_media(body) == (1, 0)
            assert body["model"] == JUDGE_MODEL and body["temperature"] == 0
            text = last_user_text(body)
            for name in (MODEL_A, MODEL_B, "qwen", "llava", "ALPHA", "BETA", "jsonl", "samples", "predictions"):
                assert name not in text
        # what was sent is what build_requests makes (so its order checks below hold for the run)
        images = load_images(data)
        preds = [load_predictions(p) for p in prediction_files]
        built = build_requests(images, preds, seed=0)
        assert sorted(last_user_text(b) for b in recorder.bodies) == sorted(prompt_texts(built))
        # the same two models come first in some items and second in others
        firsts = set()
        for (key, _), text in zip(built, prompt_texts(built), strict=True):
            shown = [(int(n), float(s)) for n, s in CANDIDATE.findall(text)]
            assert [n for n, _ in shown] == list(range(1, len(shown) + 1))
            if len(shown) == 2:
                i, j = [img["image_id"] for img in images].index(key[0]), EMOTIONS.index(key[1])
                firsts.add("A" if shown[0][1] == score_a(i, j) else "B")
        assert firsts == {"A", "B"}

        assert_scores_equal(metrics, expected_metrics(data))
        assert metrics["n_items"] == 48 and metrics["n_judge_failed"] == 0
        assert metrics["n_inputs_unparsed"] == 1 and metrics["n_models"] == 2
        assert metrics["judge_model"] == JUDGE_MODEL
        assert len(rows) == 48 and all(r["parse_status"] == "parsed" for r in rows)
        row = next(r for r in rows if (r["image_id"], r["emotion"]) == UNPARSED)
        assert row["score"] == score_a(1, 2) and row["n_candidates"] == 1
        assert row["reason"].startswith("the candidates' mean") and "Final score" not in row["reason"]

        srv.reset_log()
        reset_engine()
        rows2, metrics2 = run_judge_stage(data, prediction_files, seed=0, settings=stage_settings(data))
        assert srv.calls == []  # every answer came from the cache
        assert rows2 == rows
        assert_scores_equal(metrics2, expected_metrics(data))


def test_garbage_answer_is_retried_once_then_counted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data: Path, prediction_files: tuple[Path, Path]
) -> None:
    images = load_images(data)
    preds = [load_predictions(p) for p in prediction_files]
    target = ("sad_not_fear", "fear")
    built = build_requests(images, preds)
    target_text = dict(zip([key for key, _ in built], prompt_texts(built), strict=True))
    recorder = Recorder(garbage_for=target_text[target])
    with LoopbackServer(responder=recorder, expected_api_key=API_KEY) as srv:
        use_server(monkeypatch, srv, tmp_path / "cache")
        rows, metrics = run_judge_stage(data, prediction_files, seed=0, settings=stage_settings(data))
        asked = [b for b in recorder.bodies if last_user_text(b) == target_text[target]]
        assert len(asked) == 2  # the first answer and one retry
        assert len(srv.calls) == 49
    assert metrics["n_judge_failed"] == 1 and metrics["n_items"] == 48
    row = next(r for r in rows if (r["image_id"], r["emotion"]) == target)
    assert row["score"] is None and row["parse_status"] == "judge_failed" and row["judge_error"] == "invalid_answer"
    assert row["answer"].startswith("I cannot decide")
    assert_scores_equal(metrics, expected_metrics(data, drop=target))


# ------------------------------------------------------------------------------------------------ CLIs
def test_command_lines_read_their_settings_first(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, data: Path, prediction_files: tuple[Path, Path]
) -> None:
    from emo_tasks.multiemo import baseline
    from emo_tasks.multiemo import judge as multiemo_judge

    monkeypatch.setenv("EMO_JUDGE_CONCURRENCY", "many")
    assert multiemo_judge.main(["--data", str(data), "--predictions", *map(str, prediction_files)]) == 2
    assert "EMO_JUDGE_CONCURRENCY='many'" in capsys.readouterr().err
    monkeypatch.delenv("EMO_JUDGE_CONCURRENCY")
    monkeypatch.setenv("EMO_PROGRESS", "maybe")
    assert baseline.main(["--data", str(data)]) == 2
    assert "EMO_PROGRESS='maybe'" in capsys.readouterr().err


def _cli(module: str, args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args], env=env, capture_output=True, text=True, timeout=300, cwd=cwd
    )


def _expected_json(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}


@pytest.mark.slow
def test_judge_stage_cli(tmp_path: Path, data: Path, prediction_files: tuple[Path, Path]) -> None:
    out = tmp_path / "judged" / "judged.jsonl"
    args = ["--data", str(data), "--predictions", *map(str, prediction_files), "--out", str(out), "--seed", "0"]
    with LoopbackServer(responder=Recorder(), expected_api_key=API_KEY) as srv:
        env = {
            **env_without_secrets(),
            "OPENAI_BASE_URL": srv.base_url,
            "OPENAI_API_KEY": API_KEY,
            "EMO_JUDGE_MODEL": JUDGE_MODEL,
            "EMO_CACHE_DIR": str(tmp_path / "cli_cache"),
            "EMO_PROGRESS": "0",
        }
        proc = _cli("emo_tasks.multiemo.judge", args, env, tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert len(srv.calls) == 48
    metrics = json.loads(proc.stdout)
    assert_scores_equal(metrics, _expected_json(expected_metrics(data)))
    assert (metrics["n_items"], metrics["n_judge_failed"], metrics["n_inputs_unparsed"]) == (48, 0, 1)
    assert API_KEY not in proc.stdout + proc.stderr

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 48
    for row in rows:
        assert {"image_id", "emotion", "score", "reason", "parse_status", "answer"} <= row.keys()
        assert row["parse_status"] == "parsed" and 0 <= row["score"] <= 100 and row["reason"]
    rejudge = load_predictions(out)  # the judged rows are valid predictions for scoring or another round
    assert len(rejudge) == 48 and rejudge.n_unparsed == 0


@pytest.mark.slow
def test_judge_stage_cli_errors(tmp_path: Path, data: Path, prediction_files: tuple[Path, Path]) -> None:
    env = {**env_without_secrets(), "EMO_CACHE_DIR": str(tmp_path / "empty_cache"), "EMO_PROGRESS": "0"}
    args = ["--data", str(data), "--predictions", *map(str, prediction_files)]
    proc = _cli("emo_tasks.multiemo.judge", args, env, tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "OPENAI_API_KEY" in proc.stderr and "Traceback" not in proc.stderr

    missing = tmp_path / "nope.jsonl"
    proc = _cli("emo_tasks.multiemo.judge", ["--data", str(data), "--predictions", str(missing)], env, tmp_path)
    assert proc.returncode == 2 and str(missing) in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_baseline_cli(tmp_path: Path, data: Path) -> None:
    env = {**env_without_secrets(), "EMO_CACHE_DIR": str(tmp_path / "cache")}
    runs = [_cli("emo_tasks.multiemo.baseline", ["--data", str(data), "--seed", "3"], env, tmp_path) for _ in range(2)]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert runs[0].stdout == runs[1].stdout
    result = json.loads(runs[0].stdout)
    assert set(BASELINE_KEYS) <= result.keys()
    assert "kl" not in result and "js" not in result
    assert result["n_images"] == 6 and result["n_repeats"] == 10


def test_baseline_names_the_first_image_without_annotators(tmp_path: Path, data: Path) -> None:
    from emo_tasks.multiemo.baseline import human_baseline

    rows = [json.loads(line) for line in data.read_text().splitlines()]
    for row in rows[2:]:
        del row["annotators"]
    bare = data.with_name("bare.jsonl")
    bare.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=rf"line 3: image {rows[2]['id']!r}.*4 of 6"):
        human_baseline(bare)


@pytest.mark.slow
def test_baseline_cli_names_missing_annotators(tmp_path: Path, data: Path) -> None:
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    for row in rows[2:]:
        del row["annotators"]
    bare = data.with_name("bare.jsonl")
    bare.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = _cli("emo_tasks.multiemo.baseline", ["--data", str(bare)], env_without_secrets(), tmp_path)
    assert proc.returncode == 2 and "annotators" in proc.stderr and "Traceback" not in proc.stderr
