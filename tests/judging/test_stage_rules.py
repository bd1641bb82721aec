"""The judge stage's pure rules (issue 19): one folder per judge setup, each row once and every row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emo_tasks.judging.stage import LoggedSample, StageRefused, TaskPlan, check_rows, judge_setup, judge_slug


def _setup(**models: str) -> dict[str, Any]:
    return {"judge_mode": "api", "models": {"step": "gpt-4.1", **models}, "protocol": "guarded", "alpha": 0.5,
            "audio_clues": "released", "endpoint": "127.0.0.1:8000"}  # fmt: skip


@pytest.mark.parametrize(
    ("a", "b"),
    [("a/b", "a b"), ("Qwen/Q-72B", "Qwen_Q-72B"), ("判定", "심사"), ("x" * 300, "x" * 300 + "y")],
)
def test_names_that_once_shared_a_folder_do_not(a: str, b: str) -> None:
    sa, sb = judge_slug(_setup(judge=a)), judge_slug(_setup(judge=b))
    assert sa != sb
    for s in (sa, sb):
        assert s.isascii() and len(s) <= 100 and "/" not in s


@pytest.mark.parametrize(("key", "value"), [("protocol", "official"), ("alpha", 0.3), ("audio_clues", "live")])
def test_every_part_of_the_setup_is_in_the_name(key: str, value: Any) -> None:
    one = _setup(judge="gpt-4o")
    other = {**one, key: value}
    assert judge_slug(one) != judge_slug(other)
    assert judge_slug(one) == judge_slug(dict(reversed(list(one.items()))))  # order does not matter
    assert judge_slug(one).startswith("judge=gpt-4o,step=gpt-4.1-")


def test_what_the_endpoint_reported_is_not_in_the_name_what_was_asked_is() -> None:
    """Issue 42 item 1: the folder is keyed on what the user asked for; the endpoint host and what `/models`
    reported (or failed to) are recorded beside it, so a hiccup or `--batch-file` never moves the folder."""
    from judges.fingerprint import fingerprint

    def setup(listing: dict | None, temperature: float = 0.0, endpoint: str = "127.0.0.1:8000") -> dict:
        roles = {"judge": ("gpt-4o", {"temperature": temperature}), "step": ("gpt-4.1", {"temperature": 0.0})}
        fp = fingerprint(roles, protocol="p", prompts="t", listing=listing)
        return {**_setup(judge="gpt-4o"), "endpoint": endpoint, "judge_fingerprint": {"mme": fp}}

    vllm = {"gpt-4o": {"id": "gpt-4o", "root": "/ckpt/a", "max_model_len": 8192}}
    name = judge_slug(setup(None))
    assert judge_slug(setup(vllm)) == name  # "not reported" and reported: one folder
    assert judge_slug(setup(None, endpoint="vllm-batch.invalid")) == name  # another host: the same request
    assert judge_slug(setup(None, temperature=0.2)) != name  # a sampling setting asked for is in the name


def test_the_setup_resolves_defaults_and_records_no_key() -> None:
    env = {"OPENAI_API_KEY": "sk-secret-123456", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "EMO_JUDGE": "api"}
    setup = judge_setup(env, ["mme_emotion_sample_er_lab"])
    assert setup["models"] == {"step": "gpt-4.1-2025-04-14", "judge": "gpt-4o-2024-11-20"}
    assert setup["protocol"] and setup["alpha"] == 0.5 and setup["endpoint"] == "127.0.0.1:9"
    assert "sk-secret" not in repr(setup)
    assert (
        judge_setup({**env, "EMO_MME_AUDIO_CLUES": "live", "EMO_AUDIO_MODEL": "qa"}, ["mme_emotion_er_lab"])["models"][
            "audio"
        ]
        == "qa"
    )
    assert judge_slug(judge_setup({"EMO_JUDGE": "offline"}, ["mvei"])).startswith("offline-")
    assert judge_slug(judge_setup(env, ["mvei"])).startswith("no-judge-")


def test_each_benchmark_adds_its_own_part_of_the_setup() -> None:
    """The generic stage asks each benchmark of the run (`Benchmark.judge_setup`): MultiEmo's optional judge stage
    adds its model only when asked for and only for a run with a MultiEmo task; MME-Emotion's parts only with an
    MME-Emotion task."""
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "EMO_JUDGE_MODEL": "jm"}
    extra = judge_setup(env, ["multiemo_sample"], extra_judge=True)
    fingerprint = extra.pop("judge_fingerprint")
    assert extra == {"judge_mode": "api", "multiemo_judge": "jm", "endpoint": "127.0.0.1:9"}
    # each benchmark's fingerprint under its key; no /models at 127.0.0.1:9, so what is served is "not reported"
    assert list(fingerprint) == ["multiemo"] and fingerprint["multiemo"]["roles"]["judge"]["model"] == "jm"
    assert fingerprint["multiemo"]["roles"]["judge"]["served"] == "not reported"
    assert judge_slug({**extra, "judge_fingerprint": fingerprint}).startswith("multiemo-judge-")
    assert judge_setup(env, ["multiemo_sample"]) == {"judge_mode": "api"}
    both = judge_setup(env, ["mme_emotion_sample_er_lab", "multiemo_sample"], extra_judge=True)
    assert both["multiemo_judge"] == "jm" and both["models"]["judge"] == "jm" and both["endpoint"] == "127.0.0.1:9"
    assert sorted(both["judge_fingerprint"]) == ["mme", "multiemo"]
    assert judge_slug(both).startswith("judge=jm,step=")
    assert "models" not in judge_setup(env, ["mvei", "multiemo"], extra_judge=True)


def _plan(ids: list[int], n_docs: int = 16) -> TaskPlan:
    samples = [LoggedSample(i, "a", "t", "p", line=n) for n, i in enumerate(ids, start=1)]
    return TaskPlan("mvei_sample", None, None, {}, samples, [{}] * n_docs, answers_file=Path("log.jsonl"))  # type: ignore[arg-type]


def test_rows_each_once_and_all_of_them() -> None:
    check_rows(_plan(list(range(16))), {"original": 16, "effective": 16})
    check_rows(_plan(list(range(4))), {"original": 16, "effective": 4})  # --limit 4
    with pytest.raises(StageRefused, match=r"holds 1 row\(s\) twice: doc_id 3 \(lines 4 and 17\)"):
        check_rows(_plan([*range(16), 3]), {"original": 16, "effective": 16})
    with pytest.raises(StageRefused, match=r"holds 14 of the 16 rows .*missing doc_id 7, 9\)"):
        check_rows(_plan([i for i in range(16) if i not in (7, 9)]), {"effective": 16})
    with pytest.raises(StageRefused, match="records no n-samples"):
        check_rows(_plan(list(range(16))), None)
    plan = _plan([i for i in range(16) if i != 7])
    check_rows(plan, {"effective": 16}, partial=True)
    assert plan.missing == [7] and plan.n_expected == 16
    with pytest.raises(StageRefused, match="twice"):  # --partial never accepts duplicates
        check_rows(_plan([1, 1]), {"effective": 16}, partial=True)


def test_report_out_unwritable_is_exit_3_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import json

    from emo_tasks.cli import main

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "20260101_000000_results.json").write_text(json.dumps({"results": {}}))
    afile = tmp_path / "a_file"
    afile.write_text("x")
    for out in (tmp_path, afile / "under.md"):  # a folder, a path under a file
        assert main(["report", str(tmp_path / "run"), "--out", str(out)]) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("emo-tasks report: error: ") and "Traceback" not in "\n".join(err)


def test_a_deferred_answers_file_is_used_only_for_a_run_that_deferred(tmp_path: Path) -> None:
    """A folder's emo_tasks_judge/ can hold the answers file of an earlier EMO_JUDGE=defer run: a run that judged
    the task in process (counts not null) never takes it for its own; two such files are refused."""
    import json

    from emo_tasks.judging.stage import NoAnswers, logged_samples

    task = "mme_emotion_sample_er_lab"
    results = tmp_path / "model" / "20260102_000000_results.json"
    results.parent.mkdir()
    results.write_text("{}")
    folder = tmp_path / "emo_tasks_judge"
    folder.mkdir()
    answers = folder / "sample_mme_emotion_er_lab_20260101T000000_answers.jsonl"
    answers.write_text(json.dumps({"doc_id": 0, "target": "t", "filtered_resps": "a"}) + "\n")
    deferred = {"results": {task: {"n_scored,none": None}}}
    judged = {"results": {task: {"n_scored,none": 2}}}
    path, rows = logged_samples(tmp_path, results, task, deferred)
    assert path == answers and [r.doc_id for r in rows] == [0]
    with pytest.raises(NoAnswers):
        logged_samples(tmp_path, results, task, judged)
    (folder / "sample_mme_emotion_er_lab_20260103T000000_answers.jsonl").write_text(answers.read_text())
    with pytest.raises(StageRefused, match="2 deferred answer files"):
        logged_samples(tmp_path, results, task, deferred)


def test_a_folder_named_by_the_old_rule_is_found_by_what_it_asked_for(tmp_path: Path) -> None:
    """A judged folder named before issue 42 (its hash covered the endpoint and what `/models` reported) stays the
    setup's folder: found by the judge setup its newest results record, when that asks for the same."""
    import json

    from emo_tasks.judging.stage import judged_dir
    from judges.fingerprint import fingerprint

    roles = {"judge": ("gpt-4o", {"temperature": 0.0}), "step": ("gpt-4.1", {"temperature": 0.0})}
    served = fingerprint(roles, protocol="p", prompts="t", listing={"gpt-4o": {"id": "gpt-4o", "root": "/a"}})
    old = {**_setup(judge="gpt-4o"), "judge_fingerprint": {"mme": served}}
    now = {**old, "endpoint": "other:1", "judge_fingerprint": {"mme": fingerprint(roles, protocol="p", prompts="t",
                                                                                  listing=None)}}  # fmt: skip
    run = tmp_path / "run"
    for name, setup in (("judge=gpt-4o,step=gpt-4.1-0ld0ld0ld0", old), ("judge=gpt-4o,step=gpt-4.1-0ther0ther", {
            **old, "alpha": 0.3})):  # fmt: skip
        folder = run / "judged" / name
        folder.mkdir(parents=True)
        doc = {"emo_tasks_judge": {"judge_setup": setup}}
        (folder / "20260101_000000_results.json").write_text(json.dumps(doc))
    assert judged_dir(run, now).name == "judge=gpt-4o,step=gpt-4.1-0ld0ld0ld0"
    assert judged_dir(run, {**now, "alpha": 0.7}).name.startswith("judge=gpt-4o,step=gpt-4.1-")
    assert judged_dir(run, {**now, "alpha": 0.7}) != judged_dir(run, now)
