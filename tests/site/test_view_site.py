"""`emo-tasks view` without a browser: the files it writes, their counts, the escaping of hostile text, no secret,
exit codes and `--force` (small hand-made runs, the builders of tests/results/test_export.py; fast).

What the browser does with these files is tests/site/test_view_browser.py.  Here: every sample of a run is in the data
(as many as the run has rows), in the chunk its key hashes to; the overview's numbers are the report's; every file
the site holds is listed in its marker; a data file is ASCII JSON in which `<`, `>`, `&`, U+2028 and U+2029 only
appear escaped and a lone surrogate is replaced; no API key (environment, `model_args`, a URL's password) is written
anywhere; the exit codes are export's (0 written, 2 refused, 3 error; one line on stderr, never a traceback).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_export import DATE, MME_ROWS, MVEI_PAIRS, _jsonl, make_mme_run, make_multiemo_run, make_mvei_run

from emo_tasks import cli
from emo_tasks.benchmarks import SampleView
from emo_tasks.gate import flips
from emo_tasks.results import reader, report
from emo_tasks.site import command, files, media, model

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # bpe_openai's own use of importlib.resources

ER_LAB = "mme_emotion_sample_er_lab"
ASSETS = Path(command.__file__).with_name("assets")
#: Model answers that would run code if a page inserted them as HTML, or end the data file's script early.
HOSTILE = [
    "</script><script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "</textarea><textarea>",
    '<a href="javascript:window.__pwned=1">click me</a>',
    "line\u2028separator\u2029paragraph & <!-- comment",
    "lone \ud800 surrogate",
]
SECRET = "sk-emo-view-0123456789abcdef"


# ------------------------------------------------------------------------------------------------ runs and data
def mme_run(run: Path) -> Path:
    """The export's judged MME run with an ER-Lab sample log holding the records (doc ids 10 + row, the prompts)."""
    make_mme_run(run)
    rows = [r for r in MME_ROWS if r["task"] == "ER-Lab"]
    _jsonl(run / f"{DATE}_samples_{ER_LAB}.jsonl", [_logged(r) for r in rows])
    return run


def _logged(row: dict[str, Any]) -> dict[str, Any]:
    """An ER-Lab judge-log row as lmms-eval's sample log holds it (its `process_results` record under rec_s)."""
    record = {"mme_task": "ER-Lab", "row": row["row"], "answer": row["answer"]}
    return {"doc_id": 10 + row["row"], "target": row["label"], "input": f"prompt {row['row']}", "rec_s": record}


def mvei_run(run: Path, answers: list[str] | None = None, media_of: dict[int, list[str]] | None = None) -> Path:
    """The export's MVEI run (4 pairs); `answers` replace pair i's first answer (i < len), `media_of` sets lines'
    `input_media`."""
    make_mvei_run(run)
    log = run / f"{DATE}_samples_mvei_sample.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    for i, text in enumerate(answers or []):
        lines[i % len(lines)]["acc_total"]["answers"][0] = text
    for i, entries in (media_of or {}).items():
        lines[i]["input_media"] = entries
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))  # ensure_ascii: a lone surrogate as \ud800
    return run


def three_runs(root: Path) -> list[Path]:
    return [mme_run(root / "mme"), mvei_run(root / "mvei"), make_multiemo_run(root / "multiemo")]


def read_script(path: Path) -> tuple[str, Any]:
    """(name, data) of one data file `emoSite.receive(name,data);`."""
    text = path.read_text(encoding="ascii")
    assert text.startswith("emoSite.receive(") and text.endswith(");\n"), text[:80]
    name, data = json.loads("[" + text[len("emoSite.receive(") : -3] + "]")
    return name, data


def site_data(site: Path) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The overview and, per task id, its samples (all its chunks, in order), checking each sample's chunk."""
    name, overview = read_script(site / "data" / "site.js")
    assert name == "site"
    samples: dict[str, list[dict[str, Any]]] = {}
    for tid, meta in overview["tasks"].items():
        if meta["group"]:
            continue
        recs = []
        for n in range(meta["n_chunks"]):
            cname, chunk = read_script(site / meta["folder"] / f"{n}.js")
            assert cname == f"{tid}#{n}"
            assert all(model.chunk_of(r["key"], meta["n_chunks"]) == n for r in chunk)
            recs += chunk
        samples[tid] = sorted(recs, key=lambda r: r["index"])
    return overview, samples


def view(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """`emo-tasks view ARGS` in process: (exit code, stdout, stderr)."""
    try:
        code = cli.main(["view", *map(str, args)])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    return lines[0]


def site_files(site: Path) -> set[str]:
    return {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}


# ------------------------------------------------------------------------------------------------ the site
def test_three_benchmarks_every_sample_and_the_reports_numbers(tmp_path: Path, capsys) -> None:
    runs = three_runs(tmp_path)
    code, out, err = view(capsys, *runs, "--out", tmp_path / "site")
    assert code == 0, err
    site = tmp_path / "site"
    line = r"emo-tasks view: wrote .*index\.html: 3 run\(s\), 6 task page\(s\), 12 samples, 0 thumbnails; \d+ files, "
    assert re.fullmatch(line + r"\d+\.\d MB in \d+\.\d s\n", out), out
    overview, samples = site_data(site)
    # every row of every run: MME's judge log per task, MVEI's pairs, MultiEmo's image
    counts = {tid.split("/", 1)[1]: len(recs) for tid, recs in samples.items()}
    mme = {f"mme_emotion_sample_{t}": sum(r["task"] == k for r in MME_ROWS)
           for t, k in (("er_lab", "ER-Lab"), ("er_wild", "ER-Wild"), ("fg_er", "FG-ER"))}  # fmt: skip
    assert counts == {**mme, "mvei_sample": len(MVEI_PAIRS), "multiemo_sample": 1}
    assert overview["tasks"]["r1/mme_emotion_sample"]["leaves"] == [f"r1/{t}" for t in mme]
    assert overview["tasks"]["r1/mme_emotion_sample"]["n_samples"] == sum(mme.values())
    er_lab = samples[f"r1/{ER_LAB}"]
    assert [r["key"] for r in er_lab] == ["10", "11", "12"] and er_lab[0]["prompt"] == "prompt 0"
    assert [r["verdict"] for r in er_lab] == ["scored", "scored", "judge_failed"]
    assert [r["key"] for r in samples["r1/mme_emotion_sample_fg_er"]] == ["u0", "u1"]  # no sample log: the row
    assert [r["prev"] for r in er_lab] == [None, "10", "11"] and [r["next"] for r in er_lab] == ["11", "12", None]
    mvei = samples["r2/mvei_sample"]
    assert [r["verdict"] for r in mvei] == ["correct", "correct", "correct", "incorrect"]
    assert overview["tasks"]["r2/mvei_sample"]["categories"][0] == "details.dimension"
    assert overview["tasks"]["r1/mme_emotion_sample"]["categories"][0] == "task"
    assert "details.n_steps" in overview["tasks"][f"r1/{ER_LAB}"]["numbers"]
    assert set(samples["r3/multiemo_sample"][0]["details"]["votes"]) == set(
        samples["r3/multiemo_sample"][0]["details"]["scores"]
    )
    # the overview's numbers are the report's, each linked to a task the site has
    loaded = [reader.load_run(r) for r in runs]
    reader.label_runs(loaded)
    tables = report.build_tables(loaded)
    shown = [t for b in overview["benchmarks"] for t in b["tables"]]
    assert [t["title"] for t in shown] == [t.title for t in tables]
    for mine, theirs in zip(shown, tables, strict=True):
        for row, (_, cells) in zip(mine["rows"], theirs.rows, strict=True):
            for c, cell in zip(row["cells"], cells, strict=True):
                assert c["value"] == cell.value and c["ci_low"] == cell.ci_low and c["n"] == cell.n
                assert c["task"] is None or f"{c['run']}/{c['task']}" in overview["tasks"]
    assert shown[0]["rows"][0]["cells"][-1]["task"] == "mme_emotion_sample"  # "Overall": the group
    mme_bench = overview["benchmarks"][0]
    assert {m["name"] for m in mme_bench["metrics"]} >= {"rec_s", "rea_s"} and all(
        m["doc"] for m in mme_bench["metrics"]
    )
    assert [b["title"] for b in mme_bench["chart"]] == ["Rec-S", "Rea-S", "CoT-S"]
    # the files: the page, the data, the marker listing exactly what is there
    marker = json.loads((site / files.MARKER).read_text())
    assert set(marker["files"]) == site_files(site)
    assert {"index.html", "app.js", "style.css", "data/site.js"} <= site_files(site)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left


def test_several_runs_of_one_benchmark_one_row_each(tmp_path: Path, capsys) -> None:
    a, b = mvei_run(tmp_path / "a"), mvei_run(tmp_path / "b", answers=["Incorrect"])
    code, _, err = view(capsys, a, b, "--out", tmp_path / "site")
    assert code == 0, err
    overview, samples = site_data(tmp_path / "site")
    assert [r["id"] for r in overview["runs"]] == ["r1", "r2"] and set(samples) == {"r1/mvei_sample", "r2/mvei_sample"}
    (table,) = overview["benchmarks"][0]["tables"]
    assert [row["run"] for row in table["rows"]] == ["r1", "r2"]
    assert samples["r2/mvei_sample"][0]["answers"][0] == "Incorrect"


def test_many_samples_are_split_into_chunks_by_their_key(tmp_path: Path) -> None:
    """1,100 samples: 3 chunk files, each sample in the chunk its key hashes to (FNV-1a, as app.js computes)."""
    assert [model.chunk_of(k, 2**32) for k in ("", "a", "foobar")] == [0x811C9DC5, 0xE40C292C, 0xBF9CF968]
    views = [SampleView(task="t", doc_id=i, unit=i) for i in range(1100)]
    ts = model.TaskSamples(id="r1/t", run="r1", task="t", bench=None)  # type: ignore[arg-type]
    ts.records = model.records(views, [[] for _ in views])
    chunks = ts.chunks()
    assert len(chunks) == 3 and sum(map(len, chunks)) == 1100 and min(map(len, chunks)) > 300
    assert all(model.chunk_of(r["key"], 3) == n for n, c in enumerate(chunks) for r in c)


def test_keys_are_unique_and_safe() -> None:
    views = [SampleView("t", 3, "a"), SampleView("t", 3, "b"), SampleView("t", None, ("t", 7)),
             SampleView("t", None, "x/../y?z#w")]  # fmt: skip
    assert model.sample_keys(views) == ["3", "3~2", "u7", "ux-..-y-z-w"]


def test_images_become_thumbnails_named_by_their_content(tmp_path: Path, capsys, monkeypatch) -> None:
    from PIL import Image

    folder = tmp_path / "run" / "media_in"  # inside the run folder: what a site may show (test_view_trust.py)
    folder.mkdir(parents=True)
    big, clear = folder / "big.png", folder / "clear.png"
    Image.new("RGB", (800, 600), "red").save(big)
    Image.new("RGBA", (64, 200), (0, 0, 0, 0)).save(clear)
    (folder / "fake.jpg").write_text("not an image")
    run = mvei_run(
        tmp_path / "run", media_of={0: [str(big), "images/p0.png"], 1: [str(clear)], 2: [str(folder / "fake.jpg")]}
    )
    code, _, err = view(capsys, run, "--out", tmp_path / "site")
    assert code == 0, err
    _, samples = site_data(tmp_path / "site")
    recs = samples["r1/mvei_sample"]
    sha = hashlib.sha256(big.read_bytes()).hexdigest()
    assert recs[0]["media"] == [{"thumb": f"media/{sha}.jpg", "text": str(big)}, {"text": "images/p0.png"}]
    with Image.open(tmp_path / "site" / "media" / f"{sha}.jpg") as im:
        assert im.format == "JPEG" and im.size == (320, 240)
    assert recs[1]["media"][0]["thumb"].startswith("media/")
    assert recs[2]["media"] == [{"text": str(folder / "fake.jpg")}]
    # a second site takes the thumbnails from the cache: nothing is encoded again
    monkeypatch.setattr(media, "encode", lambda src, dest: (_ for _ in ()).throw(AssertionError("encoded again")))
    code, _, err = view(capsys, run, "--out", tmp_path / "site2")
    assert code == 0, err
    assert (tmp_path / "site2" / "media" / f"{sha}.jpg").read_bytes() == (
        tmp_path / "site" / "media" / f"{sha}.jpg"
    ).read_bytes()


def test_a_small_jpeg_is_shown_as_its_own_bytes(tmp_path: Path) -> None:
    """A JPEG already within the thumbnail size (a judge's frame) is placed as it is: the very bytes the judge was
    sent, and no decode or re-encode; a larger JPEG is made smaller."""
    from PIL import Image

    small, large = tmp_path / "small.jpg", tmp_path / "large.jpg"
    Image.new("RGB", (320, 240), "blue").save(small, quality=95)
    Image.new("RGB", (640, 480), "blue").save(large, quality=95)
    names = media.thumbnails([small, large], tmp_path / "media", cache=None)
    assert (tmp_path / "media" / names[small]).read_bytes() == small.read_bytes()
    with Image.open(tmp_path / "media" / names[large]) as im:
        assert im.size == (320, 240) and (tmp_path / "media" / names[large]).read_bytes() != large.read_bytes()


# ------------------------------------------------------------------------------------------------ safety
def test_hostile_answers_are_escaped_in_the_data_files(tmp_path: Path, capsys) -> None:
    run = mvei_run(tmp_path / "run", answers=HOSTILE)
    code, _, err = view(capsys, run, "--out", tmp_path / "site")
    assert code == 0, err
    for path in (tmp_path / "site" / "data").rglob("*.js"):
        raw = path.read_bytes()
        assert raw.isascii(), path
        text = raw.decode("ascii")
        body = text[len("emoSite.receive(") : -3]
        assert not set("<>&") & set(body), path  # </script>, <!--, &...; only as \u escapes
        assert "\u2028" not in text and "\u2029" not in text
    _, samples = site_data(tmp_path / "site")
    got = [r["answers"][0] for r in samples["r1/mvei_sample"]]
    want = [HOSTILE[i] for i in range(len(got))]
    for i in range(len(got), len(HOSTILE)):  # more answers than pairs: the later ones replaced the earlier
        want[i % len(got)] = HOSTILE[i]
    assert got == [w.replace("\ud800", "\ufffd") for w in want]
    assert "lone \ufffd surrogate" in got


def test_the_script_inserts_text_never_html_and_loads_nothing_from_elsewhere() -> None:
    js = (ASSETS / "app.js").read_text(encoding="utf-8")
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", js, flags=re.S)  # comments may name what the code avoids
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                 "fetch(", "XMLHttpRequest", "srcdoc"):  # fmt: skip
        assert sink not in code, sink
    for name in ("index.html", "app.js", "style.css"):
        text = (ASSETS / name).read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text), name  # no CDN, no remote font
        assert not re.search(r"mme|mvei|multiemo", text, re.I), name  # the page names no benchmark
    html = (ASSETS / "index.html").read_text(encoding="utf-8")
    assert "connect-src 'none'" in html and "script-src 'self'" in html  # the page may not even try


def test_no_secret_anywhere_in_the_site(tmp_path: Path, capsys, monkeypatch) -> None:
    """A key in the environment and in the results file's model_args (as users type it), a URL with a password,
    and an answer that repeats the key: the report masks model_args too (emo_tasks.results.redact), the site
    masks all."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    run = mvei_run(tmp_path / "run", answers=[f"my key is {SECRET}", "see https://bob:hunter2pw@example.org/v1"])
    results = run / f"{DATE}_results.json"
    data = json.loads(results.read_text())
    data["config"]["model_args"] = f"model_version=m1,base_url=https://alice:s3cretpw@judge.example/v1,api_key={SECRET}"
    results.write_text(json.dumps(data))
    loaded = reader.load_run(run)
    reader.label_runs([loaded])
    assert SECRET not in loaded.label and "api_key=***" in loaded.label  # the report masks it too
    code, _, err = view(capsys, run, "--out", tmp_path / "site")
    assert code == 0, err
    assert SECRET not in err
    for path in (tmp_path / "site").rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            for secret in (SECRET, "s3cretpw", "hunter2pw"):
                assert secret.encode() not in raw, (path, secret)
    overview, samples = site_data(tmp_path / "site")
    assert "api_key=***" in overview["runs"][0]["model_args"] and "model_version=m1" in overview["runs"][0]["label"]
    assert samples["r1/mvei_sample"][0]["answers"][0] == "my key is ***"


def test_redactor() -> None:
    redact = files.Redactor({"MY_TOKEN": "tok-123456789", "HOME": "/home/someone-long", "SHORT_KEY": "abc"})
    assert redact("a tok-123456789 b") == "a *** b"
    assert redact("pretrained=Qwen/x,api_key=sk-1,token='a b',x=1") == "pretrained=Qwen/x,api_key=***,token=***,x=1"
    assert redact("http://u:p@h:8000/v1?key=zz&a=1") == "http://***@h:8000/v1?key=***&a=1"
    assert redact("/home/someone-long and abc stay") == "/home/someone-long and abc stay"


# ------------------------------------------------------------------------------------------------ exit codes
def test_refusals_are_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    code, out, err = view(capsys, tmp_path / "empty", "--out", tmp_path / "site")
    assert code == 2 and "no *_results.json" in one_line(err) and out == ""
    two = mvei_run(tmp_path / "two")
    other = json.loads((two / f"{DATE}_results.json").read_text())
    (two / "20270101_000000_results.json").write_text(json.dumps(other))
    code, _, err = view(capsys, two, "--out", tmp_path / "site")
    assert code == 2 and "--run" in one_line(err)
    code, _, err = view(capsys, two, "--run", "20270101", "--out", tmp_path / "site")
    assert code == 0, err
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    for extra in ([], ["--force"]):
        code, _, err = view(capsys, mvei_run(tmp_path / f"r{len(extra)}"), "--out", taken, *extra)
        assert code == 2 and str(taken) in one_line(err) and ("--force" in err if not extra else "notes.txt" in err)
        assert site_files(taken) == {"notes.txt"}


def test_errors_are_exit_3(tmp_path: Path, capsys) -> None:
    run = mvei_run(tmp_path / "run")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    cases = {
        "missing run": [tmp_path / "nope", "--out", tmp_path / "o"],
        "out is a file": [run, "--out", a_file],
        "no --out": [run],
        "unknown option": [run, "--out", tmp_path / "o", "--bogus"],
    }
    for what, args in cases.items():
        code, out, err = view(capsys, *args)
        assert code == 3, (what, err)
        one_line(err)
    bad = mvei_run(tmp_path / "bad")
    (bad / f"{DATE}_results.json").write_text("{not json")
    code, _, err = view(capsys, bad, "--out", tmp_path / "o")
    assert code == 3 and "not readable JSON" in one_line(err)
    broken = mvei_run(tmp_path / "broken")
    with open(broken / f"{DATE}_samples_mvei_sample.jsonl", "a") as f:
        f.write("{half a line\n")
    code, _, err = view(capsys, broken, "--out", tmp_path / "o")
    assert code == 3 and one_line(err).startswith("emo-tasks view: error:")
    assert not (tmp_path / "o").exists() and a_file.read_text() == "x"


def test_force_replaces_only_an_earlier_site(tmp_path: Path, capsys) -> None:
    site = tmp_path / "site"
    code, _, err = view(capsys, *three_runs(tmp_path), "--out", site)
    assert code == 0, err
    before = site_files(site)
    assert any(f.startswith("data/r3/") for f in before)
    code, _, err = view(capsys, mvei_run(tmp_path / "new"), "--out", site)
    assert code == 2 and "--force" in one_line(err) and site_files(site) == before
    code, _, err = view(capsys, tmp_path / "new", "--out", site, "--force")
    assert code == 0, err
    now = site_files(site)
    assert not any(f.startswith(("data/r2/", "data/r3/")) for f in now)  # nothing of the earlier site is left
    assert now == set(json.loads((site / files.MARKER).read_text())["files"])
    overview, _ = site_data(site)
    assert [t for t in overview["tasks"]] == ["r1/mvei_sample"]


def test_a_failure_while_writing_leaves_out_as_it_was(tmp_path: Path, capsys, monkeypatch) -> None:
    site = tmp_path / "site"
    run = mvei_run(tmp_path / "run")
    assert view(capsys, run, "--out", site)[0] == 0
    before = {f: (site / f).read_bytes() for f in site_files(site)}
    monkeypatch.setattr(command, "PAGE_FILES", ("index.html", "missing.js"))
    code, _, err = view(capsys, run, "--out", site, "--force")
    assert code == 3 and "missing.js" in one_line(err)
    assert {f: (site / f).read_bytes() for f in site_files(site)} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "site"]


def test_the_wheel_carries_the_page_files() -> None:
    """pyproject's package-data names every file of the page (a wheel without them writes a site without a page)."""
    import fnmatch
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: pytest itself depends on tomli there
        import tomli as tomllib

    root = Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    patterns = data.get("emo_tasks.site", [])
    assets = sorted(p.name for p in ASSETS.iterdir() if p.is_file())
    assert set(command.PAGE_FILES) <= set(assets)
    for name in assets:
        assert any(fnmatch.fnmatch(f"assets/{name}", pat) for pat in patterns), name


# ------------------------------------------------------------------------------------------------ matrices, pairs
def mme_predicted(run: Path, predicted: dict[int, list[str]], judge_text: str = "", ratings=None) -> Path:
    """`mme_run` whose ER-Lab judge-log rows name `predicted` labels (row -> labels); `judge_text` is appended to
    every judge text and `ratings` (row -> ratings) replace rows' ratings (and their values), as a second judge."""
    mme_run(run)
    log = next((run / "emo_tasks_judge").glob("*_judge.jsonl"))
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    for r in rows:
        if r["task"] == "ER-Lab" and r["row"] in predicted:
            r["predicted_labels"] = predicted[r["row"]]
        if r["judge_text"]:
            r["judge_text"] += judge_text
        if r["task"] == "ER-Lab" and ratings and r["row"] in ratings:
            r["ratings"] = ratings[r["row"]]
            steps = ", ".join(f"Step {i + 1}: {n}/{d}" for i, (n, d) in enumerate(r["ratings"]))
            r["judge_text"] = f"Ratings:\n<score>{steps}</score>{judge_text}"
            vals = [n / d for n, d in ratings[r["row"]]]
            r["recognition"], r["strict_recognition"] = vals[-1], vals[-1]
            r["reasoning"] = sum(vals[:-1]) / max(1, len(vals) - 1)
    _jsonl(log, rows)
    return run


def test_confusion_matrix_and_rating_fields_come_from_the_samples(tmp_path: Path, capsys) -> None:
    run = mme_predicted(tmp_path / "mme", {0: ["happy"], 1: ["happy"]})
    code, _, err = view(capsys, run, "--out", tmp_path / "site")
    assert code == 0, err
    overview, samples = site_data(tmp_path / "site")
    recs = samples[f"r1/{ER_LAB}"]
    assert [(r["gold"], r["predicted"]) for r in recs] == [("happy", "happy"), ("sad", "happy"), ("happy", None)]
    meta = overview["tasks"][f"r1/{ER_LAB}"]
    assert meta["confusion_labels"] == ["happy", "sad"] and meta["ratings"] == ["details.steps"]
    assert model.confusion(recs) == {("happy", "happy"): 1, ("sad", "happy"): 1}
    assert overview["tasks"]["r1/mme_emotion_sample_fg_er"]["confusion_labels"] == []  # no predicted label
    # any list of dicts with a numeric "value" is a rating field; other details are not
    generic = [{"gold": None, "details": {"items": [{"value": 1}, {"value": 0.5}], "notes": [{"text": "x"}]}}]
    assert model.rating_fields(generic) == ["details.items"]


def mvei_rescored(run: Path, answers: dict[int, list[str]]) -> Path:
    """`make_mvei_run` with pair i's three answers replaced and the pair scored again (its verdict follows)."""
    from emo_tasks.mvei import scoring as mvei_scoring

    make_mvei_run(run)
    log = run / f"{DATE}_samples_mvei_sample.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    for i, new in answers.items():
        rec = lines[i]["acc_total"]
        pair = mvei_scoring.score_sample(new, rec["dimension"], rec["label"])
        rec.update(answers=new, decisions=list(pair.decisions), strict_decisions=list(pair.strict_decisions),
                   final=pair.final, right=pair.right)  # fmt: skip
        lines[i]["filtered_resps"] = new
    _jsonl(log, lines)
    return run


#: The new run: p0, p1 and p2 flip from correct to incorrect, p3 from incorrect to correct (not listed).
FLIPPED = {0: ["Incorrect"] * 3, 1: ["Correct"] * 3, 2: ["Incorrect"] * 3, 3: ["Incorrect"] * 3}


def test_the_comparison_page_lists_exactly_the_flipped_samples_first(tmp_path: Path, capsys) -> None:
    a, b = mvei_run(tmp_path / "a"), mvei_rescored(tmp_path / "b", FLIPPED)
    code, _, err = view(capsys, a, b, "--out", tmp_path / "site")
    assert code == 0, err
    overview, _ = site_data(tmp_path / "site")
    assert overview["comparisons"] == [{"a": "r1", "b": "r2", "judges": False, "file": "data/compare/r1-r2.js",
                                        "n_flips": 3, "n_changed": 3}]  # fmt: skip
    name, pair = read_script(tmp_path / "site" / "data" / "compare" / "r1-r2.js")
    assert name == "compare/r1-r2"
    (task,) = pair["tasks"]
    assert task["n_paired"] == 4 and [(c["doc_id"], c["flip"]) for c in task["rows"]] == [(0, 1), (1, 1), (2, 1)]
    first = task["rows"][0]
    assert first["sa"]["verdict"] == "correct" and first["sb"]["verdict"] == "incorrect"
    assert first["sb"]["answers"] == ["Incorrect"] * 3 and "verdict correct → incorrect" in first["what"]
    # the order: flips first, then drops; a judges' pair: the largest difference first
    one = {"task": "t", "doc_id": 0, "verdict": "correct", "values": {"m": 1.0}}
    rows = [one, one | {"doc_id": 1, "values": {"m": 0.9}}, one | {"doc_id": 2, "values": {"m": 0.5}}]
    new = [one | {"values": {"m": 0.8}}, one | {"doc_id": 1, "verdict": "incorrect", "values": {"m": 0.8}},
           one | {"doc_id": 2, "values": {"m": 0.0}}]  # fmt: skip
    assert [c["doc_id"] for c in flips.changes(rows, new, ["m"])] == [2, 1, 0]
    assert [c["doc_id"] for c in flips.changes(rows, new, ["m"], judges=True)] == [2, 0, 1]


def test_compare_exit_1_names_the_flips_and_writes_the_view(tmp_path: Path, capsys, monkeypatch) -> None:
    """Three of four pairs flip and none improves: McNemar's exact p is 0.25 with 4 pairs, hence --alpha 0.3.
    The flips and the site read each run's samples once (the viewer is wrapped to count its reads)."""
    from emo_tasks.mvei import view as mvei_view

    reads: list[str] = []
    real = mvei_view.view_samples
    monkeypatch.setattr(mvei_view, "view_samples", lambda d, f, t: reads.append(str(f)) or real(d, f, t))
    a, b = mvei_run(tmp_path / "a"), mvei_rescored(tmp_path / "b", {i: FLIPPED[i] for i in range(3)})
    code = cli.main(["compare", str(a), str(b), "--alpha", "0.3", "--view", str(tmp_path / "site")])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert len(reads) == 2 and len(set(reads)) == 2  # base and new, once each
    listed = out.split("largest flips", 1)[1].splitlines()[1:]
    assert [line.split(":")[0].split() for line in listed] == [["mvei_sample", "doc", str(i)] for i in range(3)]
    assert "significant drop in mvei_sample:acc_total" in err and "index.html#compare/r1/r2" in err
    overview, _ = site_data(tmp_path / "site")
    assert overview["comparisons"][0]["n_flips"] == 3 and (tmp_path / "site" / "data/compare/r1-r2.js").exists()
    assert cli.main(["compare", str(a), str(a)]) == 0 and "largest flips" not in capsys.readouterr().out


def test_two_judges_of_one_run_get_their_page_and_the_agreement_figures(tmp_path: Path, capsys) -> None:
    judged = []
    for name, extra, ratings in (("judge-a", "", None), ("judge-b", " (second judge)", {0: [[0, 1], [0, 1], [0, 1]]})):
        run = mme_predicted(tmp_path / name, {}, judge_text=extra, ratings=ratings)
        results = next(run.glob("*results*.json"))
        data = json.loads(results.read_text())
        data["emo_tasks_judge"] = {"source_results": "/runs/x/20260101_000000_results.json"}
        results.write_text(json.dumps(data))
        judged.append(run)
    code, _, err = view(capsys, *judged, "--out", tmp_path / "site")
    assert code == 0, err
    overview, _ = site_data(tmp_path / "site")
    (entry,) = overview["comparisons"]
    assert entry["judges"] and entry["n_changed"] == 1
    _, pair = read_script(tmp_path / "site" / entry["file"])
    rows = [row for t in pair["tasks"] for row in t["rows"]]
    assert [(r["task"], r["doc_id"]) for r in rows] == [(ER_LAB, 10)]
    assert rows[0]["sb"]["texts"]["judge_text"].endswith("(second judge)")
    assert not rows[0]["sa"]["texts"]["judge_text"].endswith("(second judge)")
    from emo_tasks.judging import agreement, agreement_report

    doc = agreement_report.compare_runs(*(agreement.load_run(r) for r in judged), resamples=1000, seed=0)
    assert pair["agreement"]["overall"] == json.loads(json.dumps(doc["overall"]))
    assert pair["agreement"]["overall"]["n_paired"] >= 1


def test_a_sample_logged_twice_stops_the_site_naming_both_lines(tmp_path: Path, capsys) -> None:
    """Each row once: a duplicated line in a sample log (an appended log) is an error naming it, never a winner."""
    run = mvei_run(tmp_path / "run")
    log = next(run.glob("*_samples_mvei_sample.jsonl"))
    first = log.read_text().splitlines()[0]
    log.write_text(log.read_text() + first + "\n")
    code, _, err = view(capsys, run, "--out", tmp_path / "site")
    n = len(log.read_text().splitlines())
    assert code == 3 and f"lines 1 and {n}: doc_id 0 is logged twice" in err, err
    assert not (tmp_path / "site").exists()


def test_a_judge_log_row_without_a_task_is_a_note_not_a_crash(tmp_path: Path, capsys) -> None:
    run = mme_predicted(tmp_path / "mme", {})
    log = next((run / "emo_tasks_judge").glob("*_judge.jsonl"))
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    del rows[1]["task"]
    _jsonl(log, rows)
    loaded = reader.load_run(run)
    assert any(f"{log.name}" in n and "line 2: not a judge-log row" in n for n in report.run_notes(loaded))
    code, _, err = view(capsys, run, "--out", tmp_path / "site")
    assert code == 0, err  # shown without the judge's evidence; the report's note says why
