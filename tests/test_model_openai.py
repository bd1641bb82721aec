"""`--model openai` (lmms-eval's API model class) as the evaluated model on the three sample tasks, against a
loopback OpenAI-compatible server that counts what each request carries and answers per request."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import API_KEY, env_without_secrets

from judges.testing import LoopbackServer, Reply, count_media, last_user_text

TASKS = "mme_emotion_sample,mvei_sample,multiemo_sample"


@pytest.mark.slow
def test_openai_model_receives_frames_and_images_and_metrics_follow_its_answers(tmp_path: Path) -> None:
    seen: list[dict] = []

    def responder(body: dict, attempt: int) -> Reply:
        text = last_user_text(body)
        images, _ = count_media(body)
        if "Statement:" in text:
            kind, answer = "mvei", "Correct"
        elif "How much will people feel" in text:
            emotion = text.split("How much will people feel ", 1)[1].split(" ", 1)[0]
            kind, answer = "multiemo", f"Score: {20 + 10 * (len(emotion) % 5)}. Reason: colours."
        else:
            kind, answer = "mme", "The face is tense. Answer: anger"
        seen.append({"kind": kind, "images": images, "text": hashlib.sha256(text.encode()).hexdigest()})
        return Reply(text=answer)

    env = env_without_secrets()
    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", EMO_CACHE_DIR=str(tmp_path / "cache"), EMO_PROGRESS="0")
    out = tmp_path / "out"
    with LoopbackServer(responder=responder, expected_api_key=API_KEY) as srv:
        args = f"model_version=eval-model,base_url={srv.base_url},api_key={API_KEY},max_frames_num=4"
        cmd = [sys.executable, "-m", "lmms_eval", "--model", "openai", "--model_args", args, "--tasks", TASKS,
               "--output_path", str(out)]  # fmt: skip
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    files = sorted(out.rglob("*_results.json"))
    assert files, proc.stdout[-2000:] + proc.stderr[-4000:]
    results = json.loads(files[-1].read_text())["results"]
    by_kind: dict[str, list[dict]] = {}
    for s in seen:
        by_kind.setdefault(s["kind"], []).append(s)
    # every request arrived with its media: the 16 MME clips as frames, MVEI/MultiEmo as one image each
    assert len(by_kind["mme"]) == 16 and all(s["images"] >= 1 for s in by_kind["mme"]), by_kind["mme"]
    assert len(by_kind["mvei"]) == 16 * 3 and all(s["images"] == 1 for s in by_kind["mvei"])
    assert len(by_kind["multiemo"]) == 6 * 8 and all(s["images"] == 1 for s in by_kind["multiemo"])
    # metrics follow the answers: every MVEI answer is Correct; MultiEmo scores depend only on the emotion
    mvei = results["mvei_sample"]
    assert mvei["positive_ratio,none"] == 100.0 and mvei["give_up_ratio,none"] == 0.0
    assert mvei["self_consistency,none"] == 100.0
    multi = results["multiemo_sample"]
    assert multi["n_parse_failed,none"] == 0 and multi["n_images,none"] == 6
    assert multi["srcc,none"] is not None  # scores vary across emotions: correlations are defined here
    mme = results["mme_emotion_sample"]
    assert mme["n_scored,none"] == 16 and mme["rec_s,none"] > 0  # "anger" is right for some sample rows
