"""`emo-tasks export` never mixes runs and fails with its documented codes (issue 19, items 5/7/8, export part).

Exit codes: 0 exported; 2 refused (no run or several and none picked, --out not empty without --force, a run not
judged yet); 3 error (a bad argument: --out unusable, an empty --model-name; malformed input; a crash), always one
line on stderr and never a traceback.

No secret reaches an export (issue 32, items 4 and 8): `model_args` recorded as a dict is masked by key everywhere a
run's configuration is shown or written (report, view, export provenance), and a secret environment variable's value
that the model repeated in its answer is masked in every file an export writes.

Slow tests go through the real CLI (`python -m emo_tasks export ...`) on real lmms-eval runs (`--model dummy`,
the three sample tasks, MME-Emotion judged in process by the loopback judge), made once per module: a judged run
and a `--predict_only` run.  The file bookkeeping (what an export wrote, what --force may remove) and the staged
write are tested in process too (fast).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from argparse import Namespace
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import API_KEY, cli_env, run_emo, with_mme_sample
from fakes import Judge

from emo_tasks.mvei import export as mvei_export
from emo_tasks.results import export
from judges.testing import LoopbackServer

TASKS = "mme_emotion_sample,mvei_sample,multiemo_sample"
FIRST_ANSWER = "Correct. Score: 70. The emotion is anger."
SECOND_ANSWER = "Incorrect. Score: 20. The emotion is calm."


# ------------------------------------------------------------------------------------------------ real runs
def _env(cache: Path, srv: LoopbackServer | None = None) -> dict[str, str]:
    return cli_env(cache, srv)


def lmms(out: Path, cache: Path, *flags: str, answer: str = FIRST_ANSWER, judge: bool = True) -> None:
    """One real lmms-eval run of the three sample tasks into `out` (dummy model answering `answer`); MME-Emotion
    is judged in process by the loopback judge unless `--predict_only` is among the flags."""
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={answer}",
               "--tasks", TASKS, "--batch_size", "1", "--output_path", str(out), *flags]  # fmt: skip
        before = set(out.rglob("*_results.json"))
        proc = subprocess.run(cmd, env=_env(cache, srv if judge else None), capture_output=True, text=True,
                              timeout=900, cwd=out.parent)  # fmt: skip
    assert set(out.rglob("*_results.json")) - before, proc.stdout[-2000:] + proc.stderr[-4000:]


def emo_export(*args: str, cache: Path, **env: str) -> subprocess.CompletedProcess:
    """`emo-tasks export ARGS` through the CLI; `env`: variables added to the test environment."""
    return subprocess.run([sys.executable, "-m", "emo_tasks", "export", *args], env={**_env(cache), **env},
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def one_line(proc: subprocess.CompletedProcess) -> str:
    """The failure message: exactly one line on stderr, no traceback, nothing on stdout."""
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert err and len(err.splitlines()) == 1, proc.stderr
    assert proc.stdout == "", proc.stdout
    return err


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A judged run and a --predict_only run (never modified by the tests: they copy them first)."""
    root = tmp_path_factory.mktemp("export_safety")
    caches = {name: with_mme_sample(root / f"cache_{name}") for name in ("judged", "predict")}  # before the threads
    with ThreadPoolExecutor(max_workers=2) as pool:
        judged = pool.submit(lmms, root / "judged", caches["judged"], "--log_samples")
        predict = pool.submit(lmms, root / "predict", caches["predict"], "--predict_only", "--log_samples",
                              judge=False)  # fmt: skip
        judged.result()
        predict.result()
    return {"judged": root / "judged", "predict": root / "predict", "cache": root / "cache_judged", "root": root}


@pytest.fixture(scope="module")
def two_runs(runs: dict[str, Path]) -> tuple[Path, list[Path]]:
    """The judged run's folder plus a second judged run written into it (other answers): two lmms-eval results
    files, and MME-Emotion judge logs of both in one emo_tasks_judge/ (the newest are the second run's)."""
    folder = runs["root"] / "two_runs"
    shutil.copytree(runs["judged"], folder)
    lmms(folder, with_mme_sample(runs["root"] / "cache_second"), "--log_samples", answer=SECOND_ANSWER)
    results = sorted(folder.rglob("*_results.json"), key=lambda p: p.name)
    assert len(results) == 2
    return folder, results


def exported_files(out: Path) -> set[str]:
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if not p.is_dir()}


# ------------------------------------------------------------------------------------------------ 1. --out not empty
@pytest.mark.slow
def test_export_into_a_previous_export_needs_force_and_then_holds_only_the_new_one(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "submission"
    first = emo_export(str(runs["judged"]), "--format", "mme-official", "--out", str(out), "--model-name", "First",
                       cache=runs["cache"])  # fmt: skip
    assert first.returncode == 0, first.stderr
    before = exported_files(out)
    assert any("First" in f for f in before)

    again = emo_export(str(runs["judged"]), "--format", "mme-official", "--out", str(out), "--model-name", "Second",
                       cache=runs["cache"])  # fmt: skip
    assert again.returncode == 2, again.stderr
    msg = one_line(again)
    assert str(out) in msg and "--force" in msg
    assert exported_files(out) == before  # nothing written, nothing removed

    forced = emo_export(str(runs["judged"]), "--format", "mme-official", "--out", str(out), "--model-name",
                        "Second", "--force", cache=runs["cache"])  # fmt: skip
    assert forced.returncode == 0, forced.stderr
    now = exported_files(out)
    assert not any("First" in f for f in now), sorted(f for f in now if "First" in f)  # no stale file
    summary = json.loads((out / "summary.json").read_text())
    prov = json.loads((out / "provenance.json").read_text())
    assert set(prov["files"]) == now == set(summary["files"])  # the complete list of what the export wrote
    assert export.check_schema(prov, "provenance") == []
    assert not [p for p in tmp_path.iterdir() if p.name != "submission"]  # no staging folder left beside it


@pytest.mark.slow
def test_force_never_removes_files_no_export_wrote(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "submission"
    args = [str(runs["judged"]), "--format", "mvei-official", "--out", str(out)]
    assert emo_export(*args, cache=runs["cache"]).returncode == 0
    (out / "my_notes.txt").write_text("keep me")
    (out / "drafts").mkdir()
    (out / "drafts" / "letter.md").write_text("keep me too")
    before = exported_files(out)
    forced = emo_export(str(runs["judged"]), "--format", "multiemo-table", "--out", str(out), "--force",
                        cache=runs["cache"])  # fmt: skip
    assert forced.returncode == 2, forced.stderr
    msg = one_line(forced)
    assert "my_notes.txt" in msg and str(out) in msg
    assert exported_files(out) == before  # refused before anything was removed

    plain = tmp_path / "plain"  # a folder that never held an export
    plain.mkdir()
    (plain / "data.csv").write_text("a,b\n")
    for extra in ([], ["--force"]):
        proc = emo_export(str(runs["judged"]), "--format", "mvei-official", "--out", str(plain), *extra,
                          cache=runs["cache"])  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert str(plain) in one_line(proc)
        assert exported_files(plain) == {"data.csv"}


# ------------------------------------------------------------------------------------------------ 2./3. bad arguments
@pytest.mark.slow
@pytest.mark.parametrize("where", ["existing file", "under a file", "name too long"])
def test_unusable_out_is_a_one_line_error_3(runs: dict[str, Path], tmp_path: Path, where: str) -> None:
    a_file = tmp_path / "a_file.txt"
    a_file.write_text("x")
    out = {"existing file": a_file, "under a file": a_file / "sub", "name too long": tmp_path / ("n" * 300)}[where]
    proc = emo_export(str(runs["judged"]), "--format", "mvei-official", "--out", str(out), cache=runs["cache"])
    assert proc.returncode == 3, proc.stderr
    assert "--out" in one_line(proc)
    assert a_file.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["a_file.txt"]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_out_is_a_one_line_error_3(runs: dict[str, Path], tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        proc = emo_export(str(runs["judged"]), "--format", "mvei-official", "--out", str(locked / "o"),
                          cache=runs["cache"])  # fmt: skip
    finally:
        locked.chmod(0o755)
    assert proc.returncode == 3, proc.stderr
    assert "--out" in one_line(proc)


@pytest.mark.slow
def test_empty_model_name_is_an_error_not_the_default(runs: dict[str, Path], tmp_path: Path) -> None:
    for fmt in ("mme-official", "multiemo-table"):
        proc = emo_export(str(runs["judged"]), "--format", fmt, "--out", str(tmp_path / fmt), "--model-name", "",
                          cache=runs["cache"])  # fmt: skip
        assert proc.returncode == 3, proc.stderr
        assert "--model-name" in one_line(proc)
        assert not (tmp_path / fmt).exists()


@pytest.mark.slow
def test_usage_errors_are_error_3(runs: dict[str, Path], tmp_path: Path) -> None:
    for bad in (["--format", "csv"], ["--format", "mvei-official", "--bogus"], []):
        proc = emo_export(str(runs["judged"]), *bad, "--out", str(tmp_path / "o"), cache=runs["cache"])
        assert proc.returncode == 3, proc.stderr
        assert "--help" in one_line(proc)
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------------ 4. not judged
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["mvei-official", "multiemo-table", "mme-official"])
def test_unjudged_run_says_judge_it_first(runs: dict[str, Path], tmp_path: Path, fmt: str) -> None:
    proc = emo_export(str(runs["predict"]), "--format", fmt, "--out", str(tmp_path / "o"), cache=runs["cache"])
    assert proc.returncode == 2, proc.stderr
    msg = one_line(proc)
    assert f"run `emo-tasks judge {runs['predict']}` first" in msg, msg
    assert "not judged" in msg and not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------------ 5. run picking
@pytest.mark.slow
def test_a_folder_of_several_runs_is_refused_until_one_is_picked(
    two_runs: tuple[Path, list[Path]], runs: dict[str, Path], tmp_path: Path
) -> None:
    folder, (first, second) = two_runs
    proc = emo_export(str(folder), "--format", "mvei-official", "--out", str(tmp_path / "o"), cache=runs["cache"])
    assert proc.returncode == 2, proc.stderr
    msg = one_line(proc)
    assert first.name in msg and second.name in msg and "--run" in msg
    assert not (tmp_path / "o").exists()

    stamp = second.name[: -len("_results.json")]
    picked = emo_export(str(folder), "--format", "mvei-official", "--run", stamp, "--out", str(tmp_path / "o"),
                        cache=runs["cache"])  # fmt: skip
    assert picked.returncode == 0, picked.stderr
    prov = json.loads((tmp_path / "o" / "provenance.json").read_text())
    assert Path(prov["results_file"]).name == second.name
    data = json.loads((tmp_path / "o" / mvei_export.MVEI_FILE).read_text())
    assert {g for r in data.values() for g in r["generations"]} == {SECOND_ANSWER}

    none = emo_export(str(folder), "--format", "mvei-official", "--run", "no-such-stamp", "--out",
                      str(tmp_path / "o2"), cache=runs["cache"])  # fmt: skip
    assert none.returncode == 2 and "no-such-stamp" in one_line(none)


def _responses(out: Path) -> set[str]:
    evals = list((out / "eval_cot").glob("*/results/*_eval.json"))
    assert len(evals) == 8
    return {e["model_response"] for f in evals for e in json.loads(f.read_text())}


@pytest.mark.slow
def test_mme_export_never_takes_another_runs_judge_logs(
    two_runs: tuple[Path, list[Path]], runs: dict[str, Path], tmp_path: Path
) -> None:
    """emo_tasks/ of the folder holds the judge logs of both runs (the newest are the second's): each picked run
    is exported with its own judge logs, and a run whose judge logs are gone is refused, never exported with the
    other run's rows."""
    folder, (first, second) = two_runs
    for results, answer in ((first, FIRST_ANSWER), (second, SECOND_ANSWER)):
        out = tmp_path / results.name
        proc = emo_export(str(folder), "--format", "mme-official", "--run", results.name, "--out", str(out),
                          cache=runs["cache"])  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert _responses(out) == {answer}

    only_second = tmp_path / "only_second"  # the first run's judge logs deleted: only the second's are left
    shutil.copytree(folder, only_second)
    for log in (runs["judged"] / "emo_tasks_judge").iterdir():
        (only_second / "emo_tasks_judge" / log.name).unlink()
    old = emo_export(str(only_second), "--format", "mme-official", "--run", first.name, "--out",
                     str(tmp_path / "a"), cache=runs["cache"])  # fmt: skip
    assert old.returncode == 2, old.stderr
    msg = one_line(old)
    assert "judge log" in msg and "another run" in msg, msg
    assert not (tmp_path / "a").exists()


@pytest.mark.slow
def test_malformed_results_file_is_error_3(runs: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree(runs["judged"], folder)
    results = next(folder.glob("*_results.json"))
    results.write_text('{"results": [1, 2]}')
    proc = emo_export(str(folder), "--format", "mvei-official", "--out", str(tmp_path / "o"), cache=runs["cache"])
    assert proc.returncode == 3, proc.stderr
    assert results.name in one_line(proc)
    results.write_text("{not json")
    proc = emo_export(str(folder), "--format", "mvei-official", "--out", str(tmp_path / "o"), cache=runs["cache"])
    assert proc.returncode == 3 and results.name in one_line(proc)
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_help_states_the_exit_codes(runs: dict[str, Path]) -> None:
    proc = emo_export("--help", cache=runs["cache"])
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for code in ("0 exported", "2 refused", "3 error"):
        assert code in text, text
    assert "--run" in text and "--force" in text


# ------------------------------------------------------------------------------------------------ fast: bookkeeping
def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_listed_files_and_removal(tmp_path: Path) -> None:
    out = tmp_path / "out"
    listed = ["a/b/one.json", "a/two.txt", "summary.json", "provenance.json", "README.md"]
    _tree(out, {f: "x" for f in listed})
    (out / "provenance.json").write_text(json.dumps({"files": listed}))
    assert export.files_under(out) == sorted(listed)
    assert export.previous_export_files(out) == sorted(listed)
    assert export.files_to_replace(out) == sorted(listed)
    removed = export.remove_listed(out, listed)
    assert removed == sorted(listed)
    assert out.is_dir() and list(out.iterdir()) == []  # the folders the files left empty are gone, out stays

    _tree(out, {"a/b/one.json": "x", "a/mine.txt": "keep", "summary.json": "{}"})
    (out / "summary.json").write_text(json.dumps({"files": ["a/b/one.json", "summary.json"]}))  # an older export
    with pytest.raises(export.ExportRefused, match="a/mine.txt"):
        export.files_to_replace(out)
    export.remove_listed(out, ["a/b/one.json", "summary.json"])
    assert export.files_under(out) == ["a/mine.txt"] and not (out / "a" / "b").exists()


def test_removal_never_leaves_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _tree(tmp_path, {"outside.txt": "keep", "out/summary.json": "{}"})
    hostile = ["../outside.txt", str(tmp_path / "outside.txt"), "summary.json", ""]
    (out / "summary.json").write_text(json.dumps({"files": hostile}))
    assert export.previous_export_files(out) == ["summary.json"]
    assert export.remove_listed(out, hostile) == ["summary.json"]
    assert (tmp_path / "outside.txt").read_text() == "keep"


def test_a_folder_without_an_export_listing_is_never_replaced(tmp_path: Path) -> None:
    _tree(tmp_path / "out", {"data.csv": "1", "summary.json": "not json"})
    with pytest.raises(export.ExportRefused, match="data.csv"):
        export.files_to_replace(tmp_path / "out")


# ------------------------------------------------------------------------------------------------ fast: staged write
def _mvei_run(run: Path) -> Path:
    from emo_tasks.mvei import scoring

    lines = []
    for i, (dim, label) in enumerate([("sentiment polarity", "correct"), ("scene context", "incorrect")]):
        pair = scoring.score_sample(["Correct"] * 3, dim, label)
        rec = {"pair_id": f"p{i}", "dimension": dim, "label": label, "answers": ["Correct"] * 3,
               "decisions": list(pair.decisions), "strict_decisions": list(pair.strict_decisions),
               "final": pair.final, "right": pair.right, "data_source": "sample"}  # fmt: skip
        lines.append({"doc_id": i, "target": f"{label} #p{i}", "filtered_resps": ["Correct"] * 3, "acc_total": rec})
    run.mkdir(parents=True)
    data = {"results": {"mvei_sample": {"alias": "mvei_sample", "acc_total,none": 50.0}},
            "configs": {"mvei_sample": {"task": "mvei_sample"}}, "config": {"model": "dummy", "model_args": ""},
            "date": 0}  # fmt: skip
    (run / "20260101_000000_results.json").write_text(json.dumps(data))
    (run / "20260101_000000_samples_mvei_sample.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run


def test_a_failing_export_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _mvei_run(tmp_path / "run")
    monkeypatch.setattr(mvei_export, "_mvei_docs", lambda run, task: {})
    readme = mvei_export._mvei_readme

    def boom(*a: object, **k: object) -> str:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(mvei_export, "_mvei_readme", boom)
    parent = tmp_path / "new" / "deeper"
    with pytest.raises(RuntimeError):
        mvei_export.export_mvei_official(run, parent / "out", "m")
    assert not (tmp_path / "new").exists()  # neither the export nor the folders made for it

    out = tmp_path / "out"
    monkeypatch.setattr(mvei_export, "_mvei_readme", readme)
    mvei_export.export_mvei_official(run, out, "m")
    before = {p: p.read_bytes() for p in out.rglob("*")}
    monkeypatch.setattr(mvei_export, "_mvei_readme", boom)
    with pytest.raises(RuntimeError):
        mvei_export.export_mvei_official(run, out, "m", force=True)
    assert {p: p.read_bytes() for p in out.rglob("*")} == before  # the previous export is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "run"]


def test_main_export_turns_any_crash_into_one_line_and_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    run = _mvei_run(tmp_path / "run")

    def crash(*a: object, **k: object) -> None:
        raise RuntimeError("unexpected\nsecond line")

    monkeypatch.setattr(mvei_export, "export_mvei_official", crash)
    args = Namespace(run=str(run), format="mvei-official", out=str(tmp_path / "o"), model_name=None)
    assert export.main_export(args) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "RuntimeError" in err and "unexpected" in err


# ------------------------------------------------------------------------------------------------ 6. secrets
FORMATS = ("mme-official", "mvei-official", "multiemo-table")
#: A key and a URL password held in model_args as a dict (older lmms-eval versions and hand-made results).
DICT_KEY, URL_PASSWORD = "sk-dict-args-0a1b2c3d4e5f6789", "hunter2-url-password"
#: A key in the environment that the model repeated in its answers.
ECHOED_KEY = "sk-echoed-by-the-model-5a4b3c2d1e"


def _copy(runs: dict[str, Path], tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(runs["judged"], folder)
    return folder


def _all_bytes(*roots: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for root in roots for p in ([root] if root.is_file() else root.rglob("*")) if p.is_file()}


def _leaks(roots: list[Path], said: list[str], *secrets: str) -> list[tuple[str, str]]:
    """(secret, where) for every file under `roots` and every output text in `said` that holds a secret."""
    files = _all_bytes(*roots)
    found = [(s, str(p)) for s in secrets for p, raw in files.items() if s.encode() in raw]
    return found + [(s, f"output {i}") for s in secrets for i, text in enumerate(said) if s in text]


@pytest.mark.slow
def test_dict_model_args_are_masked_by_key_in_the_report_the_view_and_every_export(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """The results file's `config.model_args` as a dict holding a key, a URL with a password, a nested secret and a
    list: no output file, stdout or stderr of `report` (md, json, csv), `view` or `export` (every format) holds a
    secret; every export succeeds (before: TypeError, exit 3) and says what was masked."""
    folder = _copy(runs, tmp_path)
    results = next(folder.glob("*_results.json"))
    data = json.loads(results.read_text())
    data["config"]["model_args"] = {
        "response": FIRST_ANSWER, "api_key": DICT_KEY, "base_url": f"http://alice:{URL_PASSWORD}@127.0.0.1:9/v1",
        "client": {"session": {"user": "alice", "token": DICT_KEY}, "auth": {"basic": ["alice", URL_PASSWORD]}},
        "extra": [f"x-api-key={DICT_KEY}"],
    }  # fmt: skip
    results.write_text(json.dumps(data))
    env, outputs, said = cli_env(runs["cache"]), [], []
    for fmt in ("md", "json", "csv"):
        out = tmp_path / f"report.{fmt}"
        proc = run_emo(env, "report", str(folder), "--format", fmt, "--resamples", "50", "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        outputs.append(out)
        said += [proc.stdout, proc.stderr]
    proc = run_emo(env, "view", str(folder), "--out", str(tmp_path / "site"))
    assert proc.returncode == 0, proc.stderr
    outputs.append(tmp_path / "site")
    said += [proc.stdout, proc.stderr]
    assert _leaks(outputs, said, DICT_KEY, URL_PASSWORD) == []  # before: the site's data/site.js (label, model_args)
    for fmt in FORMATS:
        proc = emo_export(str(folder), "--format", fmt, "--out", str(tmp_path / fmt), cache=runs["cache"])
        assert proc.returncode == 0, proc.stderr  # before: TypeError, exit 3
        outputs.append(tmp_path / fmt)
        said += [proc.stdout, proc.stderr]
        prov = json.loads((tmp_path / fmt / "provenance.json").read_text())
        assert export.check_schema(prov, "provenance") == []
        assert "api_key=***" in prov["model_args"] and "http://***@127.0.0.1:9/v1" in prov["model_args"]
        assert f"response={FIRST_ANSWER}" in prov["model_args"]  # what says no secret stays readable
        assert '"session": {"user": "alice", "token": "***"}, "auth": {"basic": ["***", "***"]}' in prov["model_args"]
    assert len(_all_bytes(*outputs)) > 20
    assert _leaks(outputs, said, DICT_KEY, URL_PASSWORD) == []
    board = json.loads((tmp_path / "report.json").read_text())
    assert board["runs"][0]["model_args"] == prov["model_args"]
    assert "api_key=***" in board["runs"][0]["label"]


@pytest.mark.slow
def test_a_secret_the_model_repeated_is_masked_in_every_export(runs: dict[str, Path], tmp_path: Path) -> None:
    """The model repeated the key it was given (OPENAI_API_KEY) in every answer: the run's sample logs, judge logs
    and results hold it, as a real run would.  Exported with the key in the environment, no exported file holds
    it (every format, provenance included); the answers are kept, with the key masked as `view` masks it."""
    folder = _copy(runs, tmp_path)
    echoed = f"{FIRST_ANSWER} My key is {ECHOED_KEY}."
    n_files = 0
    for path in [*folder.rglob("*.json"), *folder.rglob("*.jsonl")]:
        text = path.read_text(encoding="utf-8")
        if FIRST_ANSWER in text:
            path.write_text(text.replace(FIRST_ANSWER, echoed), encoding="utf-8")
            n_files += 1
    assert n_files >= 5  # the results, the three tasks' sample logs, the MME-Emotion judge logs
    for fmt in FORMATS:
        out = tmp_path / fmt
        proc = emo_export(str(folder), "--format", fmt, "--out", str(out), cache=runs["cache"],
                          OPENAI_API_KEY=ECHOED_KEY)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert ECHOED_KEY not in proc.stdout + proc.stderr
        files = _all_bytes(out)
        assert [p for p, raw in files.items() if ECHOED_KEY.encode() in raw] == [], fmt
    mvei = json.loads((tmp_path / "mvei-official" / mvei_export.MVEI_FILE).read_text())
    assert {g for r in mvei.values() for g in r["generations"]} == {f"{FIRST_ANSWER} My key is ***."}
    assert _responses(tmp_path / "mme-official") == {f"{FIRST_ANSWER} My key is ***."}
    prov = json.loads((tmp_path / "mvei-official" / "provenance.json").read_text())
    assert "My key is ***." in prov["model_args"]
