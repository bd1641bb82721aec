"""The benchmarks in VLMEvalKit (issue 22): MVEI's dataset rows, its scoring of VLMEvalKit's predictions (the same
numbers as the lmms-eval task for the same answers), the refusals, the lmms-eval-shaped run folder every tool
reads; and, where VLMEvalKit is installed (`pip install -e ".[vlmeval]"`, or a Python that has it named by
EMO_VLMEVAL_PYTHON), the real `python -m vlmeval` against a loopback model, beside the real lmms-eval."""

from __future__ import annotations

import datetime
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_env, run_emo, with_mme_sample

from emo_tasks.benchmarks import all_benchmarks, load_object
from emo_tasks.common import DataError
from emo_tasks.mvei import hooks, scoring
from emo_tasks.mvei import vlmeval as mvei_vlmeval
from emo_tasks.results import reader, report
from emo_tasks.settings import environ
from emo_tasks.vlmeval.runfolder import write_run

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "EmoMVEI_sample"
ANSWERS = ["Correct", "Incorrect.", "I cannot tell", "It is correct", "Incorrect"]


def _predictions(answer=lambda doc_id, k: ANSWERS[(doc_id * 7 + k * 3) % len(ANSWERS)]) -> list[dict]:
    return [{**row, "prediction": answer(row["doc_id"], row["repeat"])} for row in mvei_vlmeval.prediction_rows(SAMPLE)]


def test_each_pair_is_three_rows_with_the_lmms_eval_prompt_and_target() -> None:
    docs = hooks.load_task("mvei/sample", environ())
    rows = mvei_vlmeval.prediction_rows(SAMPLE)
    assert len(rows) == 3 * len(docs) and [r["index"] for r in rows] == list(range(len(rows)))
    for row in rows:
        doc = docs[row["doc_id"]]
        assert row["index"] == 3 * row["doc_id"] + row["repeat"]
        assert row["question"] == hooks.doc_to_text(doc) and row["target"] == hooks.doc_to_target(doc)
        assert row["image_path"] == doc["image_path"] and Path(row["image_path"]).is_file()


def test_scores_equal_the_lmms_eval_tasks_for_the_same_answers() -> None:
    preds = _predictions()
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, preds)
    docs = hooks.load_task("mvei/sample", environ())
    records = [
        hooks.process_results(doc, [[p["prediction"] for p in preds if p["doc_id"] == i]])["acc_total"]
        for i, doc in enumerate(docs)
    ]
    assert metrics == scoring.task_metrics([hooks.pair_result(r) for r in records])  # lmms-eval's own path
    assert [line["acc_total"] for line in lines] == records and host["n_infer_failed"] == 0
    # hand-checked: pair 0's answers are ANSWERS[0], [3], [1] -> Correct, Correct, Incorrect -> majority correct
    assert lines[0]["filtered_resps"] == ["Correct", "It is correct", "Incorrect."]
    assert lines[0]["acc_total"]["final"] == "correct"
    assert host["sampling_off"] is False


def test_multiemo_scores_equal_the_lmms_eval_tasks_for_the_same_answers() -> None:
    from emo_tasks.multiemo import hooks as me_hooks
    from emo_tasks.multiemo import vlmeval as me_vlmeval
    from emo_tasks.vlmeval import images

    rows = images.prediction_rows(me_vlmeval.TASK, "EmoMultiEmo_sample")
    docs = me_hooks.load_task("multiemo/sample", environ())
    assert len(rows) == len(docs) and all(r["question"] == me_hooks.doc_to_text(docs[r["index"]]) for r in rows)
    answers = [f"Score: {(i * 37) % 101}. Reason: colours." if i % 11 else "no number" for i in range(len(rows))]
    preds = [{**r, "prediction": a} for r, a in zip(rows, answers, strict=True)]
    metrics, lines, host = images.score(me_vlmeval.TASK, "EmoMultiEmo_sample", preds)
    records = [me_hooks.process_results(doc, [a])["precision_ours"] for doc, a in zip(docs, answers, strict=True)]
    assert metrics == me_hooks.evaluate(records)  # lmms-eval's own aggregation over the same records
    assert metrics["n_parse_failed"] > 0 and host["n_infer_failed"] == 0 and len(lines) == len(docs)


def test_three_identical_answers_everywhere_say_sampling_was_off() -> None:
    _, _, host = mvei_vlmeval.score_predictions(SAMPLE, _predictions(lambda doc_id, k: ANSWERS[doc_id % 2]))
    assert host["sampling_off"] is True and "temperature" in host["notes"][0]


def test_an_empty_answer_read_back_from_xlsx_is_empty_not_nan() -> None:
    preds = _predictions()
    preds[0]["prediction"], preds[1]["prediction"] = float("nan"), None  # pandas' empty xlsx cell; a missing one
    _, lines, host = mvei_vlmeval.score_predictions(SAMPLE, preds)
    assert lines[0]["filtered_resps"][:2] == ["", ""] and lines[0]["acc_total"]["decisions"][:2] == ["give_up"] * 2
    assert host["n_empty_answers"] == 2 and host["notes"][0].startswith("2 answer(s) were an empty cell")


def test_the_prompt_settings_are_the_task_yamls() -> None:
    from emo_tasks.vlmeval.runfolder import prompt_config

    conf = prompt_config("mvei_sample")
    assert conf == {
        "description": "",
        "num_fewshot": 0,
        "doc_to_text": "<function doc_to_text>",
        "lmms_eval_specific_kwargs": {"default": {}},
        "metadata": {"version": 0.1, "benchmark": "MVEI"},
    }
    with pytest.raises(ValueError, match="no task YAML for nothing"):
        prompt_config("nothing")


def test_a_failed_answer_is_counted_and_its_pair_left_out() -> None:
    preds = _predictions()
    preds[4]["prediction"] = "Failed to obtain answer via API."
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, preds)
    assert host["n_infer_failed"] == 1 and metrics["n_pairs"] == 15 and 1 not in [ln["doc_id"] for ln in lines]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.append(dict(p[0])), "EmoMVEI_sample: prediction rows 1 and 49 both have index 0"),
        # the row missing is named by its own index (5), not its pair's first (3); rows, as the file has them
        (lambda p: p.pop(5), "EmoMVEI_sample: the prediction file lacks 1 of the 48 rows (missing: index 5); "),
        (lambda p: p[7].update(target="correct #000000000000"), "EmoMVEI_sample: prediction row 8 (index 7): its "),
        (lambda p: p[0].update(index=999), "EmoMVEI_sample: prediction row 1: index 999 is no row of EmoMVEI_sample "
                                           "(its rows are index 0 to 47)"),
    ],
)  # fmt: skip
def test_rows_that_are_not_the_runs_are_refused(change, message: str) -> None:
    """Each refusal names the dataset, the prediction file's own row and index, in the file's words (issue 32)."""
    preds = _predictions()
    change(preds)
    with pytest.raises(DataError) as refused:
        mvei_vlmeval.score_predictions(SAMPLE, preds)
    assert str(refused.value).startswith(message)


def test_the_report_says_what_the_vlmeval_run_flagged(tmp_path: Path) -> None:
    preds = _predictions(lambda doc_id, k: ANSWERS[doc_id % 2])
    preds[0]["prediction"] = "Failed to obtain answer via API."
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, preds)
    write_run(tmp_path / "run", "mvei_sample", metrics, lines, {"dataset_name": "mvei/sample"}, "m", host)
    notes = report.run_notes(reader.load_run(tmp_path / "run"))
    assert "mvei_sample: 1 answers VLMEvalKit could not get (left out)" in notes
    assert any(n.startswith("mvei_sample: the three answers of every pair are identical") for n in notes)


def test_the_run_folder_is_read_by_the_report_with_the_same_numbers(tmp_path: Path) -> None:
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, _predictions())
    results = write_run(tmp_path / "run", "mvei_sample", metrics, lines, {"dataset_name": "mvei/sample"}, "m", host)
    run = reader.load_run(tmp_path / "run")
    assert run.results_file == results and not [n for n in report.run_notes(run) if "per-sample" in n]
    acc = run.samples["mvei_sample"]["acc_total"]
    assert sum(acc.values()) / len(acc) == metrics["acc_total"] == run.results["mvei_sample"]["acc_total,none"]
    assert json.loads(results.read_text())["emo_tasks_vlmeval"]["sampling_off"] is False


def test_evaluating_the_same_predictions_again_rewrites_the_same_run(tmp_path: Path) -> None:
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, _predictions())
    args = (tmp_path / "run", "mvei_sample", metrics, lines, {"dataset_name": "mvei/sample"}, "m", host)
    first = write_run(*args, when=1_700_000_000.0)
    assert write_run(*args, when=1_700_000_000.0) == first
    assert len(list((tmp_path / "run").glob("*_results.json"))) == 1  # `report` needs no --run
    assert reader.load_run(tmp_path / "run").results_file == first


def test_a_run_asked_with_limit_is_scored_on_its_first_docs_and_says_so(tmp_path: Path) -> None:
    first = _predictions()[:6]  # VLMEvalKit's --limit 6 keeps the first six rows: pairs 0 and 1, three answers each
    metrics, lines, host = mvei_vlmeval.images.score(mvei_vlmeval.TASK, SAMPLE, first, limit=6)
    assert metrics["n_pairs"] == 2 and [ln["doc_id"] for ln in lines] == [0, 1] and host["limit"] == 2
    results = write_run(tmp_path / "run", "mvei_sample", metrics, lines, {}, "m", host, n_original=host["n_docs"])
    assert json.loads(results.read_text())["n-samples"]["mvei_sample"] == {"original": 16, "effective": 2}
    with pytest.raises(DataError, match=r"--limit 7 keeps the first 7 rows \(index 0 to 6\), which splits the 3 "
                       r"rows that ask one question 3 times \(index 6 to 8\)"):  # fmt: skip
        mvei_vlmeval.images.score(mvei_vlmeval.TASK, SAMPLE, _predictions()[:7], limit=7)
    with pytest.raises(DataError, match=r"lacks 42 of the 48 rows \(missing: index 6, 7, 8, 9, 10 and 37 more\)"):
        mvei_vlmeval.score_predictions(SAMPLE, first)  # not asked --limit: a short file is refused


def test_a_run_of_other_predictions_replaces_the_folders_old_one(tmp_path: Path) -> None:
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, _predictions())
    args = (tmp_path / "run", "mvei_sample", metrics, lines, {"dataset_name": "mvei/sample"}, "m", host)
    write_run(*args, when=1_700_000_000.0)
    (tmp_path / "run" / "judged" / "x").mkdir(parents=True)  # what `emo-tasks judge` made of the old answers
    newer = write_run(*args, when=1_700_000_100.0)  # VLMEvalKit ran again: a new prediction file
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == sorted(
        [newer.name, newer.name.replace("results.json", "samples_mvei_sample.jsonl")])  # fmt: skip
    assert reader.load_run(tmp_path / "run").results_file == newer


def test_every_registered_vlmeval_dataset_names_a_function() -> None:
    specs = [s for b in all_benchmarks() for s in b.vlmeval_datasets]
    assert {"emo_tasks.mvei.vlmeval:dataset_class", "emo_tasks.multiemo.vlmeval:dataset_class"} <= set(specs)
    assert all(callable(load_object(s)) for s in specs)  # the function; calling it imports vlmeval


# ------------------------------------------------------------------------------------- with VLMEvalKit installed
def _vlmeval_python() -> str:
    python = os.environ.get("EMO_VLMEVAL_PYTHON") or sys.executable
    probe = subprocess.run([python, "-c", "import vlmeval"], capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        pytest.skip(
            f'VLMEvalKit is not installed for {python}: `pip install -e ".[vlmeval]"` (~7 GB), or name a Python '
            "that has it with EMO_VLMEVAL_PYTHON"
        )
    return python


# ------------------------------------------------------------------- docs/vlmeval.md's quick start, run as written
DOC = ROOT / "docs" / "vlmeval.md"
MODEL = "my-model"  # the quick start's model name
KEY = "sk-vlm-0000000000000000"
MME_DATASETS = ("EmoVid_sample_ER_Lab", "EmoVid_sample_ML_ER", "EmoVid_sample_SA")
#: The VLMEvalKit datasets the quick start runs (each compared with the lmms-eval run).
QUICK_START_DATASETS = ("EmoMVEI_sample", "EmoMultiEmo_sample", "EmoVid_sample_all", "EmoBenchM_sample_all")


def quick_start_lines(text: str | None = None) -> list[str]:
    """The shell lines of docs/vlmeval.md's "Quick start" section as a user pastes them: every ```bash block, a
    line continued with a backslash joined, comments dropped, `pip install` left out (the tests' environment has
    what it installs)."""
    text = DOC.read_text(encoding="utf-8") if text is None else text
    assert "\n## Quick start\n" in text, "docs/vlmeval.md has no '## Quick start' section"
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = " ".join(re.sub(r"(^|\s)#.*$", "", line).split())
            if line and not line.startswith("pip "):
                lines.append(line)
    return lines


def _task_of(dataset: str) -> str:
    """The lmms-eval task whose settings a VLMEvalKit dataset's run is held to (a group: its first task's)."""
    from emo_tasks.emobench_m import vlmeval as ebm_vlmeval
    from emo_tasks.mme_emotion import vlmeval as mme_vlmeval
    from emo_tasks.multiemo import vlmeval as me_vlmeval

    for names in (mvei_vlmeval.TASK.names, me_vlmeval.TASK.names):
        if dataset in names:
            return names[dataset][0]
    video = ebm_vlmeval if dataset.startswith(ebm_vlmeval.PREFIX) else mme_vlmeval
    return video.names()[video.members(dataset)[0]][0]


def test_the_quick_start_asks_each_tasks_generation_settings_and_medium(tmp_path: Path) -> None:
    """Each `python -m vlmeval` command of the quick start asks what its lmms-eval task asks (no generation note
    in the results), MME-Emotion and EmoBench-M with the clip, as lmms-eval's openai model is asked (`--video-llm`),
    and its run is compared with the lmms-eval run there (issue 32: the documented commands were not the tested
    ones)."""
    from emo_tasks.vlmeval.runfolder import generation_notes, run_settings

    lines = quick_start_lines()
    runs = [shlex.split(line) for line in lines if line.startswith("python -m vlmeval ")]
    datasets = [words[words.index("--data") + 1] for words in runs]
    assert sorted(datasets) == ["EmoBenchM_sample_all", "EmoMVEI_sample", "EmoMultiEmo_sample", "EmoVid_sample_all"]
    for words, dataset in zip(runs, datasets, strict=True):
        (tmp_path / "status.json").write_text(json.dumps({"argv": ["run.py", *words[3:]]}))
        asked = run_settings(tmp_path / "x.xlsx")  # what evaluate records of the command
        assert generation_notes(_task_of(dataset), asked["generation"]) == [], (dataset, asked)
        assert asked["video_llm"] is dataset.startswith(("EmoVid", "EmoBenchM")), dataset
        assert [ln for ln in lines if ln.startswith("emo-tasks compare ") and ln.endswith(f"/{dataset}")], dataset


@dataclass
class QuickStart:
    """docs/vlmeval.md's quick start run as written in `root` (its `outputs/`, lmms-eval's output) against one
    loopback model and judge (`srv`), and how to run its lines again (with more flags, in a copy)."""

    python: str
    root: Path
    srv: Any
    env: dict[str, str]
    lines: list[str]
    #: line -> (its process, the requests it sent)
    done: dict[str, tuple[subprocess.CompletedProcess, list[Any]]] = field(default_factory=dict)

    def argv(self, line: str) -> list[str] | None:
        """The line's command (None for `export`, which sets the environment), placeholders filled in."""
        address = self.srv.base_url.split("//", 1)[1].split("/", 1)[0]
        for placeholder, value in (("HOST:PORT", address), ("JUDGE:PORT", address), ("sk-...", KEY)):
            line = line.replace(placeholder, value)
        words = shlex.split(line)
        if words[0] == "export":
            self.env.update(word.split("=", 1) for word in words[1:])
            return None
        for prefix, module in ((["python", "-m", "vlmeval"], "vlmeval"), (["lmms-eval"], "lmms_eval"),
                               (["emo-tasks"], "emo_tasks")):  # fmt: skip
            if words[: len(prefix)] == prefix:
                return [self.python, "-m", module, *words[len(prefix) :]]
        raise AssertionError(f"docs/vlmeval.md's quick start has a line the test cannot run: {line}")

    def run(self, line: str, *extra: str, cwd: Path | None = None) -> subprocess.CompletedProcess | None:
        argv = self.argv(line)
        if argv is None:
            return None
        return subprocess.run([*argv, *extra], capture_output=True, text=True, env=self.env, cwd=cwd or self.root,
                              timeout=900)  # fmt: skip

    def vlmeval_line(self, dataset: str) -> str:
        return next(ln for ln in self.lines if ln.startswith(f"python -m vlmeval --data {dataset} "))

    def folder(self, dataset: str, root: Path | None = None) -> Path:
        return (root or self.root) / "outputs" / MODEL / "emo_tasks" / dataset

    def lmms_dir(self) -> Path:
        words = shlex.split(next(ln for ln in self.lines if ln.startswith("lmms-eval ")))
        return self.root / words[words.index("--output_path") + 1]

    def lmms_results(self) -> dict[str, Any]:
        (found,) = self.lmms_dir().rglob("*_results.json")
        return json.loads(found.read_text())["results"]

    def copy(self, to: Path) -> Path:
        """The quick start's VLMEvalKit work dir copied under `to` (a test that changes it runs there)."""
        shutil.copytree(self.root / "outputs", to / "outputs")
        return to


def _mme_model(name: str = MODEL):  # noqa: ANN202 - built here: fakes is importable only once tests/ is on sys.path
    """The loopback model of `fakes.Model` (model `name`), answering MME-Emotion questions with steps and a label of
    the row's candidates, both derived from the prompt (so answers, step counts and ratings vary across rows)."""
    import hashlib

    from fakes import Model

    from judges.testing import Reply, last_user_text

    class Answers(Model):
        def __call__(self, body: dict, attempt: int):  # noqa: ANN204
            text = last_user_text(body)
            found = re.search(r"Candidate \w+ labels: (.+?)\.\n", text)
            if body.get("model") != self.name or not found:
                return super().__call__(body, attempt)
            h = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
            labels = [x.strip() for x in found.group(1).split(",")]
            steps = " ".join(f"Step {i + 1}: cue {(h >> i) % 9} noted." for i in range(h % 4))
            return Reply(text=f"{steps} Answer: {labels[h % len(labels)]}")

    return Answers(name=name)


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuickStart]:
    """The quick start's every line, in order, once per module: the runs the tests below read (and copy)."""
    from judges.testing import LoopbackServer

    python = _vlmeval_python()
    root = tmp_path_factory.mktemp("quick_start")
    # TZ=UTC: the machine's clock 8 h from lmms-eval's, so a name stamped on the local clock shows (item 13)
    env = cli_env(with_mme_sample(root / "cache"), PYTHONPATH=str(ROOT), TZ="UTC")
    with LoopbackServer(responder=_mme_model(), expected_api_key=KEY) as srv:
        qs = QuickStart(python, root, srv, env, quick_start_lines())
        for line in qs.lines:
            before = len(srv.calls)
            done = qs.run(line)
            if done is not None:
                qs.done[line] = (done, srv.calls[before:])
        yield qs


def _results(folder: Path) -> dict[str, Any]:
    """The run folder's results as every tool takes them (`reader.load_run`): a VLMEvalKit run's judged one."""
    return reader.load_run(folder).data


@pytest.mark.slow
def test_the_quick_start_runs_as_written_and_compare_accepts_each_run(quick_start: QuickStart) -> None:
    """docs/vlmeval.md's quick start, every line as written: each exits 0, `compare` against the lmms-eval run
    accepts each VLMEvalKit run (exit 0: the same prompts, generation settings, data and judge), and no run notes a
    generation setting that differs from its task's."""
    for line, (done, _) in quick_start.done.items():
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-3000:])
    compares = [line for line in quick_start.done if line.startswith("emo-tasks compare ")]
    assert len(compares) == len(QUICK_START_DATASETS)
    for dataset in QUICK_START_DATASETS:
        host = _results(quick_start.folder(dataset))["emo_tasks_vlmeval"]
        assert not [n for n in host["notes"] if n.startswith("generation:")], (dataset, host["notes"])
        assert host["generation"]["model"].startswith("--base-url")
    assert quick_start.done[quick_start.vlmeval_line("EmoVid_sample_all")][0].returncode == 0
    assert KEY not in "".join(p.read_text() for p in (quick_start.root / "outputs").rglob("emo_tasks/**/*.json*"))


_STAMP = re.compile(r"(?<!\d)(\d{8})[_T](\d{6})(?!\d)")


@pytest.mark.slow
def test_our_names_in_a_vlmevalkit_run_are_on_lmms_evals_clock(quick_start: QuickStart) -> None:
    """Issue 32 item 13: the files we write for VLMEvalKit runs and the lmms-eval run beside them are named on one
    clock (lmms-eval's, UTC+8), on a machine whose clock is UTC: no stamp 8 h from the others."""
    folders = [quick_start.folder(d) for d in QUICK_START_DATASETS]
    stamps = {
        str(path): datetime.datetime.strptime("".join(m.groups()), "%Y%m%d%H%M%S")
        for folder in [*folders, quick_start.lmms_dir()]
        for path in folder.rglob("*")
        if (m := _STAMP.search(path.name))
    }
    assert all(any(str(f) in p for p in stamps) for f in folders), sorted(stamps)
    assert max(stamps.values()) - min(stamps.values()) < datetime.timedelta(hours=2), stamps


@pytest.mark.slow
def test_python_m_vlmeval_runs_mvei_and_multiemo_with_the_numbers_of_lmms_eval(
    quick_start: QuickStart, tmp_path: Path
) -> None:
    """The quick start's `python -m vlmeval --data EmoMVEI_sample ...` and `--data EmoMultiEmo_sample ...` (our
    datasets found through the start-up hook) give the metrics of its `lmms-eval --tasks ...` against the same
    loopback model, and `report`, `view` and `export` read the VLMEvalKit run."""
    from emo_tasks.multiemo import scoring as me_scoring

    want_all = quick_start.lmms_results()
    for dataset, task, table in (("EmoMultiEmo_sample", "multiemo_sample", me_scoring.TABLE),
                                 (SAMPLE, "mvei_sample", scoring.TABLE)):  # fmt: skip
        (ours,) = quick_start.folder(dataset).glob("*_results.json")
        got, want = json.loads(ours.read_text())["results"][task], want_all[task]
        names = [f"{m.name},none" for m in table]
        assert {k: got[k] for k in names} == {k: want[k] for k in names}, dataset
    status = json.loads((quick_start.root / "outputs" / MODEL / "status.json").read_text())["datasets"]
    assert {d: status[d]["primary_metric"] for d in (SAMPLE, "EmoMultiEmo_sample")} == {
        SAMPLE: "acc_total", "EmoMultiEmo_sample": "precision_ours"}  # fmt: skip
    folder = quick_start.folder(SAMPLE)
    shown = run_emo(quick_start.env, "report", str(folder), "--format", "json")
    assert shown.returncode == 0 and f"{got['acc_total,none']}" in shown.stdout, shown.stderr
    for args in (["view", str(folder), "--out", str(tmp_path / "site")],
                 ["export", str(folder), "--format", "mvei-official", "--out", str(tmp_path / "export")]):  # fmt: skip
        done = run_emo(quick_start.env, *args)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "export" / "Std_MVEI_results.json").is_file()


@pytest.mark.slow
def test_python_m_vlmeval_runs_emobench_m_with_the_numbers_of_lmms_eval(
    quick_start: QuickStart, tmp_path: Path
) -> None:
    """EmoBench-M through both hosts against one loopback model and judge: the quick start's `--data
    EmoBenchM_sample_all ... --video-llm` gives every metric of its `lmms-eval --tasks emobench_m_sample` run on the
    same answers, per scenario and pooled, SMILE's LLM scorer included (the run `compare` accepted, in the test
    above); `report`, `view` and `export` read the VLMEvalKit run."""
    from emo_tasks.emobench_m import scoring as ebm_scoring
    from emo_tasks.emobench_m.registry import MEMBERS

    qs = quick_start
    want_all = qs.lmms_results()
    folder = qs.folder("EmoBenchM_sample_all")
    got_all = _results(folder)["results"]
    names = [f"{m.name},none" for m in ebm_scoring.TABLE]
    tasks = [*MEMBERS["emobench_m_sample"], "emobench_m_sample"]
    assert len(tasks) == 14 and [t for t in tasks if t not in got_all] == []
    for task in tasks:
        assert {k: got_all[task][k] for k in names} == {k: want_all[task][k] for k in names}, task
    group, meld, smile = (got_all[f"emobench_m_sample{t}"] for t in ("", "_meld", "_smile"))
    # the loopback model answers every row in the requested format with a label of the prompt's (`fakes`)
    assert group["n_samples,none"] == 26 and group["coverage,none"] == 100.0 and group["f1,none"] is None
    # MELD by hand: the model named "neutral" for both rows (gold neutral, surprise): one right; weighted over the
    # gold labels (one each), P = (1/2 + 0) / 2, R = (1 + 0) / 2, F1 = (2/3 + 0) / 2
    assert [ln["filtered_resps"][0] for ln in _sample_logs(folder)["emobench_m_sample_meld.jsonl"]] == [
        "{'emotion': 'neutral'}"] * 2  # fmt: skip
    assert (meld["accuracy,none"], meld["precision,none"], meld["recall,none"]) == (50.0, 25.0, 50.0)
    assert meld["f1,none"] == pytest.approx(100 / 3) and smile["bleu,none"] > 0 and smile["accuracy,none"] is None
    # the loopback judge rated every reason (0-5 twice): the LLM scorer ran in both hosts, nothing failed
    assert smile["llm_total,none"] is not None and smile["n_judge_failed,none"] == 0
    done, calls = qs.done[qs.vlmeval_line("EmoBenchM_sample_all")]
    assert len([c for c in calls if c.model == MODEL]) == 26, done.stderr[-3000:]  # each row asked once
    status = json.loads((qs.root / "outputs" / MODEL / "status.json").read_text())["datasets"]
    assert status["EmoBenchM_sample_all"]["primary_metric"] == "accuracy"
    assert _results(folder)["emo_tasks_vlmeval"]["medium"] == "video"
    shown = run_emo(qs.env, "report", str(folder), "--format", "json")
    assert shown.returncode == 0 and "emobench_m_sample_smile" in shown.stdout, shown.stderr[-2000:]
    export = ["export", str(folder), "--format", "emobench-m-official", "--out", str(tmp_path / "export")]
    for args in (["view", str(folder), "--out", str(tmp_path / "site")], export):
        done = run_emo(qs.env, *args)
        assert done.returncode == 0, (args, done.stderr[-2000:])
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "export" / "joint" / "MC-EIU.json").is_file()


def _vlmeval_mme(qs: QuickStart, work: Path, *extra: str, data: tuple[str, ...] = MME_DATASETS) -> Any:
    cmd = [qs.python, "-m", "vlmeval", "--data", *data, "--model", MODEL, "--base-url", qs.srv.base_url,
           "--work-dir", str(work), *extra]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=qs.env, cwd=work.parent, timeout=900)


@pytest.mark.slow
def test_python_m_vlmeval_runs_mme_emotion_with_the_numbers_of_lmms_eval(
    quick_start: QuickStart, tmp_path: Path
) -> None:
    """MME-Emotion through both hosts against one loopback model and judge: the quick start's `--data
    EmoVid_sample_all ... --video-llm` (the file and the medium "video", as lmms-eval's `--model openai` is asked)
    gives lmms-eval's numbers, per task and pooled; an image model (frames, "video frames") with VLMEvalKit's own
    judge flags is judged by the judge named there, and `compare` will not pair it with lmms-eval's run (another
    prompt); `report`, `export`, `agreement` and `view` read the VLMEvalKit runs."""
    from emo_tasks.mme_emotion import scoring as mme_scoring

    qs = quick_start
    want_all = qs.lmms_results()
    names = [f"{m.name},none" for m in mme_scoring.TABLE]
    group_dir = qs.folder("EmoVid_sample_all")
    got_all = _results(group_dir)["results"]
    tasks = [t for t in want_all if t.startswith("mme_emotion_sample_")]
    assert len(tasks) == 8
    for task in [*tasks, "mme_emotion_sample"]:  # each task and the group (all eight tasks' rows: the Overall)
        assert {k: got_all[task][k] for k in names} == {k: want_all[task][k] for k in names}, task
    assert got_all["mme_emotion_sample"]["n_scored,none"] == 16
    done, calls = qs.done[qs.vlmeval_line("EmoVid_sample_all")]
    model_calls = [c for c in calls if c.model == MODEL]
    assert len(model_calls) == 16 and {c.images for c in model_calls} == {0}, done.stderr[-3000:]  # the clips
    status = json.loads((qs.root / "outputs" / MODEL / "status.json").read_text())["datasets"]
    assert status["EmoVid_sample_all"]["primary_metric"] == "cot_s"
    # the image model: frames (the judge's sampler), the medium "video frames", judged by VLMEvalKit's --judge
    before = len(qs.srv.calls)
    frames = _vlmeval_mme(qs, tmp_path / "vlm_frames", "--judge", "judge-x", "--judge-base-url", qs.srv.base_url,
                          "--judge-key", KEY, "--judge-api-nproc", "8")  # fmt: skip
    frame_calls = [c for c in qs.srv.calls[before:] if c.model == MODEL]
    judge_models = {c.model for c in qs.srv.calls[before:] if c.model != MODEL}
    assert len(frame_calls) == 2 * len(MME_DATASETS) and min(c.images for c in frame_calls) >= 2, frames.stderr[-3000:]
    assert judge_models == {"judge-x"}
    folder = tmp_path / "vlm_frames" / MODEL / "emo_tasks" / MME_DATASETS[0]
    # `emo-tasks judge` judges the VLMEvalKit run again with another judge; `agreement` compares the two judges
    rejudge = run_emo(qs.env, "judge", str(folder), "--judge-model", "judge-b")
    assert rejudge.returncode == 0, rejudge.stderr[-2000:]
    judged = next(p for p in folder.glob("judged/*/*_results.json") if "judge-x" in str(p))
    data = json.loads(judged.read_text())
    assert data["emo_tasks_judge"]["judge_models"] == {"judge_model": "judge-x", "step_model": "judge-x"}
    assert data["emo_tasks_vlmeval"]["medium"] == "video frames" and KEY not in judged.read_text()
    other_prompt = run_emo(qs.env, "compare", str(qs.lmms_dir()), str(folder.parent / MME_DATASETS[1]))
    assert other_prompt.returncode == 2, other_prompt.stdout + other_prompt.stderr  # "video frames" against "video"
    for args in (
        ["report", str(judged.parent)],
        ["export", str(qs.folder("EmoVid_sample_all")), "--format", "mme-official", "--out", str(tmp_path / "export")],
        ["agreement", *sorted(str(p) for p in folder.glob("judged/*"))],
        ["view", *sorted(str(p) for p in folder.glob("judged/*")), "--out", str(tmp_path / "site")],
    ):
        done = run_emo(qs.env, *args)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    assert (tmp_path / "site" / "index.html").is_file() and list((tmp_path / "export").rglob("*.json*"))


def _edit_predictions(xlsx: Path, edit: Any) -> None:
    """VLMEvalKit's prediction file changed by `edit(rows)` (rows as written: no NA strings), written back."""
    import pandas as pd

    rows = pd.read_excel(xlsx, keep_default_na=False).to_dict("records")
    edit(rows)
    pd.DataFrame(rows).to_excel(xlsx, index=False)


def _samples(folder: Path) -> dict[int, dict[str, Any]]:
    (log,) = folder.glob("*_samples_*.jsonl")
    return {line["doc_id"]: line for line in map(json.loads, log.read_text().splitlines())}


@pytest.mark.slow
def test_an_empty_answer_cell_is_counted_and_noted_and_an_answer_none_is_read_as_written(
    quick_start: QuickStart, tmp_path: Path
) -> None:
    """VLMEvalKit's `--mode eval` over the quick start's MVEI predictions with one answer cell emptied (what a model
    that answered nothing leaves) and one answer "None": the empty one is counted (`n_empty_answers`, in the
    results, VLMEvalKit's summary and the report's notes) and scored as an empty answer; "None" is read as the
    text it is (pandas' defaults read it as NaN, an empty answer, where lmms-eval scores the text); every other
    pair keeps its numbers."""
    root = quick_start.copy(tmp_path)
    xlsx = root / "outputs" / MODEL / f"{MODEL}_{SAMPLE}.xlsx"

    def edit(rows: list[dict]) -> None:
        rows[4]["prediction"], rows[7]["prediction"] = "", "None"  # pair 1's second answer, pair 2's second

    _edit_predictions(xlsx, edit)
    done = quick_start.run(quick_start.vlmeval_line(SAMPLE), "--mode", "eval", cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = quick_start.folder(SAMPLE, root)
    data = _results(folder)
    assert data["emo_tasks_vlmeval"]["n_empty_answers"] == 1, done.stderr[-3000:]
    status = json.loads((root / "outputs" / MODEL / "status.json").read_text())["datasets"][SAMPLE]
    assert status["metrics"]["n_empty_answers"] == 1  # VLMEvalKit's summary
    before, after = _samples(quick_start.folder(SAMPLE)), _samples(folder)
    assert after[1]["filtered_resps"][1] == "" and after[1]["acc_total"]["decisions"][1] == "give_up"
    assert after[2]["filtered_resps"][1] == "None"
    assert {i: line for i, line in after.items() if i not in (1, 2)} == {
        i: line for i, line in before.items() if i not in (1, 2)}  # fmt: skip
    shown = run_emo(quick_start.env, "report", str(folder))
    assert shown.returncode == 0 and "mvei_sample: 1 answer(s) were an empty cell in the prediction file" in (
        shown.stdout), shown.stdout  # fmt: skip


#: reasoning blocks full of decoys (the other verdict, a wrong label, "Score: 5"), put before the answers by turns:
#: `<think>…</think>`, a closing tag alone (a chat template that prefills the opening one), `<analysis>…</analysis>`
REASONED = (
    "<think>At first sight: Incorrect. Answer: disgust. Score: 5</think>\n",
    "A first guess, Score: 5 (Correct?).</think>\n\n",
    "<analysis>Answer: disgust. Incorrect. Score: 5</analysis>\n",
)
REASONING_DATASETS = (SAMPLE, "EmoMultiEmo_sample", "EmoVid_sample_all")


def _sample_logs(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """{task: its sample log's lines} of a run folder (its own logs, not a judged copy's)."""
    return {
        log.name.split("_samples_", 1)[1]: [json.loads(line) for line in log.read_text().splitlines()]
        for log in folder.glob("*_samples_*.jsonl")
    }


@pytest.fixture(scope="module")
def reasoning(quick_start: QuickStart, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The quick start's three VLMEvalKit runs evaluated again (`--mode eval`, in a copy) after every answer in their
    prediction files got a reasoning block before it (`REASONED`, by turns), as a reasoning model's would read:
    once per module, with the judge requests each evaluation sent."""
    root = quick_start.copy(tmp_path_factory.mktemp("reasoning"))
    out: dict[str, Any] = {"root": root}

    def edit(rows: list[dict]) -> None:
        for i, row in enumerate(rows):
            row["prediction"] = REASONED[i % len(REASONED)] + str(row["prediction"])

    for dataset in REASONING_DATASETS:
        _edit_predictions(root / "outputs" / MODEL / f"{MODEL}_{dataset}.xlsx", edit)
        before = len(quick_start.srv.calls)
        done = quick_start.run(quick_start.vlmeval_line(dataset), "--mode", "eval", cwd=root)
        assert done.returncode == 0, done.stderr[-3000:]
        out[dataset] = (quick_start.folder(dataset, root), quick_start.srv.calls[before:], done)
    return out


@pytest.mark.slow
def test_a_reasoning_models_answers_give_the_numbers_of_the_same_answers_without_reasoning(
    quick_start: QuickStart, reasoning: dict[str, Any]
) -> None:
    """docs/lmms_eval.md#reasoning-models: our adapter reads a VLMEvalKit prediction as lmms-eval's default
    `--reasoning_tags` does, so every metric (Avg Token included) is the plain run's, the judge is sent the same
    answers (all from the cache: no request), the sample logs keep the whole answer in `resps`, and `compare`
    accepts the run beside lmms-eval's."""
    for dataset in REASONING_DATASETS:
        folder, calls, done = reasoning[dataset]
        got, plain = _results(folder), _results(quick_start.folder(dataset))
        assert got["results"] == plain["results"], (dataset, done.stderr[-3000:])
        assert [c for c in calls if c.model != MODEL] == [], dataset  # the judge's answers: the plain run's, cached
        assert got["emo_tasks_vlmeval"]["reasoning_tags"] == [["<think>", "</think>"], ["<analysis>", "</analysis>"]]
        logs, plain_logs = _sample_logs(folder), _sample_logs(quick_start.folder(dataset))
        assert logs and sorted(logs) == sorted(plain_logs), dataset
        for task, lines in logs.items():
            raw = [a for line in lines for r in line["resps"] for a in r]
            assert raw and all("</think>" in a or "</analysis>" in a for a in raw), task
            assert [x["filtered_resps"] for x in lines] == [x["filtered_resps"] for x in plain_logs[task]], task
    mvei = reasoning[SAMPLE][0]
    assert run_emo(quick_start.env, "compare", str(quick_start.lmms_dir()), str(mvei)).returncode == 0


def _refused(done: subprocess.CompletedProcess, why: str) -> None:
    """An `emo-tasks` command that refused a folder whose evaluation was refused: exit 2, one line saying why."""
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, (done.returncode, lines)
    assert "was refused, so no results of it are kept" in lines[0] and why in lines[0], lines[0]


@pytest.mark.slow
def test_a_refused_evaluation_leaves_no_number_any_tool_takes_for_the_runs(
    quick_start: QuickStart, tmp_path: Path
) -> None:
    """Issue 32's reproduction: the quick start's full `EmoMVEI_sample` run, then the same command with `--limit
    7` in the same work dir.  Our evaluate refuses (7 rows split a pair's three) and VLMEvalKit exits 0; then
    neither VLMEvalKit's summary nor any `emo-tasks` command shows the earlier number: the results are gone, and
    each command says why (exit 2, one line)."""
    root = quick_start.copy(tmp_path)
    earlier = _results(quick_start.folder(SAMPLE))["results"]["mvei_sample"]["acc_total,none"]
    done = quick_start.run(quick_start.vlmeval_line(SAMPLE), "--limit", "7", cwd=root)
    log = done.stdout + done.stderr
    why = "--limit 7 keeps the first 7 rows (index 0 to 6), which splits the 3 rows"
    assert done.returncode == 0 and why in log, log[-3000:]  # VLMEvalKit exits 0: what it left is the test
    import pandas as pd

    assert len(pd.read_excel(root / "outputs" / MODEL / f"{MODEL}_{SAMPLE}.xlsx")) == 7
    status = json.loads((root / "outputs" / MODEL / "status.json").read_text())["datasets"][SAMPLE]
    assert not status.get("metrics") and not status.get("primary_metric") and why in status["error_message"]
    summary = [ln for ln in log.splitlines() if ln.startswith(f"{SAMPLE} ")]
    assert summary and f"{earlier:.4g}" not in summary[-1], summary  # its summary table: no number for the run
    folder = quick_start.folder(SAMPLE, root)
    assert not list(folder.rglob("*_results.json")) and not list(folder.rglob("*.jsonl"))
    lmms = str(quick_start.lmms_dir())
    for args in (["report", str(folder)], ["report", str(folder), "--format", "json"], ["compare", lmms, str(folder)],
                 ["view", str(folder), "--out", str(tmp_path / "site")],
                 ["export", str(folder), "--format", "mvei-official", "--out", str(tmp_path / "export")],
                 ["judge", str(folder)]):  # fmt: skip
        _refused(run_emo(quick_start.env, *args), why)


@pytest.mark.slow
def test_a_refused_group_evaluation_names_the_group_and_the_files_row_and_index(
    quick_start: QuickStart, tmp_path: Path
) -> None:
    """`--mode eval` over the quick start's `EmoVid_sample_all` predictions with one row in twice (index 2, the
    file's rows 3 and 17): the refusal names the dataset the user ran (not the task the row belongs to), both rows
    and the index; the judged numbers of the earlier evaluation are gone from VLMEvalKit's summary and the folder."""
    root = quick_start.copy(tmp_path)
    xlsx = root / "outputs" / MODEL / f"{MODEL}_EmoVid_sample_all.xlsx"
    _edit_predictions(xlsx, lambda rows: rows.append(dict(rows[2])))
    done = quick_start.run(quick_start.vlmeval_line("EmoVid_sample_all"), "--mode", "eval", cwd=root)
    why = "EmoVid_sample_all: prediction rows 3 and 17 both have index 2"
    assert done.returncode == 0 and why in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
    status = json.loads((root / "outputs" / MODEL / "status.json").read_text())["datasets"]["EmoVid_sample_all"]
    assert not status.get("metrics") and why in status["error_message"]
    folder = quick_start.folder("EmoVid_sample_all", root)
    assert not list(folder.rglob("*_results.json")) and not (folder / "judged").exists()
    _refused(run_emo(quick_start.env, "report", str(folder)), why)


@pytest.mark.slow
def test_the_vlmevalkit_parts_registration_relies_on_are_still_there() -> None:
    """A canary for the pinned packaging (ms-vlmeval 0.0.20): what `emo_tasks.vlmeval.register()` and the dataset
    classes rely on, checked in VLMEvalKit itself, so an upgrade that moves one fails here by name."""
    python = _vlmeval_python()
    probe = r"""
import inspect, json
import vlmeval.dataset as ds, vlmeval.run as run
from vlmeval.dataset.video_base import VideoBaseDataset
from vlmeval.dataset.image_base import ImageBaseDataset
from vlmeval.dataset.video_dataset_config import supported_video_datasets
from vlmeval.smp.file import INFER_FAIL_MSG
import vlmeval.api.lmdeploy as lmdeploy, vlmeval.inference_video as inference_video
from vlmeval.smp import status_report
from emo_tasks.vlmeval.images import INFER_FAIL
checks = {
    "DATASET_CLASSES is a list build_dataset walks": isinstance(ds.DATASET_CLASSES, list)
        and "DATASET_CLASSES" in inspect.getsource(ds.build_dataset),
    "SUPPORTED_DATASETS is a list": isinstance(ds.SUPPORTED_DATASETS, list),
    "run.py uses the same build_dataset and supported_video_datasets": run.build_dataset is ds.build_dataset
        and run.supported_video_datasets is supported_video_datasets,
    "our names registered by the start-up hook": {"EmoMVEI_sample", "EmoMultiEmo_sample", "EmoVid_sample_ER_Lab"}
        <= set(ds.SUPPORTED_DATASETS) and "EmoVid_sample_IR" in supported_video_datasets,
    "build_dataset builds ours": type(ds.build_dataset("EmoVid_sample_ER_Lab")).__name__ == "EmoVid"
        and type(ds.build_dataset("EmoMVEI_sample")).__name__ == "EmoMVEI",
    "VideoBaseDataset asks prepare_dataset and build_prompt(.., video_llm=)":
        {"prepare_dataset", "build_prompt", "evaluate"} <= VideoBaseDataset.__abstractmethods__
        and "video_llm=getattr(model, 'VIDEO_LLM', False)" in inspect.getsource(inference_video),
    "ImageBaseDataset.load_data(dataset)": "dataset" in inspect.signature(ImageBaseDataset.load_data).parameters,
    "the failure marker": INFER_FAIL == INFER_FAIL_MSG,
    "the --base-url model's temperature": "'temperature': 0.0" in inspect.getsource(lmdeploy)
        and issubclass(run.LMDeployAPI, lmdeploy.LMDeployWrapper),
    "run.py's --max-tokens default": "default=2 ** 15" in inspect.getsource(run.parse_args),
    "judge_kwargs keys": all(k in inspect.getsource(run.get_judge_kwargs)
                             for k in ("'nproc'", "'retry'", "'timeout'", "'api_base'", "'key'", "'model'")),
    "status.json keeps argv": "argv=sys.argv" in inspect.getsource(run),
    "build_dataset hands our classes the run's arguments": "dataset_kwargs = vars(args)" in inspect.getsource(run)
        and ds.build_dataset("EmoMVEI_sample", work_dir="w", limit=6, data=["x"]).run_args["limit"] == 6
        and ds.build_dataset("EmoVid_sample_ER_Lab", work_dir="w", limit=6, data=["x"]).run_args["limit"] == 6,
    "the run summary's metrics, cleared by upsert_dataset_status(metrics_source=None)":
        "metrics_source" in inspect.signature(status_report.upsert_dataset_status).parameters
        and "elif metrics_source is None:" in inspect.getsource(status_report.upsert_dataset_status)
        and callable(status_report.load_run_status),
}
print(json.dumps({k: bool(v) for k, v in checks.items()}))
"""
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    checks = json.loads(done.stdout.strip().splitlines()[-1])
    assert [k for k, ok in checks.items() if not ok] == [] and len(checks) == 14


_EVALSCOPE_RUN = r"""
import glob, json, os, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
from fakes import Model
from judges.testing import LoopbackServer
from evalscope import TaskConfig, run_task

key, work, limit = os.environ["OPENAI_API_KEY"], sys.argv[2], json.loads(sys.argv[3])
with LoopbackServer(responder=Model(), expected_api_key=key) as srv:
    os.environ["OPENAI_BASE_URL"] = srv.base_url  # MME-Emotion's judge
    model = {"name": "CustomAPIModel", "type": "eval-model", "api_base": f"{srv.base_url}/chat/completions",
             "key": key, "temperature": 0.0, "img_size": -1, "max_tokens": 1024}
    config = {"data": sys.argv[4:], "model": [model], "mode": "all", "reuse": False, "nproc": 4, **limit}
    run_task(task_cfg=TaskConfig(eval_backend="VLMEvalKit", eval_config=config, work_dir=work))
"""


def _evalscope_python() -> str:
    python = _vlmeval_python()
    probe = subprocess.run([python, "-c", "import evalscope"], capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        pytest.skip(f'EvalScope is not installed for {python}: `pip install -e ".[vlmeval,evalscope]"`')
    return python


@pytest.mark.slow
def test_evalscope_runs_our_datasets_through_its_vlmevalkit_backend(tmp_path: Path) -> None:
    """EvalScope's documented Python API (`run_task(TaskConfig(eval_backend="VLMEvalKit", ...))`, its own model
    class) on MVEI, MME-Emotion and EmoBench-M (one scenario): the run folders are written; the answers EvalScope
    collected, scored by our lmms-eval path, give its numbers; its `limit` reaches our datasets (they read the run's
    arguments)."""
    sys.path.insert(0, str(Path(__file__).parent.parent))
    from conftest import env_without_secrets, with_mme_sample

    python = _evalscope_python()
    key = "sk-vlm-0000000000000000"
    env = {
        **env_without_secrets(),
        "OPENAI_API_KEY": key,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "EMO_CACHE_DIR": str(with_mme_sample(tmp_path / "cache")),
        "EMO_PROGRESS": "0",
    }
    for work, limit, data in ((tmp_path / "es", {}, [SAMPLE, "EmoVid_sample_ER_Lab", "EmoBenchM_sample_MELD"]),
                              (tmp_path / "es_limit", {"limit": 6}, [SAMPLE])):  # fmt: skip
        done = subprocess.run([python, "-c", _EVALSCOPE_RUN, str(ROOT), str(work), json.dumps(limit), *data],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    import pandas as pd

    (ours,) = glob.glob(str(tmp_path / "es" / "*" / "eval-model" / "emo_tasks" / SAMPLE / "*_results.json"))
    (xlsx,) = glob.glob(str(tmp_path / "es" / "*" / "eval-model" / f"eval-model_{SAMPLE}.xlsx"))
    metrics, _, _ = mvei_vlmeval.score_predictions(SAMPLE, pd.read_excel(xlsx).to_dict("records"))
    got = json.loads(Path(ours).read_text())["results"]["mvei_sample"]
    assert {f"{k},none": v for k, v in metrics.items()} == {k: v for k, v in got.items() if k != "alias"}
    (judged,) = glob.glob(str(tmp_path / "es" / "*" / "eval-model" / "emo_tasks" / "EmoVid_sample_ER_Lab" / "judged"
                              / "*" / "*_results.json"))  # fmt: skip
    assert json.loads(Path(judged).read_text())["results"]["mme_emotion_sample_er_lab"]["n_scored,none"] == 2
    from emo_tasks.emobench_m import vlmeval as ebm_vlmeval
    from emo_tasks.vlmeval.images import read_predictions

    run = tmp_path / "es" / "*" / "eval-model"
    (meld,) = glob.glob(str(run / "emo_tasks" / "EmoBenchM_sample_MELD" / "*_results.json"))
    (xlsx,) = glob.glob(str(run / "eval-model_EmoBenchM_sample_MELD.xlsx"))
    rows = read_predictions(xlsx)
    scored = ebm_vlmeval.score_predictions("EmoBenchM_sample_MELD", rows, {**env, "EMO_JUDGE": "offline"})
    got = json.loads(Path(meld).read_text())["results"]["emobench_m_sample_meld"]
    assert {f"{k},none": v for k, v in ebm_vlmeval.plain(scored.tasks["emobench_m_sample_meld"]).items()} == {
        k: v for k, v in got.items() if k != "alias"} and got["n_scored,none"] == 2  # fmt: skip
    (limited,) = glob.glob(str(tmp_path / "es_limit" / "*" / "eval-model" / "emo_tasks" / SAMPLE / "*_results.json"))
    data = json.loads(Path(limited).read_text())
    assert data["n-samples"]["mvei_sample"] == {"original": 16, "effective": 2}
    assert data["emo_tasks_vlmeval"]["limit"] == 2 and key not in Path(limited).read_text()


def test_a_gate_subset_keeps_its_rows_and_is_recorded_for_the_judge_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EMO_SUBSET under VLMEvalKit: the dataset's rows are the subset's, its run folder records the subset as an
    lmms-eval run does, and the judge stage (run without EMO_SUBSET) re-applies it and scores every kept pair."""
    from emo_tasks import subset
    from emo_tasks.judging.stage import judge_run
    from emo_tasks.vlmeval.runfolder import prompt_config

    keep = ["sample-03", "sample-10", "sample-12"]
    sub = tmp_path / "subset.json"
    sub.write_text(json.dumps({"emo_tasks_subset": 1, "name": "g", "rows": {"mvei/sample": keep}}))
    monkeypatch.setenv("EMO_SUBSET", str(sub))
    rows = mvei_vlmeval.prediction_rows(SAMPLE)
    assert sorted({r["target"] for r in rows}) == sorted(hooks.doc_to_target(d) for d in hooks.load_task(
        "mvei/sample", environ()))  # fmt: skip
    assert len(rows) == 3 * len(keep)
    preds = [{**row, "prediction": "Correct"} for row in rows]
    metrics, lines, host = mvei_vlmeval.score_predictions(SAMPLE, preds)
    config = {"dataset_name": "mvei/sample", **prompt_config("mvei_sample")}
    assert subset.recorded(config)["keys"] == keep
    write_run(tmp_path / "run", "mvei_sample", metrics, lines, config, "m", host, n_original=host["n_docs"])
    monkeypatch.delenv("EMO_SUBSET")
    assert judge_run(tmp_path / "run", env={**environ(), "EMO_JUDGE": "offline"}, out=tmp_path / "judged") == 0
    judged = reader.load_run(tmp_path / "judged")
    assert judged.results["mvei_sample"]["n_pairs,none"] == len(keep) and judged.subset("mvei_sample")["n"] == 3
