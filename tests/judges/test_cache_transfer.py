"""Cached judge answers copied out into a file and back into another cache (`judges.cache_transfer`, issue 42 item
12), through the real `emo-tasks cache import` parser and a real engine on a loopback server.  The whole path
(export from a judged run, import elsewhere, re-judge against a retired endpoint) is
`tests/judging/test_judge_stage.py::test_cache_export_then_import_rejudges_elsewhere_after_the_judge_is_retired`.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import API_KEY

from emo_tasks import cli
from judges import JudgeCache, JudgeRequest, text_message
from judges.cache_transfer import TransferError, read_file, read_rows, recorded_reads, write_file
from judges.testing import LoopbackServer, Reply


def req(text: str) -> JudgeRequest:
    return JudgeRequest([text_message("user", text)], model="judge-model")


@pytest.fixture
def exported(server: LoopbackServer, make_engine, tmp_path: Path) -> tuple[Path, list[str], list[str]]:
    """A cache filled by a real engine with 5 answers, 3 of which a later run reads: the file of those 3 (plain
    JSON lines, easy to damage), their keys and texts."""
    source = tmp_path / "source"
    engine = make_engine(server, cache_dir=source)
    first = engine.run([req(f"q{i}") for i in range(5)])
    with recorded_reads() as found:
        again = engine.run([req(f"q{i}") for i in range(3)])
    assert again.stats.calls == 0 and found == {r.key for r in again}  # exactly the keys the cache answered
    path = tmp_path / "answers.jsonl"
    write_file(path, read_rows(source, found), {"run": "test"})
    return path, [r.key for r in first][:3], [r.text for r in first][:3]


def _import(path: Path, cache: Path, *flags: str) -> int:
    return cli.main(["cache", "import", str(path), "--cache", str(cache), *flags])


def test_imported_answers_are_served_with_the_endpoint_gone(exported, make_engine, tmp_path: Path, capsys) -> None:
    path, keys, texts = exported
    target = tmp_path / "elsewhere"
    assert _import(path, target) == 0
    assert "3 answers added, 0 already there" in capsys.readouterr().err

    def retired(body: dict, attempt: int) -> Reply:
        return Reply(kind="status", status=404, code="model_not_found", text="The model does not exist")

    with LoopbackServer(responder=retired, expected_api_key=API_KEY) as dead:
        batch = make_engine(dead, cache_dir=target).run([req(f"q{i}") for i in range(3)])
        assert dead.calls == []
    assert [r.text for r in batch] == texts and [r.key for r in batch] == keys
    assert _import(path, target) == 0  # again: nothing changes
    assert "0 answers added, 3 already there" in capsys.readouterr().err


def test_a_gzip_file_round_trips_and_holds_no_key(exported, tmp_path: Path, monkeypatch) -> None:
    path, keys, _ = exported
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    checked = read_file(path)
    gz = tmp_path / "answers.jsonl.gz"
    write_file(gz, checked.entries, {"run": "test"}, secrets=(API_KEY,))
    assert gzip.decompress(gz.read_bytes()).decode() == path.read_text()
    assert API_KEY not in path.read_text()
    assert [e["key"] for e in read_file(gz).entries] == sorted(keys)
    # a line holding a key set in the environment is refused both ways
    leaky = [{**checked.entries[0], "text": f"echo {API_KEY}"}]
    with pytest.raises(TransferError, match="API key"):
        write_file(tmp_path / "leak.jsonl", leaky, {}, secrets=(API_KEY,))
    write_file(tmp_path / "leak.jsonl", leaky, {})
    assert cli.main(["cache", "import", str(tmp_path / "leak.jsonl"), "--cache", str(tmp_path / "c")]) == 3


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda ls: [*ls[:2], ls[2].replace('"text": "', '"text": "X', 1), *ls[3:]], "line 3: the answer of key"),
        (lambda ls: [*ls[:2], ls[2][:40], *ls[3:]], "line 3: not JSON"),
        (lambda ls: ls[:-1], "no end line"),
        (lambda ls: [ls[0], *ls[2:]], "lines were added or removed"),
        (lambda ls: [ls[0].replace("answer-cache", "other"), *ls[1:]], "line 1: not a judge answer cache file"),
        (lambda ls: [*ls[:2], ls[2].replace(json.loads(ls[2])["key"], "nothex"), *ls[3:]], "line 3: key 'nothex'"),
    ],
    ids=["changed-answer", "cut-line", "cut-off", "line-removed", "not-ours", "bad-key"],
)
def test_a_damaged_file_names_its_line_and_imports_nothing(exported, tmp_path: Path, capsys, damage, message) -> None:
    path, _, _ = exported
    path.write_text("\n".join(damage(_lines(path))) + "\n")
    target = tmp_path / "target"
    assert _import(path, target) == 3
    err = capsys.readouterr().err
    assert message in err and str(path) in err and len(err.strip().splitlines()) == 1
    cache = JudgeCache(target)
    assert len(cache) == 0
    cache.close()


def test_a_damaged_gzip_file_is_an_error(exported, tmp_path: Path, capsys) -> None:
    path, _, _ = exported
    gz = tmp_path / "answers.jsonl.gz"
    write_file(gz, read_file(path).entries, {})
    gz.write_bytes(gz.read_bytes()[:-12])  # cut off in the copy
    assert _import(gz, tmp_path / "target") == 3
    assert str(gz) in capsys.readouterr().err


def test_a_conflicting_answer_is_refused_or_kept_never_replaced(exported, tmp_path: Path, capsys) -> None:
    path, keys, texts = exported
    target = tmp_path / "target"
    cache = JudgeCache(target)
    cache.put(keys[0], "judge-model", "another verdict")  # the cache's own answer under the file's first key
    cache.put(keys[1], "judge-model", texts[1])  # the same answer: not a conflict
    cache.close()
    assert _import(path, target) == 2
    err = capsys.readouterr().err
    assert f"conflict: key {keys[0]}" in err and "'another verdict'" in err and "--keep-existing" in err
    cache = JudgeCache(target)
    assert len(cache) == 2 and cache.get(keys[0]).text == "another verdict"  # nothing imported
    cache.close()
    assert _import(path, target, "--keep-existing") == 0
    err = capsys.readouterr().err
    assert "kept the cache's own answer for 1 key(s)" in err and "1 answers added, 1 already there" in err
    cache = JudgeCache(target)
    assert cache.get(keys[0]).text == "another verdict" and cache.get(keys[2]).text == texts[2]
    cache.close()


def test_a_key_twice_with_different_answers_is_refused(exported, tmp_path: Path) -> None:
    path, _, _ = exported
    entries = read_file(path).entries
    twice = [*entries, {**entries[0], "text": "changed"}]
    write_file(path, twice, {})
    with pytest.raises(TransferError, match="line 5: key .* twice with different answers"):
        read_file(path)


def test_export_of_a_folder_without_judged_results_is_refused(tmp_path: Path, capsys) -> None:
    assert cli.main(["cache", "export", str(tmp_path)]) == 2
    assert "no judged results" in capsys.readouterr().err
    assert cli.main(["cache"]) == 3  # the group needs an action


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["export", "{tmp}/no-such-run"], "RUN_DIR"),
        (["export", "{tmp}", "--cache", "{tmp}/no-such-cache"], "--cache"),
        (["export", "{tmp}", "--out", "{tmp}"], "--out"),
        (["import", "{tmp}/no-such-file"], "FILE"),
        (["import", "{tmp}/file", "--cache", "{tmp}/file"], "--cache"),
        (["list", "--cache", "{tmp}/no-such-cache"], "--cache"),
        (["list", "--run", "{tmp}/no-such-run"], "--run"),
    ],
)
def test_a_bad_argument_of_an_action_exits_3_naming_it(tmp_path: Path, capsys, argv: list[str], flag: str) -> None:
    """`tests/test_cli_args.py` walks the commands; the cache group's actions have their flags checked here."""
    (tmp_path / "file").write_text("x\n")
    code = cli.main(["cache", *(a.format(tmp=tmp_path) for a in argv)])
    err = capsys.readouterr().err
    assert code == 3 and len(err.splitlines()) == 1 and flag in err, err


def test_cache_list_counts_what_the_cache_holds_per_model_and_role(
    server: LoopbackServer, make_engine, tmp_path: Path, capsys
) -> None:
    """`emo-tasks cache list --json` (issue 46, item 4): per model and role, the verdicts the cache holds, counted
    here another way (the SQLite file's rows read directly), and the first and last use; no cache: exit 3."""
    import sqlite3

    cache = tmp_path / "cache"
    engine = make_engine(server, cache_dir=cache)
    engine.run([req(f"q{i}") for i in range(5)])
    engine.run([JudgeRequest([text_message("user", f"s{i}")], role="step", model="step-model") for i in range(3)])
    engine.run([JudgeRequest([text_message("user", "s0")], role="step", model="step-model")])  # cached: no row
    engine.close()
    assert cli.main(["cache", "list", "--cache", str(cache), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    conn = sqlite3.connect(cache / "judge_cache.sqlite3")
    direct: dict[tuple[str, str], int] = {}
    for model, summary in conn.execute("SELECT model, summary FROM answers"):
        role = json.loads(summary)["role"]
        direct[(model, role)] = direct.get((model, role), 0) + 1
    conn.close()
    assert {(g["model"], g["role"]): g["verdicts"] for g in doc["groups"]} == direct
    assert direct == {("judge-model", "judge"): 5, ("step-model", "step"): 3}
    assert doc["verdicts"] == 8 and all(g["first_use"] <= g["last_use"] for g in doc["groups"])
    assert all(g["runs"] is None and g["shutdown_date"] is None for g in doc["groups"])  # not asked: no --run
    assert cli.main(["cache", "list", "--cache", str(cache)]) == 0
    text = capsys.readouterr().out
    assert "step-model" in text and "8 verdicts" in text
    assert cli.main(["cache", "list", "--cache", str(tmp_path)]) == 3  # a folder without a cache
    assert "no judge answer cache" in capsys.readouterr().err
