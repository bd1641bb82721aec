"""`EMO_JUDGE=batch` (issue 35, item 4): the judge inside lmms-eval sends each request at once, so a task run under
it is refused when the task loads (before inference), with one line naming the two-stage flow; `emo-tasks judge`
reads the value as "judge" (its `--batch` flag says how it sends).  The lmms-eval CLI case is in
tests/mvei/test_mvei.py (`test_emo_judge_batch_stops_the_run_before_inference`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from emo_tasks.judging.stage import stage_env
from emo_tasks.mme_emotion import hooks as mme_hooks
from emo_tasks.mme_emotion.settings import MMESettings
from emo_tasks.multiemo import hooks as multiemo_hooks
from emo_tasks.mvei import hooks as mvei_hooks
from emo_tasks.settings import BATCH_JUDGE_MESSAGE, SettingsError

LOADERS = {
    "mme_emotion/sample/ER-Lab": mme_hooks.load_task,
    "mvei/sample": mvei_hooks.load_task,
    "multiemo/sample": multiemo_hooks.load_task,
}


@pytest.mark.parametrize("value", ["batch", " Batch "])
@pytest.mark.parametrize("name", list(LOADERS))
def test_every_task_refuses_batch_before_loading_anything(tmp_path: Path, name: str, value: str) -> None:
    env = {"EMO_CACHE_DIR": str(tmp_path), "EMO_JUDGE": value, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    with pytest.raises(SettingsError) as info:
        LOADERS[name](name, env)
    message = str(info.value)
    assert message == BATCH_JUDGE_MESSAGE and "\n" not in message
    assert "--predict_only --log_samples" in message and "EMO_JUDGE=defer" in message
    assert "emo-tasks judge RUN_DIR --batch" in message and "use one of" not in message
    assert not (tmp_path / "samples").exists()  # no sample generated, no row read


def test_mme_settings_name_the_flow_too() -> None:
    """Any MME-Emotion settings read from such an environment say the same, not the generic list of modes."""
    with pytest.raises(SettingsError, match="emo-tasks judge RUN_DIR --batch"):
        MMESettings.from_env({"EMO_JUDGE": "batch"}, "sample")


@pytest.mark.parametrize("value", ["batch", "BATCH", "defer", "auto", ""])
def test_the_stage_reads_batch_as_judge(value: str) -> None:
    assert stage_env({"EMO_JUDGE": value}, {})["EMO_JUDGE"] == "api"
    assert stage_env({"EMO_JUDGE": "offline"}, {})["EMO_JUDGE"] == "offline"
