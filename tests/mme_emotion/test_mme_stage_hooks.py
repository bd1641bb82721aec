"""MME-Emotion's hooks for the judge stage (issue 12), in process: `load_task`, `doc_to_target`, EMO_JUDGE=defer,
the summary's endpoint / API models / usage, and the dry run `plan` against a real loopback server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import datasets
import pytest
from conftest import API_KEY, with_mme_sample

from emo_tasks.common import LastResult, row_target
from emo_tasks.mme_emotion import hooks
from emo_tasks.mme_emotion.scoring import TABLE, group_aggregate
from emo_tasks.settings import SettingsError
from judges.testing import LoopbackServer, Reply, last_user_text

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # bpe_openai's importlib.resources use

TASKS = ("ER-Lab", "ML-ER")
ANSWER = "Tense voice, lowered brows. Answer: anger"
JUDGE_DEPENDENT = ("rec_s", "rea_s", "cot_s", "rec_s_strict", "avg_step", "n_scored", "n_judge_failed")


def sample_env(cache: Path, **extra: str) -> dict[str, str]:
    return {"EMO_CACHE_DIR": str(with_mme_sample(cache)), "EMO_PROGRESS": "0", **extra}


def loopback_env(cache: Path, srv: LoopbackServer, **extra: str) -> dict[str, str]:
    return sample_env(
        cache,
        OPENAI_BASE_URL=srv.base_url,
        OPENAI_API_KEY=API_KEY,
        EMO_JUDGE_BACKOFF_BASE="0.01",
        EMO_JUDGE_BACKOFF_MAX="0.05",
        EMO_JUDGE_TIMEOUT="5",
        **extra,
    )


def records_for(task: str, env: dict[str, str], answer: str = ANSWER):
    docs = hooks.load_task(f"mme_emotion/sample/{task}", env)
    return docs, [hooks.process_results(d, [answer])["rec_s"] for d in docs]


@pytest.fixture(autouse=True)
def fresh_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test judges afresh (the memo key leaves out `args`) and sees its own deferred-run notice."""
    monkeypatch.setattr(hooks.STATE, "memo", LastResult())
    monkeypatch.setattr(hooks.STATE, "_notices", set())


# --------------------------------------------------------------------------------------------- load_task
def test_load_task_is_process_docs_with_the_given_environment(tmp_path: Path, monkeypatch) -> None:
    env = sample_env(tmp_path / "cache", EMO_JUDGE="offline", EMO_MME_ALPHA="0.25")
    docs = hooks.load_task("mme_emotion/sample/ER-Lab", env)
    assert [d["row"] for d in docs] == list(range(len(docs))) == [0, 1]  # doc_id = index
    loaded = hooks.STATE.tasks.get("sample", "ER-Lab")
    assert (loaded.settings.alpha, loaded.settings.judge_mode) == (0.25, "offline")  # from `env`, not os.environ
    assert loaded.index == {0: 0, 1: 1}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    dataset = hooks.process_docs(datasets.Dataset.from_list([{"emo_source": "mme_emotion/sample/ER-Lab"}]))
    assert dataset.to_list() == docs
    with pytest.raises(SettingsError, match="EMO_MME_ALPHA='2'"):
        hooks.load_task("mme_emotion/sample/ER-Lab", {**env, "EMO_MME_ALPHA": "2"})


def test_the_stage_api_is_exported_by_hooks() -> None:
    for name in ("load_task", "doc_to_text", "doc_to_target", "process_results", "evaluate", "plan"):
        assert callable(getattr(hooks, name)), name


def test_process_results_takes_the_answer_as_any_samples_file_holds_it(tmp_path: Path) -> None:
    """lmms-eval 0.7.3's samples file unwraps a one-request document's `filtered_resps`; a list of one is the
    same answer (the stage passes `[filtered_resps]` either way)."""
    (doc, *_), _ = records_for("IR", sample_env(tmp_path, EMO_JUDGE="offline"))
    assert hooks.process_results(doc, [[ANSWER]]) == hooks.process_results(doc, [ANSWER])
    assert hooks.process_results(doc, [ANSWER])["rec_s"]["answer"] == ANSWER


# --------------------------------------------------------------------------------------------- doc_to_target
def test_doc_to_target_is_portable_across_machines(tmp_path: Path) -> None:
    """The same rows under two different sample roots (two EMO_CACHE_DIRs): other paths, the same targets."""
    a = hooks.load_task("mme_emotion/sample/FG-ER", sample_env(tmp_path / "a", EMO_JUDGE="offline"))
    targets_a = [hooks.doc_to_target(d) for d in a]
    b = hooks.load_task("mme_emotion/sample/FG-ER", sample_env(tmp_path / "b", EMO_JUDGE="offline"))
    targets_b = [hooks.doc_to_target(d) for d in b]
    assert [d["video_path"] for d in a] != [d["video_path"] for d in b]
    assert targets_a == targets_b and len(set(targets_a)) == len(a)
    for doc, target in zip(a, targets_a, strict=True):
        assert re.fullmatch(re.escape(doc["label"]) + r" #[0-9a-f]{12}", target)
        assert str(tmp_path) not in target
        content = {
            "task": "FG-ER", "row": doc["row"], "video_id": doc["video_id"], "label": doc["label"],
            "label_set": doc["label_set"], "data_source": "sample", "audio_clue": doc["audio_clue"],
        }  # fmt: skip
        assert target == row_target(doc["label"], content)


def test_doc_to_target_pins_the_data_the_judge_uses(tmp_path: Path) -> None:
    docs = hooks.load_task("mme_emotion/sample/SA", sample_env(tmp_path / "c", EMO_JUDGE="offline"))
    doc = docs[0]
    target = hooks.doc_to_target(doc)
    assert hooks.doc_to_target({**doc, "video_path": "/elsewhere/x.mp4"}) == target  # paths are not content
    assert hooks.doc_to_target({**doc, "label_set": doc["label_set"][::-1]}) != target
    assert hooks.doc_to_target({**doc, "audio_clue": "another clue"}) != target  # released clues are judge input
    # live clues: the released clue is not what the judge sees, so it is not pinned
    hooks.load_task("mme_emotion/sample/SA", sample_env(tmp_path / "c", EMO_JUDGE="defer", EMO_MME_AUDIO_CLUES="live"))
    assert hooks.doc_to_target({**doc, "audio_clue": "another clue"}) == hooks.doc_to_target(doc)


# --------------------------------------------------------------------------------------------- defer
def test_defer_needs_no_endpoint_but_still_checks_every_value(tmp_path: Path) -> None:
    from emo_tasks.mme_emotion.settings import JUDGE_MODES, MMESettings
    from judges.config import JudgeConfigError

    assert JUDGE_MODES == ("auto", "api", "offline", "defer")
    for source in ("sample", "benchmark"):
        s = MMESettings.from_env(sample_env(tmp_path, EMO_JUDGE="Defer"), source)
        assert (s.judge_mode, s.models) == ("defer", ())
    with pytest.raises(JudgeConfigError, match="EMO_JUDGE=defer"):  # the no-judge message offers it
        MMESettings.from_env(sample_env(tmp_path), "benchmark")
    for typo in ({"EMO_JUDGE_CONCURRENCY": "abc"}, {"API_TYPE": "azur"}, {"EMO_MME_ALPHA": "2"}):
        with pytest.raises((SettingsError, JudgeConfigError)):
            MMESettings.from_env(sample_env(tmp_path, EMO_JUDGE="defer", **typo), "benchmark")


def test_defer_reports_judge_metrics_as_none_and_keeps_the_answers(tmp_path: Path, capsys) -> None:
    env = sample_env(tmp_path / "cache", EMO_JUDGE="defer")  # no endpoint configured: none needed
    out = tmp_path / "out"
    args = SimpleNamespace(output_path=str(out), log_samples=False)
    per_task = {}
    for task in TASKS:
        docs, records = records_for(task, env)
        assert hooks.STATE.tasks.get("sample", task).settings.judge_mode == "defer"
        per_task[task] = (docs, hooks.evaluate(records, args))
    for _task, (_docs, metrics) in per_task.items():
        assert list(metrics) == list(TABLE.names)
        assert all(metrics[m] is None for m in JUDGE_DEPENDENT), metrics
        assert metrics["avg_token"] > 0
    for metric in TABLE.names:  # the group's numbers
        group = group_aggregate([m[metric] for _, m in per_task.values()], [2, 2])
        assert (group is None) == (metric != "avg_token"), metric
    err = capsys.readouterr().err
    line = f"emo-tasks: MME-Emotion judging deferred: run  emo-tasks judge {out}"
    assert err.count("emo-tasks judge") == 1 and line in err  # one line for the run, not one per task
    answers = sorted((out / "emo_tasks_judge").glob("*_answers.jsonl"))
    assert [p.name.split("_2")[0] for p in answers] == ["sample_mme_emotion_er_lab", "sample_mme_emotion_ml_er"]
    assert not list((out / "emo_tasks_judge").glob("*_judge.jsonl"))  # nothing judged, no judge log
    for path, (docs, _) in zip(answers, per_task.values(), strict=True):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        assert rows == [
            {"doc_id": i, "target": hooks.doc_to_target(d), "filtered_resps": ANSWER} for i, d in enumerate(docs)
        ]


def test_defer_with_log_samples_or_without_output_path(tmp_path: Path, capsys) -> None:
    env = sample_env(tmp_path / "cache", EMO_JUDGE="defer")
    _, records = records_for("IR", env)
    out = tmp_path / "out"
    metrics = hooks.evaluate(records, SimpleNamespace(output_path=str(out), log_samples=True))
    assert metrics["rec_s"] is None and not (out / "emo_tasks_judge").exists()  # lmms-eval's samples file has them
    assert f"emo-tasks judge {out}" in capsys.readouterr().err
    hooks.STATE.memo = LastResult()
    hooks.evaluate(records, None)
    err = capsys.readouterr().err
    assert "only kept with --output_path and --log_samples" in err and err.count("\n") == 1


# --------------------------------------------------------------------------------------------- loopback judge
class Judge:
    """Step agent and judge on the loopback server; `judge_ok=False` makes the judge refuse (HTTP 400)."""

    def __init__(self) -> None:
        self.judge_ok = True

    def __call__(self, body: dict[str, Any], attempt: int) -> Reply:
        text = last_user_text(body)
        if text.startswith("Given the following answer"):
            return Reply(text="<step>Step 1: The voice is tense. Step 2: The emotion is anger.</step>",
                         completion_tokens=11)  # fmt: skip
        if "Rating Requirements" in text:
            if not self.judge_ok:
                return Reply(kind="status", status=400, text="judge refused")
            m = re.search(r"has (\d+) step\(s\)", text)  # guarded; the official prompt does not say
            n = int(m.group(1)) if m else 2
            return Reply(text="<score>" + ", ".join(f"Step {i + 1}: 1/1" for i in range(n)) + "</score>",
                         completion_tokens=5)  # fmt: skip
        return Reply(kind="status", status=400, text="unexpected request")


def _calls(srv: LoopbackServer) -> dict[str, int]:
    """HTTP calls the server saw, by agent (the step agent's model vs the judge's)."""
    out = {"step": 0, "judge": 0}
    for call in srv.calls:
        out["step" if call.model == "gpt-4.1-2025-04-14" else "judge"] += 1
    return out


def test_summary_records_endpoint_api_models_and_usage(tmp_path: Path) -> None:
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        env = loopback_env(tmp_path / "cache", srv)
        _, records = records_for("ML-ER", env)
        hooks.evaluate(records, SimpleNamespace(output_path=str(tmp_path / "out1"), log_samples=True))
        first = _calls(srv)
        hooks.STATE.memo = LastResult()
        hooks.evaluate(records, SimpleNamespace(output_path=str(tmp_path / "out2"), log_samples=True))
        port = srv.base_url.split(":")[2].split("/")[0]
    assert first == {"step": 1, "judge": 2} and len(srv.calls) == 3  # the rerun is answered by the cache
    summaries = []
    for out in ("out1", "out2"):
        (path,) = (tmp_path / out / "emo_tasks_judge").glob("*_summary.json")
        assert API_KEY not in path.read_text()
        summaries.append(json.loads(path.read_text()))
    s1, s2 = summaries
    assert s1["judge_endpoint"] == s2["judge_endpoint"] == f"127.0.0.1:{port}"
    models = {"step": {"gpt-4.1-2025-04-14": 2}, "judge": {"gpt-4o-2024-11-20": 2}}
    assert s1["api_models"] == s2["api_models"] == models  # what the API reported, cached answers included
    assert s1["usage"]["step"] == {
        "requests": 2,
        "unique_requests": 1,
        "cache_hits": 0,
        "calls": 1,
        "prompt_tokens": s1["usage"]["step"]["prompt_tokens"],
        "completion_tokens": 11,
    }
    assert s1["usage"]["judge"]["calls"] == 2 and s1["usage"]["judge"]["completion_tokens"] == 10
    assert s1["usage"]["step"]["prompt_tokens"] > 0 and s1["usage"]["judge"]["prompt_tokens"] > 0
    assert s2["usage"] == {
        r: {"requests": 2, "unique_requests": u, "cache_hits": 2, "calls": 0, "prompt_tokens": 0,
            "completion_tokens": 0}
        for r, u in (("step", 1), ("judge", 2))
    }  # fmt: skip
    # the keys the report and compare read are unchanged
    for key in ("judge_models", "judge_protocol", "judge_mode", "alpha", "prompt_hashes", "data_source",
                "judge_failures"):  # fmt: skip
        assert s1[key] == s2[key]
    assert list(s1)[:16] == [
        "benchmark", "tasks", "data_source", "judge_mode", "judge_protocol", "audio_clues", "judge_models",
        "judge_fingerprint", "alpha",
        "prompt_hashes", "n_samples", "metrics", "judge_failures", "n_rule_differs", "per_category", "seconds",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("url", "host"),
    [(None, "api.openai.com"), ("http://127.0.0.1:8765/v1", "127.0.0.1:8765"),
     ("https://user:secret@my.openai.azure.com/openai?x=1", "my.openai.azure.com"),
     ("http://[::1]:9000/v1", "[::1]:9000")],
)  # fmt: skip
def test_judge_endpoint_is_host_and_port_only(tmp_path: Path, url: str | None, host: str) -> None:
    from emo_tasks.mme_emotion.settings import MMESettings

    env = sample_env(tmp_path, OPENAI_API_KEY=API_KEY, **({"OPENAI_BASE_URL": url} if url else {}))
    assert hooks.judge_endpoint(MMESettings.from_env(env, "sample")) == host


# --------------------------------------------------------------------------------------------- dry run
def _by_agent(plan: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["agent"]: p for p in plan}


def test_plan_counts_what_the_run_then_sends_and_what_is_cached(tmp_path: Path) -> None:
    judge = Judge()
    with LoopbackServer(responder=judge, expected_api_key=API_KEY) as srv:
        env = loopback_env(tmp_path / "cache", srv)
        records = [r for task in ("ER-Lab", "FG-ER", "SA") for r in records_for(task, env)[1]]
        n = len(records)

        # 1. nothing cached: the step agent exact, every judge request estimated
        before = _by_agent(hooks.plan(records))
        assert [*before] == ["step", "judge"] and srv.calls == []  # a dry run sends nothing
        step, jdg = before["step"], before["judge"]
        assert (step["model"], jdg["model"]) == ("gpt-4.1-2025-04-14", "gpt-4o-2024-11-20")
        assert (step["requests"], step["unique_requests"], step["cached"], step["estimated"]) == (n, 3, 0, 0)
        assert (jdg["requests"], jdg["cached"], jdg["to_send"], jdg["estimated"]) == (n, 0, n, n)
        assert step["max_tokens"] is None and step["output_tokens_max"] is None  # unbounded
        assert step["output_tokens_cached"] == jdg["output_tokens_cached"] == 0

        # 2. the step agent answers, the judge refuses: step answers cached, so the judge requests become exact
        judge.judge_ok = False
        hooks.evaluate(records)
        assert _calls(srv) == {"step": step["to_send"], "judge": n}
        srv.reset_log()
        middle = _by_agent(hooks.plan(records))
        assert (middle["step"]["cached"], middle["step"]["to_send"], middle["step"]["output_tokens_cached"]) == (
            n, 0, 3 * 11,
        )  # fmt: skip
        assert (middle["judge"]["cached"], middle["judge"]["to_send"], middle["judge"]["estimated"]) == (0, n, 0)
        assert srv.calls == []

        # 3. the real run sends exactly what the plan said
        judge.judge_ok = True
        hooks.STATE.memo = LastResult()
        hooks.evaluate(records)
        assert _calls(srv) == {"step": 0, "judge": middle["judge"]["to_send"]}

        # 4. after the run: everything cached, nothing to send
        after = _by_agent(hooks.plan(records))
        assert (after["judge"]["cached"], after["judge"]["to_send"], after["judge"]["output_tokens_cached"]) == (
            n, 0, n * 5,
        )  # fmt: skip
        assert after["judge"]["input_tokens"] == after["step"]["input_tokens"] == 0


def test_plan_judge_requests_have_the_run_cache_keys(tmp_path: Path) -> None:
    """The dry run's exact judge requests are the run's, to the cache key (guarded and official protocols)."""
    for protocol in ("guarded", "official"):
        with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
            env = loopback_env(tmp_path / protocol, srv, EMO_MME_JUDGE_PROTOCOL=protocol)
            _, records = records_for("FG-SA", env)
            hooks.STATE.memo = LastResult()
            hooks.evaluate(records)
            keys = set(srv.keys_answered())
            plan = _by_agent(hooks.plan(records))
        assert len(keys) == 3 and plan["judge"]["cached"] == 2 and plan["step"]["cached"] == 2, protocol
