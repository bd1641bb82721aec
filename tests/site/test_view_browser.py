"""`emo-tasks view` in a real browser: the generated site opened from `file://` in headless Chromium (Debian's
`chromium`, driven by Playwright; see docs/view.md and /work/shared/docs/browser_testing.md).

Checked on every page opened: no console error, no failed or non-file request.  The overview, task and sample pages
show as many samples as the run has; filters change the listed rows as they should; a sample's page (`#task/doc`)
shows its answer, steps and ratings, frames and bar charts; a sample's page loads one chunk of data; hostile answers
(`<img onerror>`, `<script>`, `</textarea>`, `javascript:` links) run nothing and read as text.  Last, a real
lmms-eval run of the three sample tasks (`--model dummy` answering hostile HTML, MME-Emotion judged in process by
the loopback judge) viewed through the CLI; screenshots of its overview, a task page and a sample page per benchmark
go to tests/artifacts/view/ (gitignored), to look at.

Without Chromium or Playwright these tests fail and say how to get them; `EMO_NO_BROWSER=1` skips them instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import API_KEY, cli_env, private_copy, run_emo, with_mme_sample
from fakes import Judge, Model
from shared_runs import predicted_sample_run
from test_export import MME_ROWS, MVEI_PAIRS
from test_view_site import FLIPPED, HOSTILE, mme_predicted, mvei_rescored, mvei_run, site_data, three_runs

from judges.testing import LoopbackServer

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts" / "view"
#: What the dummy model answers in the real run: HTML that would run code if a page parsed it.
REAL_ANSWER = "<img src=x onerror=window.__pwned=1> <script>window.__pwned=1</script> Correct. Score: 70. Anger."


def _need_a_browser() -> str:
    """The Chromium to drive; fails (never skips silently) saying how to get what is missing."""
    if os.environ.get("EMO_NO_BROWSER") == "1":
        pytest.skip("EMO_NO_BROWSER=1: the browser tests of emo-tasks view are switched off")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail('Playwright is not installed: pip install -e ".[dev]" (never `playwright install`: the tests '
                    "drive the system's Chromium). Or set EMO_NO_BROWSER=1 to skip these tests.")  # fmt: skip
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("no `chromium` on PATH: apt-get update && apt-get install -y chromium (as root; Debian's "
                    "build). Or set EMO_NO_BROWSER=1 to skip these tests.")  # fmt: skip
    return chromium


def _until(page: Any, predicate: str, seconds: float = 60.0) -> None:
    """Poll `predicate` (a JS function) until it is true.  Not `wait_for_function`: its polling evaluates a string
    inside the page, which the site's Content-Security-Policy (no 'unsafe-eval') rightly refuses."""
    import time

    deadline = time.monotonic() + seconds
    while not page.evaluate(predicate):
        assert time.monotonic() < deadline, f"not true after {seconds:.0f} s: {predicate}"
        page.wait_for_timeout(100)


class Tab:
    """One page of a site, with every console error, page error and failed or non-file request recorded."""

    def __init__(self, page: Any, site: Path) -> None:
        self.page, self.site, self.problems = page, site, []
        page.set_default_timeout(60_000)  # generous: a loaded 2-core CI machine, never a speed test (see benchmarks/)
        page.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url}"))
        page.on("request", lambda r: None if r.url.startswith("file://") else self.problems.append(f"sent: {r.url}"))

    def open(self, hash_: str, ready: str) -> Any:
        """Go to `#hash_` and wait for the selector `ready`; no problem may have been recorded."""
        self.page.goto(self.site.joinpath("index.html").as_uri() + hash_)
        self.page.wait_for_selector(ready)
        self.check()
        return self.page

    def check(self) -> None:
        assert not self.problems, self.problems
        assert self.page.evaluate("window.__pwned") is None, "a hostile answer ran"

    def rows(self) -> list[str]:
        return self.page.eval_on_selector_all("#samples-table tr[data-key]", "rs => rs.map(r => r.dataset.key)")

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module", autouse=True)
def browser_present() -> None:
    """First of all (before any run is made): fail or skip without a browser."""
    _need_a_browser()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = _need_a_browser()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture()
def tab(chromium: Any) -> Iterator[Any]:
    """tab(site) -> a Tab of a fresh page."""
    pages = []

    def make(site: Path) -> Tab:
        page = chromium.new_page(viewport={"width": 1300, "height": 900})
        pages.append(page)
        return Tab(page, site)

    yield make
    for page in pages:
        page.close()


@pytest.fixture(scope="module")
def hand_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One site over the hand-made runs: MME-Emotion (r1), MVEI (r2), MultiEmo (r3), and MVEI with hostile answers
    (r4)."""
    root = tmp_path_factory.mktemp("view_hand")
    runs = [*three_runs(root), mvei_run(root / "hostile", answers=HOSTILE[:4])]
    proc = run_emo(cli_env(root / "cache"), "view", *map(str, runs), "--out", str(root / "site"))
    assert proc.returncode == 0, proc.stderr
    return root / "site"


# ------------------------------------------------------------------------------------------------ hand-made runs
def test_every_page_counts_the_runs_samples(hand_site: Path, tab: Any) -> None:
    overview, samples = site_data(hand_site)
    t = tab(hand_site)
    page = t.open("", "#bench-mvei")
    assert page.locator("h2", has_text="MME-Emotion").count() == 1
    cells = page.locator("td.cell a")
    linked = [c for b in overview["benchmarks"] for tb in b["tables"] for row in tb["rows"] for c in row["cells"]
              if c["task"]]  # fmt: skip
    assert cells.count() == len(linked) > 0  # every number of a run that has the task links to its samples
    assert page.locator("script[src*='data/r']").count() == 0  # the first page carries no sample
    for tid, meta in overview["tasks"].items():
        run, task = tid.split("/")
        t.open(f"#{task}?run={run}", "#count")
        expected = meta["n_samples"]
        assert t.page.inner_text("#count") == f"Showing {expected} of {expected} samples", tid
        listed = t.rows()
        if meta["group"]:
            assert len(listed) == expected == sum(len(samples[leaf]) for leaf in meta["leaves"])
        else:
            assert listed == [r["key"] for r in samples[tid]], tid
    assert len(samples["r2/mvei_sample"]) == len(MVEI_PAIRS) and len(samples["r1/mme_emotion_sample_er_lab"]) == 3


def test_filters_change_the_rows(hand_site: Path, tab: Any) -> None:
    t = tab(hand_site)
    page = t.open("#mvei_sample?run=r2", "#count")
    page.select_option("#f-verdict", "incorrect")
    assert t.rows() == ["3"]  # p3, the one pair the majority gets wrong
    page.select_option("#f-verdict", "")
    page.select_option("#f-cat-value", "scene context")
    assert t.rows() == ["2"] and page.inner_text("#count") == "Showing 1 of 4 samples"
    assert "scene context" in page.inner_text("#by-category")
    page.select_option("#f-cat-value", "")
    page.fill("#f-text", "cannot tell")
    assert t.rows() == ["2"]  # p2's first answer "I cannot tell"
    page.fill("#f-text", "")
    assert len(t.rows()) == 4
    # numeric filter: MME-Emotion's step count (ER-Lab: 3 steps, 2 steps, a judge failure without steps)
    page = t.open("#mme_emotion_sample_er_lab?run=r1", "#count")
    spread = page.inner_text(".distribution[data-field='details.n_steps']")  # the step counts 2 and 3, once each
    assert "2\n1 sample\n3\n1 sample" in spread, spread
    page.fill("#f-num-n_steps-min", "3")
    assert t.rows() == ["10"]
    page.fill("#f-num-n_steps-min", "")
    page.select_option("#f-verdict", "judge_failed")
    assert t.rows() == ["12"]
    # a group's page: every leaf, filtered by task
    page = t.open("#mme_emotion_sample?run=r1", "#count")
    page.select_option("#f-task", "mme_emotion_sample_er_wild")
    assert len(t.rows()) == sum(r["task"] == "ER-Wild" for r in MME_ROWS)
    t.check()


def test_a_sample_page_shows_its_evidence_and_loads_one_chunk(hand_site: Path, tab: Any) -> None:
    t = tab(hand_site)
    page = t.open("#mme_emotion_sample_er_lab/10?run=r1", "#s-details")
    assert page.locator("script[src*='data/r']").count() == 1
    assert "answer ER-Lab 0" in page.inner_text("#s-answers")
    details = page.inner_text("#s-details")
    for step in MME_ROWS[0]["steps"]:
        assert step in details
    assert "1/1" in details and "0/1" in details  # the ratings beside the steps
    assert "Ratings:" in details  # the judge's text
    assert page.inner_text("#s-facts").count("happy") == 1  # the gold label
    page.click("#next")
    page.wait_for_selector("h1:has-text('doc 11')")
    failed = t.open("#mme_emotion_sample_er_lab/12?run=r1", "#s-details")
    assert "judge_failed" in failed.inner_text("#s-facts") and "malformed" in failed.inner_text("#s-details")
    # MultiEmo: the scores beside the votes as one bar chart
    me = t.open("#multiemo_sample?run=r3", "#count")
    me.click("#samples-table tr[data-key] a")
    me.wait_for_selector("#s-details .chart")
    assert me.locator("#s-details .chart .fill").count() >= 8
    assert "Scores and Votes" in me.inner_text("#s-details")
    group = t.open("#mme_emotion_sample/10?run=r1", "main ul a")  # a group's doc ids are its tasks'
    assert group.locator("main ul a").count() == 3 and "ER-Lab" in group.inner_text("main ul")
    missing = t.open("#mvei_sample/999?run=r2", "p.error")
    assert "No sample 999" in missing.inner_text("main")
    t.check()


def test_hostile_answers_run_nothing_and_read_as_text(hand_site: Path, tab: Any) -> None:
    _, samples = site_data(hand_site)
    t = tab(hand_site)
    page = t.open("#mvei_sample?run=r4", "#count")
    excerpts = page.inner_text("#samples-table")
    assert HOSTILE[0] in excerpts and HOSTILE[1] in excerpts  # as text, in the answer column
    page.fill("#f-text", "</textarea>")
    assert len(t.rows()) == 1
    for rec in samples["r4/mvei_sample"]:
        page = t.open(f"#mvei_sample/{rec['key']}?run=r4", "#s-answers")
        shown = page.inner_text("#s-answers")
        assert rec["answers"][0] in shown  # the literal text, tags and all
        assert page.locator("#s-answers img, #s-answers script, #s-answers a, #s-answers textarea").count() == 0
    page.wait_for_timeout(300)  # an onerror handler would have fired by now
    t.check()


def test_media_outside_the_run_are_named_not_shown(tmp_path: Path, tab: Any) -> None:
    """A run linking to a file outside it (issue 42, item 5): the overview says how many files were left out and
    why, the sample names the file with the "not shown" mark beside its own image's thumbnail (screenshots:
    view_outside_overview.png, view_outside_sample.png)."""
    from PIL import Image

    home, run = tmp_path / "home", tmp_path / "run"
    home.mkdir()
    Image.new("RGB", (64, 48), "red").save(home / "private.jpg")
    mvei_run(run, media_of={0: ["leak.jpg", "images/own.jpg"], 1: [str(home / "private.jpg")]})
    (run / "images").mkdir()
    Image.new("RGB", (160, 120), "green").save(run / "images" / "own.jpg")
    (run / "leak.jpg").symlink_to(home / "private.jpg")
    proc = run_emo(cli_env(tmp_path / "cache"), "view", str(run), "--out", str(tmp_path / "site"))
    assert proc.returncode == 0, proc.stderr
    assert "2 media files not shown: outside the run folder" in proc.stderr
    t = tab(tmp_path / "site")
    page = t.open("", "#media-not-shown")
    notice = page.inner_text("#media-not-shown")
    assert notice.startswith("2 media files not shown: outside the run and the data. Run R1 names image files")
    t.shot("view_outside_overview")
    page = t.open("#mvei_sample/0", "#s-media")
    media = page.inner_text("main")
    assert "leak.jpg not shown: outside the run and the data" in media
    assert page.locator("#s-media img").count() == 1  # its own image only
    assert page.locator(".outside").count() == 1
    t.shot("view_outside_sample")
    t.check()


# ------------------------------------------------------------------------------------------------ a real run
@pytest.fixture(scope="module")
def real_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A real lmms-eval run of the three sample tasks (dummy model, hostile answer, MME-Emotion judged by the
    loopback judge), viewed through the CLI; the site and the run's results."""
    root = tmp_path_factory.mktemp("view_real")
    out, cache = root / "run", root / "cache"
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        env = cli_env(cache, srv)
        cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={REAL_ANSWER}",
               "--tasks", "mme_emotion_sample,mvei_sample,multiemo_sample", "--batch_size", "1",
               "--output_path", str(out), "--log_samples"]  # fmt: skip
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=root)
    results = sorted(out.rglob("*_results.json"))
    assert results, proc.stdout[-2000:] + proc.stderr[-4000:]
    view = run_emo(cli_env(cache), "view", str(out), "--out", str(root / "site"))
    assert view.returncode == 0, view.stderr
    assert view.stdout.startswith("emo-tasks view: wrote ") and " MB in " in view.stdout
    return root / "site", json.loads(results[0].read_text())["results"]


def test_a_real_run_in_the_browser(real_site: tuple[Path, dict[str, Any]], tab: Any) -> None:
    site, results = real_site
    overview, samples = site_data(site)

    def rows_of(task: str) -> int:  # the run's own count of its samples
        r = results[task]
        if "n_scored,none" in r:
            return int(r["n_scored,none"] + r["n_judge_failed,none"])
        return int(r.get("n_pairs,none") or r["n_images,none"])

    t = tab(site)
    t.open("", "#bench-multiemo")
    t.shot("overview")
    leaves = [tid for tid, m in overview["tasks"].items() if not m["group"]]
    assert {tid.split("/")[1] for tid in leaves} == {t for t in results if not t == "mme_emotion_sample"}
    for tid in leaves:
        task = tid.split("/")[1]
        assert len(samples[tid]) == rows_of(task), task
    for bench, task in (("mme", "mme_emotion_sample"), ("mvei", "mvei_sample"), ("multiemo", "multiemo_sample")):
        page = t.open(f"#{task}", "#samples-table")
        n = overview["tasks"][f"r1/{task}"]["n_samples"]
        assert len(t.rows()) == n and page.inner_text("#count") == f"Showing {n} of {n} samples"
        t.shot(f"{bench}_task")
        page.click("#samples-table tr[data-key] a")
        page.wait_for_selector("#s-answers")
        images = page.locator("#s-media img")
        assert images.count() >= 1, task  # MME-Emotion's frames, MVEI's and MultiEmo's images
        _until(page, "() => [...document.querySelectorAll('#s-media img')].every(i => i.complete)")
        assert page.eval_on_selector_all("#s-media img", "is => is.every(i => i.naturalWidth > 0)"), task
        assert REAL_ANSWER in page.inner_text("#s-answers")
        if bench == "mme":
            details = page.inner_text("#s-details")
            assert "Rating" in details and "Step 1" in details and "Judge text" in details
        t.shot(f"{bench}_sample")
        t.check()


# ------------------------------------------------------------------------------------------------ matrix, pairs
@pytest.fixture(scope="module")
def pair_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MME-Emotion with predicted labels (r1), MVEI (r2) and the same MVEI with three pairs flipped (r3)."""
    root = tmp_path_factory.mktemp("view_pairs")
    runs = [mme_predicted(root / "mme", {0: ["happy"], 1: ["happy"]}), mvei_run(root / "a"),
            mvei_rescored(root / "b", FLIPPED)]  # fmt: skip
    proc = run_emo(cli_env(root / "cache"), "view", *map(str, runs), "--out", str(root / "site"))
    assert proc.returncode == 0, proc.stderr
    return root / "site"


def matrix(page: Any) -> dict[tuple[str, str], int]:
    """The confusion matrix as drawn: {(gold, predicted): count} of its non-empty cells."""
    cells = page.eval_on_selector_all("#confusion td.heat", "cs => cs.map(c => [c.dataset.gold, c.dataset.pred, "
                                      "Number(c.querySelector('.n').textContent)])")  # fmt: skip
    return {(g, p): n for g, p, n in cells if n}


def test_the_confusion_matrix_counts_the_samples_and_a_cell_filters_them(pair_site: Path, tab: Any) -> None:
    _, samples = site_data(pair_site)
    t = tab(pair_site)
    for task, run in (("mme_emotion_sample_er_lab", "r1"), ("mvei_sample", "r3")):
        page = t.open(f"#{task}?run={run}", "#confusion")
        recs = samples[f"{run}/{task}"]
        pairs = Counter((r["gold"], r["predicted"]) for r in recs if r["gold"] and r["predicted"])
        assert matrix(page) == dict(pairs) and pairs, task
        labels = page.eval_on_selector_all("#confusion tr:first-child th", "hs => hs.map(h => h.textContent)")
        assert labels[1:-1] == sorted({x for pair in pairs for x in pair})  # every label a column, sorted
        gold, pred = next(iter(pairs))
        page.click(f"#confusion td[data-gold='{gold}'][data-pred='{pred}']")
        expected = [r["key"] for r in recs if (r["gold"], r["predicted"]) == (gold, pred)]
        assert t.rows() == expected and f"Showing {len(expected)} of {len(recs)}" in page.inner_text("#count")
        assert matrix(page) == {(gold, pred): len(expected)}  # the matrix follows the filters
        if task.startswith("mme"):
            spread = page.inner_text(".distribution[data-field='details.steps.value']")
            assert "rated values" in spread
            t.shot("confusion_filtered")
        page.click("#conf-clear")
        assert len(t.rows()) == len(recs)
    page = t.open("#mme_emotion_sample_er_lab?run=r1", "#confusion")
    steps = [x["value"] for r in samples["r1/mme_emotion_sample_er_lab"] for x in r["details"].get("steps") or []
             if x["value"] is not None]  # a step without a rating has no value  # fmt: skip
    spread = page.inner_text(".distribution[data-field='details.steps.value']")
    for value, n in Counter(steps).items():
        assert f"{value:.2f}\n{n} rating" in spread, spread
    t.shot("task_confusion")
    t.check()


def test_the_comparison_page_lists_the_flipped_samples_first(pair_site: Path, tab: Any) -> None:
    overview, _ = site_data(pair_site)
    assert [(c["a"], c["b"]) for c in overview["comparisons"]] == [("r2", "r3")]
    t = tab(pair_site)
    page = t.open("", "#comparisons")
    page.click("#comparisons a.compare-link")
    page.wait_for_selector(".change")
    keys = page.eval_on_selector_all(".change", "cs => cs.map(c => [c.dataset.key, c.dataset.flip])")
    assert keys == [["0", "1"], ["1", "1"], ["2", "1"]]  # exactly the three flipped pairs; p3 improved
    first = page.inner_text(".change >> nth=0")
    assert "verdict correct → incorrect" in first and "Base (A)" in first and "New (B)" in first
    assert "Correct" in first and "Incorrect" in first  # both runs' answers
    t.shot("compare_runs")
    page.click(".change >> nth=0 >> .pair > div >> nth=1 >> a")
    page.wait_for_selector("#s-facts")
    assert "R3" in page.inner_text("#s-facts") and "incorrect" in page.inner_text("#s-facts")
    t.check()


def test_two_judges_page_shows_both_texts_and_the_agreement(tmp_path: Path, tab: Any) -> None:
    import json as _json

    judged = []
    for name, extra, ratings in (("judge-a", "", None), ("judge-b", " (second judge)", {0: [[0, 1], [0, 1], [0, 1]]})):
        run = mme_predicted(tmp_path / name, {0: ["happy"]}, judge_text=extra, ratings=ratings)
        results = next(run.glob("*results*.json"))
        data = _json.loads(results.read_text())
        data["emo_tasks_judge"] = {"source_results": "/runs/x/results.json"}
        results.write_text(_json.dumps(data))
        judged.append(run)
    proc = run_emo(cli_env(tmp_path / "cache"), "view", *map(str, judged), "--out", str(tmp_path / "site"))
    assert proc.returncode == 0, proc.stderr
    t = tab(tmp_path / "site")
    page = t.open("#compare/r1/r2", "#agreement table")
    assert page.locator("h1").inner_text() == "Two judges of the same answers"
    texts = page.eval_on_selector_all(".change .side-text[data-field='judge_text']", "ds => ds.map(d => d.innerText)")
    assert len(texts) == 2 and not texts[0].endswith("(second judge)") and texts[1].endswith("(second judge)")
    figures = page.inner_text("#agreement")
    assert "Cohen's κ" in figures and "ICC" in figures and "Overall: every step" in figures
    t.shot("compare_judges")
    t.check()


# ------------------------------------------------------------------------------------------------ real, judged later
@pytest.fixture(scope="module")
def judged_later(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A real `--predict_only` run of the three sample tasks (`--model openai` answering from the loopback server),
    judged afterwards by `emo-tasks judge` (the default judge), and its MME-Emotion answers by two more judges.
    The run is a copy of the session's shared one (tests/shared_runs.py; the judges write into it): the model's
    answers are `fakes.Model`'s whatever `per_model` says, which changes only the judges' ratings."""
    root = tmp_path_factory.mktemp("view_judged")
    out = private_copy(predicted_sample_run(tmp_path_factory) / "run", root / "run")
    assert sorted(out.rglob("*_results.json"))
    with LoopbackServer(responder=Model(per_model=True), expected_api_key=API_KEY) as srv:
        env = cli_env(with_mme_sample(root / "cache"), srv)
        judge = run_emo(env, "judge", str(out))
        assert judge.returncode == 0, judge.stderr[-4000:]
        for model in ("judge-a", "judge-b"):
            two = run_emo(env, "judge", str(out), "--tasks", "mme_emotion_sample", "--judge-model", model)
            assert two.returncode == 0, two.stderr[-4000:]
    folders = {p.name.split(",")[0]: p for p in (out / "judged").iterdir()}
    return {"root": root, "run": out, **folders}


def test_a_predict_only_run_judged_by_the_stage_in_the_browser(judged_later: dict[str, Path], tab: Any) -> None:
    root = judged_later["root"]
    default = next(p for name, p in judged_later.items() if name.startswith("judge=gpt"))
    site = root / "site_default"
    proc = run_emo(cli_env(root / "cache"), "view", str(default), "--out", str(site))
    assert proc.returncode == 0, proc.stderr
    overview, samples = site_data(site)
    t = tab(site)
    t.open("", "#bench-mvei")
    mvei = samples["r1/mvei_sample"]
    page = t.open("#mvei_sample", "#confusion")
    assert matrix(page) == dict(Counter((r["gold"], r["predicted"]) for r in mvei if r["predicted"]))
    t.shot("real_judged_mvei_task")
    page = t.open("#mme_emotion_sample_er_lab", "#count")
    recs = samples["r1/mme_emotion_sample_er_lab"]
    assert len(t.rows()) == len(recs) > 0 and any(r["details"].get("steps") for r in recs)
    assert page.locator(".distribution[data-field='details.steps.value']").count() == 1
    t.shot("real_judged_mme_task")
    t.check()


def test_two_judges_of_a_real_run_in_the_browser(judged_later: dict[str, Path], tab: Any) -> None:
    root = judged_later["root"]
    a, b = judged_later["judge=judge-a"], judged_later["judge=judge-b"]
    site = root / "site_judges"
    proc = run_emo(cli_env(root / "cache"), "view", str(a), str(b), "--out", str(site))
    assert proc.returncode == 0, proc.stderr
    overview, _ = site_data(site)
    (pair,) = overview["comparisons"]
    assert pair["judges"] and pair["n_changed"] > 0
    t = tab(site)
    page = t.open("#compare/r1/r2", "#agreement table")
    assert page.locator(".change").count() >= 1
    assert page.locator(".change >> nth=0 >> .side-text[data-field='judge_text']").count() == 2
    assert "Overall: every step" in page.inner_text("#agreement")
    t.shot("real_two_judges")
    t.check()
