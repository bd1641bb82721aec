"""Every lmms-eval 0.7.3 flag on our tasks: the table in docs/lmms_eval.md ("Every lmms-eval flag on our tasks")
against the real parser, and each *works* / *refused* row through the real `lmms-eval` CLI.

Four lmms-eval runs in all, each one process: a reference run, a run with every flag that must keep a document's
numbers (checked per document against the reference), one `--config` file whose entries are refused one by one
(then a valid entry), and `--power-analysis`.  The fast tests need no run."""

from __future__ import annotations

import ast
import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import API_KEY, cli_env, unused_port, with_mme_sample

import emo_tasks
from emo_tasks.multiemo.hooks import POWER_ANALYSIS_MESSAGE
from emo_tasks.settings import REFUSED_FLAGS
from judges.testing import LoopbackServer, Reply, last_user_text

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "lmms_eval.md"
SECTION = "## Every lmms-eval flag on our tasks"
TASKS = "mme_emotion_sample,mvei_sample,multiemo_sample"


# ------------------------------------------------------------------------------------------------ fast: the table
def parser_flags() -> dict[str, set[str]]:
    """Every option string of lmms-eval's parsers, read from its source: the eval parser (`parse_eval_args` in
    lmms_eval/__main__.py) and each subcommand's (lmms_eval/cli/*_cmd.py), keyed by where it comes from."""
    import importlib.util

    spec = importlib.util.find_spec("lmms_eval")
    assert spec is not None and spec.origin is not None
    pkg = Path(spec.origin).parent
    sources = {"eval": pkg / "__main__.py", **{f.stem: f for f in sorted((pkg / "cli").glob("*_cmd.py"))}}
    found: dict[str, set[str]] = {}
    for name, path in sources.items():
        flags = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                flags |= {a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")}
        found[name] = flags
    return found


def table_rows(text: str | None = None) -> list[dict[str, str]]:
    """The rows of the doc's table: flag, status, what, test (the cells as written)."""
    text = DOC.read_text() if text is None else text
    assert SECTION in text, f"{DOC} has no section {SECTION!r}"
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in body.splitlines():
        if not line.startswith("|") or set(line) <= {"|", "-", " "}:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0].lower() == "flag":
            continue
        assert len(cells) == 4, f"a row of the flag table needs 4 cells: {line}"
        rows.append(dict(zip(("flag", "status", "what", "test"), cells, strict=True)))
    return rows


def named_flags(rows: list[dict[str, str]]) -> set[str]:
    return {m for row in rows for m in re.findall(r"`(-[-\w]+)", row["flag"])}


def missing_flags(rows: list[dict[str, str]]) -> dict[str, list[str]]:
    named = named_flags(rows)
    return {src: sorted(flags - named) for src, flags in parser_flags().items() if flags - named}


def missing_tests(rows: list[dict[str, str]]) -> list[str]:
    """Each *works* / *refused* row's test(s) that do not exist (a row without any counts too)."""
    bad = []
    for row in rows:
        status = row["status"].strip("*").split()[0].lower()
        if status not in ("works", "refused"):
            continue
        tests = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", row["test"])
        if not tests:
            bad.append(f"{row['flag']}: no test named")
        for path, name in tests:
            file = ROOT / path
            if not file.exists() or not re.search(rf"^def {name}\(", file.read_text(), re.M):
                bad.append(f"{row['flag']}: {path}::{name}")
    return bad


def test_the_table_names_every_flag_of_the_real_parser() -> None:
    rows = table_rows()
    assert not missing_flags(rows), f"flags of lmms-eval 0.7.3 the table in {DOC.name} does not name"
    statuses = Counter(row["status"].strip("*").split()[0].lower() for row in rows)
    assert set(statuses) <= {"works", "refused", "not", "todo"}, statuses  # "not applicable"
    # the check can fail: a table without one row is caught, and so is a parser flag no row names
    without_limit = [row for row in rows if "`--limit`" not in row["flag"]]
    assert missing_flags(without_limit) == {"eval": ["--limit"]}
    for flag in ("--config", "--launcher_args", "--baseline", "--effect-size"):
        assert flag in parser_flags()["eval"]


def test_every_works_and_refused_row_names_a_test_that_exists() -> None:
    rows = table_rows()
    assert not missing_tests(rows)
    assert any(row["status"].startswith("works") for row in rows) and any("refused" in r["status"] for r in rows)
    # the check can fail: a renamed test, a missing module, a row without a test
    row = next(r for r in rows if r["status"].startswith("works") and "::" in r["test"])
    broken = [{**row, "test": row["test"].replace("::test_", "::test_gone_")}]
    assert missing_tests(broken) and missing_tests([{**row, "test": "`tests/nowhere.py::test_x`"}])
    assert missing_tests([{**row, "test": ""}]) == [f"{row['flag']}: no test named"]


def test_a_refusal_outside_lmms_eval_is_silent() -> None:
    """`emo-tasks judge`, VLMEvalKit and a bare TaskManager load our tasks without lmms-eval's evaluator: nothing
    to refuse there (the flags are lmms-eval's)."""
    from emo_tasks.settings import lmms_eval_call, refuse_lmms_flags

    assert lmms_eval_call() is None
    refuse_lmms_flags("MVEI", own_repeats=3, judged_in_process=True)


def test_predict_only_is_read_from_lmms_evals_call_whatever_its_spelling(monkeypatch: pytest.MonkeyPatch) -> None:
    """MME-Emotion defers its judge under `--predict_only`; `-x`, a `--config` entry or the Python API reach lmms-eval's
    `simple_evaluate(predict_only=True)` without that word on the command line: the call is what counts."""
    from emo_tasks.settings import lmms_eval_predict_only

    monkeypatch.setattr(sys, "argv", ["lmms-eval", "-x"])
    scope: dict[str, Any] = {"__name__": "lmms_eval.evaluator", "probe": lmms_eval_predict_only}
    exec("def simple_evaluate(predict_only=False):\n    return probe()", scope)
    assert scope["simple_evaluate"](predict_only=True) is True
    assert scope["simple_evaluate"](predict_only=False) is False
    assert lmms_eval_predict_only() is False  # no lmms-eval call: the command line, which has no --predict_only
    monkeypatch.setattr(sys, "argv", ["lmms-eval", "--predict_only"])
    assert lmms_eval_predict_only() is True


# ------------------------------------------------------------------------------------------ slow: the real runs
def responder_for(seen: list[dict[str, Any]]):
    """Answers that depend only on the request (text and media) and how often this server saw it: a rerun of a
    document gets the answers the first run got, in whatever order lmms-eval sends them."""
    times: Counter[str] = Counter()

    def answer(body: dict, attempt: int) -> Reply:
        text = last_user_text(body)
        # keyed on the whole request (text and image): two MVEI pairs can share a statement, and which of them
        # lmms-eval sends first is its scheduling (-b 2), not the document
        key = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()
        k = times[key]
        times[key] += 1
        digest = int(key, 16)
        roles = [m["role"] for m in body["messages"]]
        if "Statement:" in text:
            kind, reply = "mvei", "Correct" if (digest + k) % 3 else "Incorrect"
        elif "How much will people feel" in text:
            kind, reply = "multiemo", f"Score: {10 + digest % 80}. Reason: colours."
        else:
            kind, reply = "mme", "The face is tense. Answer: " + ("anger" if digest % 2 else "neutral")
        seen.append({"kind": kind, "max_tokens": body.get("max_tokens"), "roles": roles})
        return Reply(text=reply)

    return answer


def lmms_eval(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "lmms_eval", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    (cwd / f"log_{len(list(cwd.glob('log_*')))}.txt").write_text(proc.stdout + "\n=====\n" + proc.stderr)
    return proc


def results_of(out: Path) -> dict[str, Any]:
    files = sorted(out.rglob("*_results.json"))
    assert files, f"no results file under {out}"
    return json.loads(files[-1].read_text())


def samples_of(out: Path, task: str) -> dict[int, dict[str, Any]]:
    (file,) = out.rglob(f"*_samples_{task}.jsonl")
    return {s["doc_id"]: s for s in map(json.loads, file.read_text().splitlines())}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The reference run, then the same tasks with every flag that must keep each document's numbers, over the
    same response cache: `--limit 8 --offset 1 --use_cache C --cache_requests delete --process_docs_parallel 1
    -b 2 --seed 7 --write_out --show_config --log_samples_suffix xyz --process_with_media --include_path DIR`."""
    tmp = tmp_path_factory.mktemp("flags")
    env = cli_env(with_mme_sample(tmp / "cache"), LM_HARNESS_CACHE_PATH=str(tmp / "request_cache"))
    (tmp / "request_cache").mkdir()
    seen: dict[str, list[dict[str, Any]]] = {"ref": [], "flags": []}
    procs = {}
    common = ["--tasks", TASKS, "--log_samples", "--use_cache", str(tmp / "responses"), "--gen_kwargs",
              "max_new_tokens=77"]  # fmt: skip
    flags = ["--limit", "8", "--offset", "1", "--cache_requests", "delete", "--process_docs_parallel", "1",
             "-b", "2", "--seed", "7", "--write_out", "--show_config", "--log_samples_suffix", "xyz",
             "--process_with_media", "--include_path", str(Path(emo_tasks.__file__).parent)]  # fmt: skip
    port = unused_port()  # one model_args for both runs: the response cache keys on them (base_url included)
    for name, extra in (("ref", []), ("flags", flags)):
        with LoopbackServer(responder=responder_for(seen[name]), expected_api_key=API_KEY, port=port) as srv:
            model_args = f"model_version=eval-model,base_url={srv.base_url},api_key={API_KEY},max_frames_num=2"
            procs[name] = lmms_eval(env, tmp, "--model", "openai", "--model_args", model_args,
                                    "--output_path", str(tmp / name), *common, *extra)  # fmt: skip
    yield {"tmp": tmp, "seen": seen, "procs": procs}


def _records(sample: dict[str, Any], metric: str) -> Any:
    record = dict(sample[metric])
    record.pop("answers", None)  # the order of a document's three answers is lmms-eval's; the decision is not
    for key in ("decisions", "strict_decisions"):
        if key in record:
            record[key] = sorted(record[key])
    return record


@pytest.mark.slow
def test_limit_and_offset(two_runs: dict[str, Any]) -> None:
    """`--limit 8 --offset 1`: documents 1..8 of each task (MME-Emotion: its subtasks' row 1, each has 2), each
    with the reference run's record; MultiEmo's 8 documents cut 2 images, reported incomplete with null metrics."""
    ref, flags = two_runs["tmp"] / "ref", two_runs["tmp"] / "flags"
    results = results_of(flags)["results"]
    mvei_ref, mvei = samples_of(ref, "mvei_sample"), samples_of(flags, "mvei_sample")
    assert sorted(mvei) == list(range(1, 9)), two_runs["procs"]["flags"].stderr[-3000:]
    assert all(_records(mvei[d], "acc_total") == _records(mvei_ref[d], "acc_total") for d in mvei)
    assert results["mvei_sample"]["n_pairs,none"] == 8
    right = sum(mvei[d]["acc_total"]["right"] for d in mvei)
    assert results["mvei_sample"]["acc_total,none"] == pytest.approx(100 * right / 8)
    for sub in ("er_lab", "sa", "ir"):
        task = f"mme_emotion_sample_{sub}"
        cut, whole = samples_of(flags, task), samples_of(ref, task)
        assert list(cut) == [1] and cut[1]["rec_s"] == whole[1]["rec_s"]
    assert results["mme_emotion_sample"]["n_scored,none"] == 8
    assert sorted(samples_of(flags, "multiemo_sample")) == list(range(1, 9))
    multi = results["multiemo_sample"]
    assert multi["n_images_incomplete,none"] == 2 and multi["precision_ours,none"] is None


@pytest.mark.slow
def test_use_cache_answers_from_the_cache(two_runs: dict[str, Any]) -> None:
    """`--use_cache`: MME-Emotion's and MultiEmo's answers (temperature 0) come from the first run's cache, so the
    second run's server sees MVEI only (sampled at temperature 1: never cached), with the same records."""
    ref, flags = (Counter(s["kind"] for s in two_runs["seen"][n]) for n in ("ref", "flags"))
    assert ref == {"mme": 16, "mvei": 48, "multiemo": 48}
    assert flags == {"mvei": 8 * 3}, two_runs["procs"]["flags"].stderr[-3000:]
    assert list((two_runs["tmp"] / "responses").rglob("*.db"))


@pytest.mark.slow
def test_gen_kwargs_reach_the_model(two_runs: dict[str, Any]) -> None:
    assert {s["max_tokens"] for run in two_runs["seen"].values() for s in run} == {77}


@pytest.mark.slow
def test_flags_that_keep_the_numbers(two_runs: dict[str, Any]) -> None:
    """--process_docs_parallel 1, -b 2, --seed 7, --process_with_media, --cache_requests delete, --include_path
    (with the hook's own path): each document's record is the reference run's (test_limit_and_offset), and each
    flag's own effect is there."""
    flags_run = results_of(two_runs["tmp"] / "flags")
    config = flags_run["config"]
    assert config["process_docs_parallel"] == 1 and config["batch_size"] == "2"
    assert (config["random_seed"], config["numpy_seed"], config["torch_seed"]) == (7, 7, 7)
    assert config["resolved_cli_args"]["process_with_media"] is True
    assert not list((two_runs["tmp"] / "request_cache").iterdir())  # delete: no request cache kept
    ref = results_of(two_runs["tmp"] / "ref")["results"]
    assert ref["mvei_sample"]["n_pairs,none"] == 16 and ref["multiemo_sample"]["n_images,none"] == 6


@pytest.mark.slow
def test_write_out_show_config_and_the_ignored_suffix(two_runs: dict[str, Any]) -> None:
    """--write_out is taken (it prints document 0's prompt only: nothing here, after --offset 1), --show_config
    prints the whole results JSON; --log_samples_suffix is read nowhere in 0.7.3 (the samples files keep their
    names)."""
    out = two_runs["procs"]["flags"].stdout
    assert "DEPRECATION WARNING: --write_out" in out and '"configs": {' in out
    assert "How much will people feel" not in out
    names = [p.name for p in (two_runs["tmp"] / "flags").rglob("*samples_*.jsonl")]
    assert len(names) == 10 and not any("xyz" in n for n in names)


SGLANG_STANDIN = {
    "sglang/__init__.py": "",
    "sglang/srt/__init__.py": "",
    "sglang/test/__init__.py": "",
    "sglang/srt/utils.py": (
        "import json, os\n"
        "def kill_process_tree(pid):\n"
        "    with open(os.environ['SGLANG_STANDIN_LOG'], 'a') as f:\n"
        "        f.write(json.dumps({'event': 'clean', 'pid': pid}) + '\\n')\n"
    ),
    "sglang/test/test_utils.py": (
        "import json, os, types\n"
        "def popen_launch_server(model, base_url, timeout=None, api_key=None, other_args=()):\n"
        "    with open(os.environ['SGLANG_STANDIN_LOG'], 'a') as f:\n"
        "        f.write(json.dumps({'event': 'launch', 'model': model, 'base_url': base_url}) + '\\n')\n"
        "    return types.SimpleNamespace(pid=4242)\n"
    ),
}


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory, two_runs: dict[str, Any]) -> dict[str, Any]:
    """One lmms-eval process, one `--config` file of entries run one after another: three refused (MVEI with every
    generic refused flag at once and `--model from_log` on the reference run; MME-Emotion with `--launcher_args`
    and a judge configured; MultiEmo with `--repeats 3`), then MVEI with `--launcher_args` and `--repeats 3`,
    which runs.  A stand-in `sglang` package records what lmms-eval's launcher does."""
    tmp = tmp_path_factory.mktemp("refusals")
    for rel, text in SGLANG_STANDIN.items():
        (tmp / "standin" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "standin" / rel).write_text(text)
    subset = tmp / "subset.json"
    subset.write_text(json.dumps({"emo_tasks_subset": 1, "rows": {"mvei/sample": ["sample-01", "sample-02"]}}))
    judge = "http://127.0.0.1:9/v1"  # never called: MME-Emotion is refused before inference
    out = str(tmp / "out")
    entries = [
        {"model": "from_log", "model_args": f"logs={two_runs['tmp'] / 'ref'}", "tasks": "mvei_sample",
         "repeats": 5, "num_fewshot": 2, "system_instruction": "Be brief.", "apply_chat_template": True,
         "cache_requests": "refresh", "use_cache": str(tmp / "responses"), "max_tokens": 1000, "output_path": out},
        {"model": "dummy", "tasks": "mme_emotion_sample", "output_path": out,
         "launcher_args": "name=sglang,model=judge-b,port=30001"},
        {"model": "dummy", "tasks": "multiemo_sample", "repeats": 3, "output_path": out},
        {"model": "dummy", "tasks": "mvei_sample", "repeats": 3, "output_path": out,
         "launcher_args": "name=sglang,model=judge-d,port=30002,host=127.0.0.1"},
    ]  # fmt: skip
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump(entries))
    log = tmp / "launcher.jsonl"
    env = cli_env(tmp / "cache", OPENAI_BASE_URL=judge, OPENAI_API_KEY=API_KEY, EMO_SUBSET=str(subset),
                  SGLANG_STANDIN_LOG=str(log), LM_HARNESS_CACHE_PATH=str(tmp))  # fmt: skip
    env["PYTHONPATH"] = f"{tmp / 'standin'}:{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(tmp / "standin")
    proc = lmms_eval(env, tmp, "--config", str(config))
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return {"proc": proc, "out": Path(out), "events": events}


def _refusal_text(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_from_log_is_refused(refusals: dict[str, Any]) -> None:
    text = _refusal_text(refusals["proc"])
    assert "MVEI refuses lmms-eval flags that would give it wrong numbers" in text, text[-3000:]
    assert REFUSED_FLAGS["from_log"] in text


@pytest.mark.slow
def test_generic_flags_are_refused(refusals: dict[str, Any]) -> None:
    """Every refused flag of one entry is named in one message (MVEI, `--repeats 5`; MultiEmo, `--repeats 3`)."""
    text = _refusal_text(refusals["proc"])
    for name in ("num_fewshot", "system_instruction", "apply_chat_template", "cache_requests", "use_cache"):
        assert REFUSED_FLAGS[name].format(value=2).split(":")[0] in text, name
    assert REFUSED_FLAGS["max_tokens"] in text
    assert REFUSED_FLAGS["repeats"].format(value=5, benchmark="MVEI", own=3) in text
    assert REFUSED_FLAGS["repeats"].format(value=3, benchmark="MultiEmo-Bench", own=1) in text


@pytest.mark.slow
def test_launcher_args_refused_where_the_judge_runs_in_process(refusals: dict[str, Any]) -> None:
    """MME-Emotion with a judge: refused before inference (its launcher never started); MVEI (no judge): lmms-eval
    starts the server after inference and stops it before the aggregation, and MVEI's numbers come out (on the
    EMO_SUBSET's 2 pairs, `--repeats 3` being MVEI's own count)."""
    text = _refusal_text(refusals["proc"])
    assert "MME-Emotion refuses lmms-eval flags" in text and REFUSED_FLAGS["launcher_args"] in text
    assert [e["event"] for e in refusals["events"]] == ["launch", "clean"], refusals["events"]
    assert refusals["events"][0]["model"] == "judge-d"
    assert refusals["events"][0]["base_url"] == "http://127.0.0.1:30002"
    results = results_of(refusals["out"])["results"]
    assert set(results) == {"mvei_sample"} and results["mvei_sample"]["n_pairs,none"] == 2


@pytest.mark.slow
def test_config_file_entries_are_refused_or_run(refusals: dict[str, Any]) -> None:
    """`--config` (a list of entries, one process): our refusals read what lmms-eval uses, after the file's values
    (three refused, test_generic_flags_are_refused), and the entry after them runs normally."""
    assert len(list(refusals["out"].rglob("*_results.json"))) == 1


@pytest.mark.slow
def test_power_analysis(tmp_path: Path) -> None:
    """`--power-analysis`: MVEI's n is its pairs (one 0/1 per pair: the binary model fits); MultiEmo is skipped
    with our message (8 documents per image are not independent 0/1 scores); lmms-eval 0.7.3 leaves a group
    (mme_emotion_sample) out of the per-task part; its subtasks are counted when named."""
    env = cli_env(with_mme_sample(tmp_path / "cache"))
    proc = lmms_eval(env, tmp_path, "--power-analysis", "--tasks",
                     "mvei_sample,multiemo_sample,mme_emotion_sample,mme_emotion_sample_er_lab")  # fmt: skip
    out = proc.stdout
    assert re.search(r"mvei_sample:\s+Sample size:\s+n = 16", out), out[-3000:]
    assert re.search(r"mme_emotion_sample_er_lab:\s+Sample size:\s+n = 2", out)
    assert "multiemo_sample:" not in out.replace("'multiemo_sample'", "") and POWER_ANALYSIS_MESSAGE in out
    assert "mme_emotion_sample:" not in out
