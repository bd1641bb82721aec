"""MultiEmo-Bench as the judge stage (`emo-tasks judge RUN_DIR`) uses it: `load_task` gives process_docs' rows,
`doc_to_target` pins each row (portable, changed by a changed vote), re-scoring a sample log gives exactly the
in-process metrics, and the optional LLM-as-a-judge second stage over one run's answers (`--multiemo-judge`) and
its dry run, against a real loopback server."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import API_KEY
from PIL import Image
from test_mvei_in_judge_stage import logged_sample, placeholder, rescore, sample_log

from emo_tasks.common import DataError, LastResult
from emo_tasks.judging.tokens import count_tokens
from emo_tasks.multiemo import hooks, scoring
from emo_tasks.multiemo import judge as multiemo_judge
from emo_tasks.multiemo.data import EMOTIONS, load_images
from emo_tasks.multiemo.sample import sample_file
from emo_tasks.multiemo.settings import MultiEmoSettings
from emo_tasks.settings import environ
from judges import reset_engine
from judges.batch_files import request_line
from judges.engine import get_engine
from judges.media import image_tokens
from judges.testing import LoopbackServer, Reply, count_media, last_user_text

JUDGE_MODEL = "loopback-judge-7b"
CANDIDATE = re.compile(r"Candidate (\d+): score ([0-9.]+)\.")
UNPARSED = {("tie_two", "awe"), ("all_none", "fear")}


def answer(i: int, j: int, image_id: str, emotion: str) -> str:
    """A hand-written model answer: several accepted forms, two without a score."""
    if (image_id, emotion) in UNPARSED:
        return "I would rather not say."
    score = (i * 37 + j * 11) % 101
    if j % 3 == 0:
        return json.dumps({"score": score, "reason": f"{emotion} in the light"})
    if j % 3 == 1:
        return f"I'd say {score}/100. Reason: the scene, 3 people."
    return f"Score: {score}. Reason: calm colours."


# ------------------------------------------------------------------------------------------------ load_task
def test_load_task_gives_process_docs_rows_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMO_CACHE_DIR", str(tmp_path / "cache"))
    docs = hooks.load_task("multiemo/sample", environ())
    rows = list(hooks.process_docs(placeholder("multiemo/sample")))
    assert rows == docs and len(docs) == 8 * len(load_images(sample_file(tmp_path / "cache")))
    assert [d["emotion"] for d in docs[:8]] == list(EMOTIONS)
    assert [hooks.doc_to_target(r) for r in rows] == [hooks.doc_to_target(d) for d in docs]
    loaded = hooks.loaded("sample")
    assert loaded is not None and loaded.settings == MultiEmoSettings.from_env(environ(), "sample")
    assert set(loaded.images) == {d["image_id"] for d in docs}  # evaluate's votes come from load_task too
    with pytest.raises(DataError, match="multiemo/benchmark or multiemo/sample"):
        hooks.load_task("mvei/sample", environ())


def test_hooks_expose_the_stage_api() -> None:
    from emo_tasks.multiemo import utils

    for name in ("load_task", "doc_to_text", "doc_to_target", "process_results", "evaluate", "judge_run_predictions"):
        assert callable(getattr(hooks, name))
    assert utils.doc_to_target is hooks.doc_to_target
    # the main task sends nothing: a dry run of the stage must not list a MultiEmo agent unless asked
    assert not hasattr(hooks, "plan") and callable(hooks.judge_plan)


# ------------------------------------------------------------------------------------------------ targets
def copy_sample(cache: Path, to: Path, edit: Any = None) -> Path:
    """The bundled sample's data file and images copied to `to`, each row passed through `edit`."""
    src = sample_file(cache)
    shutil.copytree(src.parent, to)
    if edit is not None:
        rows = [json.loads(line) for line in (to / src.name).read_text().splitlines() if line.strip()]
        (to / src.name).write_text("".join(json.dumps(edit(r)) + "\n" for r in rows))
    return to / src.name


def targets(path: Path) -> list[str]:
    return [hooks.doc_to_target(d) for d in hooks.load_task("multiemo/benchmark", {"EMO_MULTIEMO_FILE": str(path)})]


def test_targets_are_the_same_for_copies_of_the_data(tmp_path: Path) -> None:
    one = [hooks.doc_to_target(d) for d in hooks.load_task("multiemo/sample", {"EMO_CACHE_DIR": str(tmp_path / "a")})]
    two = [hooks.doc_to_target(d) for d in hooks.load_task("multiemo/sample", {"EMO_CACHE_DIR": str(tmp_path / "b")})]
    assert one == two and len(set(one)) == len(one)
    assert one[0].startswith("amusement #") and one[2].startswith("awe #")
    a = targets(copy_sample(tmp_path / "a", tmp_path / "gpu"))
    b = targets(copy_sample(tmp_path / "a", tmp_path / "laptop" / "copy"))
    assert a == b and a != one  # the sample and the benchmark source are different rows
    docs = hooks.load_task("multiemo/benchmark", {"EMO_MULTIEMO_FILE": str(tmp_path / "gpu" / "multiemo.jsonl")})
    assert docs[0]["image_name"] == "images/clear_awe.png"  # never a machine's path


def _moved_vote(row: dict[str, Any]) -> dict[str, Any]:
    if row["id"] != "tie_two":
        return row
    votes = dict(row["votes"], amusement=row["votes"]["amusement"] - 1, anger=row["votes"]["anger"] + 1)
    annotators = [list(a) for a in row["annotators"]]
    k = next(i for i, a in enumerate(annotators) if "amusement" in a and "anger" not in a)
    annotators[k] = [("anger" if e == "amusement" else e) for e in annotators[k]]
    return {**row, "votes": votes, "annotators": annotators}


@pytest.mark.parametrize(
    "edit",
    [
        _moved_vote,  # one annotator's vote moved from amusement to anger
        lambda r: {**r, "original_label": "excitement"} if r["id"] == "tie_two" else r,
        lambda r: {**r, "source": "FI"} if r["id"] == "tie_two" else r,
        lambda r: (
            {**r, "votes": {**r["votes"], "none": r["votes"]["none"] + 1}, "annotators": None}
            if r["id"] == "tie_two"
            else r
        ),
    ],
)
def test_a_changed_row_changes_its_targets(tmp_path: Path, edit: Any) -> None:
    before = targets(copy_sample(tmp_path / "cache", tmp_path / "a"))
    after = targets(copy_sample(tmp_path / "cache", tmp_path / "b", edit))
    changed = [i for i, (x, y) in enumerate(zip(before, after, strict=True)) if x != y]
    assert changed == list(range(8, 16))  # the 8 docs of the second image, and only those


def test_another_image_name_or_count_changes_the_target(tmp_path: Path) -> None:
    doc = hooks.load_task("multiemo/sample", {"EMO_CACHE_DIR": str(tmp_path)})[0]
    for change in ({"image_name": "images/x.png"}, {"n_annotators": 21}, {"image_id": "x"}, {"emotion": "anger"}):
        assert hooks.doc_to_target({**doc, **change}) != hooks.doc_to_target(doc), change
    assert hooks.doc_to_target({**doc, "image_path": "/elsewhere/x.png"}) == hooks.doc_to_target(doc)


# ------------------------------------------------------------------------------------------------ re-scoring
def test_stage_rescoring_gives_exactly_the_in_process_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMO_CACHE_DIR", str(tmp_path / "cache"))
    kwargs = {"pre_prompt": "Look closely. "}
    rows = list(hooks.process_docs(placeholder("multiemo/sample")))
    ids = list(dict.fromkeys(r["image_id"] for r in rows))
    in_process, logged = [], []
    for doc_id, doc in enumerate(rows):
        text = answer(ids.index(doc["image_id"]), EMOTIONS.index(doc["emotion"]), doc["image_id"], doc["emotion"])
        metrics = hooks.process_results(doc, [text])
        in_process.append(metrics["precision_ours"])
        logged.append(
            logged_sample(doc_id, doc, hooks.doc_to_target(doc), hooks.doc_to_text(doc, kwargs), text, metrics)
        )
    want = hooks.evaluate(in_process, None)

    lines = sample_log(tmp_path, "multiemo_sample", logged)
    assert isinstance(lines[0]["filtered_resps"], str)  # one answer per doc, unwrapped
    monkeypatch.setattr(hooks.STATE, "memo", LastResult())
    out = tmp_path / "judged"
    args = SimpleNamespace(output_path=str(out), log_samples=True)
    records, got = rescore(hooks, "precision_ours", "multiemo/sample", environ(), lines, kwargs, args)
    assert records == in_process
    assert json.dumps(got) == json.dumps(want) and got == want
    assert got["n_parse_failed"] == len(UNPARSED) and got["n_images_incomplete"] == 2 and got["n_images"] == len(ids)
    assert got["precision_ours"] is not None and got["srcc"] is not None
    assert len(list((out / "emo_tasks_judge").glob("sample_multiemo_*_predictions.jsonl"))) == 1


# ------------------------------------------------------------------------------------------------ --multiemo-judge
def judged_score(candidate: float) -> float:
    return min(100.0, candidate + 7)


class Judge:
    """Answers each item with its one candidate's score + 7 (capped); keeps every request body."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any], attempt: int) -> Reply:
        self.bodies.append(body)
        (shown,) = CANDIDATE.findall(last_user_text(body))
        final = judged_score(float(shown[1]))
        return Reply(
            text=f"Candidate 1 - why it could be correct: fits. Why it could be wrong: vague.\n\n"
            f"Conclusion: a little higher than the candidate.\nFinal score: {final:g}"
        )


def run_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, srv: LoopbackServer) -> list[dict[str, Any]]:
    """The environment of a stage run against `srv`, the sample loaded, and one model's records."""
    for name, value in {
        "OPENAI_BASE_URL": srv.base_url,
        "OPENAI_API_KEY": API_KEY,
        "EMO_JUDGE_MODEL": JUDGE_MODEL,
        "EMO_CACHE_DIR": str(tmp_path / "cache"),
        "EMO_JUDGE_BACKOFF_BASE": "0.01",
        "EMO_JUDGE_BACKOFF_MAX": "0.05",
    }.items():
        monkeypatch.setenv(name, value)
    reset_engine()
    docs = hooks.load_task("multiemo/sample", environ())
    ids = list(dict.fromkeys(d["image_id"] for d in docs))
    return [
        hooks.process_results(
            d, [answer(ids.index(d["image_id"]), EMOTIONS.index(d["emotion"]), d["image_id"], d["emotion"])]
        )["precision_ours"]
        for d in docs
    ]


def expected_judged(records: list[dict[str, Any]], images: list[dict[str, Any]]) -> dict[str, Any]:
    by_key = {(r["image_id"], r["emotion"]): r for r in records}
    results = []
    for img in images:
        scores = []
        for emotion in EMOTIONS:
            r = by_key[(img["image_id"], emotion)]
            scores.append(None if r["parse_status"] != "parsed" else judged_score(r["predicted_score"]))
        results.append(
            scoring.ImageResult(
                image_id=img["image_id"],
                votes=tuple(img["votes"]),
                n_annotators=img["n_annotators"],
                original_label=img["original_label"],
                scores=tuple(scores),
                n_parse_failed=sum(s is None for s in scores),
            )
        )
    return scoring.task_metrics(results)


def test_judge_run_predictions_and_its_dry_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    judge = Judge()
    with LoopbackServer(responder=judge, expected_api_key=API_KEY) as srv:
        records = run_records(tmp_path, monkeypatch, srv)
        settings = MultiEmoSettings.from_env(environ(), "sample")
        images = load_images(sample_file(tmp_path / "cache"))
        n_items = len(records) - len(UNPARSED)

        # the dry run sends nothing, and counts what would be sent
        (before,) = multiemo_judge.plan(records, settings, get_engine(settings.engine))
        assert srv.calls == []
        assert before == {
            "agent": "multiemo_judge",
            "model": JUDGE_MODEL,
            "requests": n_items,
            "unique_requests": n_items,
            "cached": 0,
            "to_send": n_items,
            "estimated": 0,
            "input_tokens": before["input_tokens"],
            "max_tokens": None,  # the judge's requests set no max_tokens: unbounded
            "output_tokens_max": None,
            "output_tokens_cached": 0,
            "output_tokens_typical": multiemo_judge.TYPICAL_OUTPUT_TOKENS,  # the dry run's estimate
        }
        # --dry-run --batch: the same, plus each request's batch line, all in round 1 (issue 35)
        (lined,) = multiemo_judge.plan(records, settings, get_engine(settings.engine), lines=True)
        lines = lined.pop("batch_lines")
        assert lined == before and srv.calls == []
        assert len(lines) == n_items
        assert {(x.round, x.model, x.agent) for x in lines} == {(1, JUDGE_MODEL, multiemo_judge.AGENT)}

        out = tmp_path / "judged"
        got = hooks.judge_run_predictions(records, settings, out)
        assert len(srv.calls) == n_items and all(c.auth_ok for c in srv.calls)
        for body in judge.bodies:
            assert count_media(body) == (1, 0) and body["model"] == JUDGE_MODEL
            assert len(CANDIDATE.findall(last_user_text(body))) == 1  # the one model is the only candidate
        want = expected_judged(records, images)
        assert json.dumps(got) == json.dumps(want) and set(scoring.TABLE.names) <= got.keys()
        assert got["n_parse_failed"] == len(UNPARSED) and got["n_images_incomplete"] == 2

        # each line's planned size is the size of the line of the body the server got (a 64-hex custom_id each)
        got_sizes = sorted(len(request_line(x.key, body)) for x, body in zip(lines, judge.bodies, strict=True))
        assert sorted(x.nbytes for x in lines) == got_sizes and all(len(x.key) == 64 for x in lines)

        # the dry run's input tokens: the texts sent (o200k) plus one 96x72 image (one 512-px tile) per request
        texts = [last_user_text(b) for b in judge.bodies]
        assert before["input_tokens"] == sum(count_tokens(texts)) + n_items * image_tokens(96, 72, None)

        (folder,) = [out / "emo_tasks_judge"]
        (rows_file,) = folder.glob("sample_multiemo_*_judged_predictions.jsonl")
        (summary_file,) = folder.glob("sample_multiemo_*_judged_summary.json")
        reread = multiemo_judge.load_predictions(rows_file)  # the judged rows can be re-scored or judged again
        assert len(reread) == n_items and reread.n_unparsed == len(UNPARSED)
        summary = json.loads(summary_file.read_text())
        assert summary["n_items"] == n_items and summary["judge_model"] == JUDGE_MODEL
        assert summary["n_no_candidates"] == len(UNPARSED) and summary["n_judge_failed"] == 0
        assert summary["judged_metrics"]["precision_ours"] == got["precision_ours"]

        # everything is cached now (in the emo-tasks cache folder): the dry run says so, a rerun sends nothing
        srv.reset_log()
        (after,) = multiemo_judge.plan(records, settings, get_engine(settings.engine))
        assert (after["cached"], after["to_send"], after["input_tokens"]) == (n_items, 0, 0)
        assert after["output_tokens_cached"] == summary["batch"]["completion_tokens"] > 0
        reset_engine()
        assert hooks.judge_run_predictions(records, None, tmp_path / "again") == got  # None: load_task's settings
        assert srv.calls == []
        assert any((tmp_path / "cache").iterdir())


def test_judge_run_predictions_refuses_mismatched_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMO_CACHE_DIR", str(tmp_path / "cache"))
    docs = hooks.load_task("multiemo/sample", environ())
    records = [hooks.process_results(d, ["Score: 50"])["precision_ours"] for d in docs[:8]]
    bench = MultiEmoSettings.from_env({"EMO_MULTIEMO_FILE": str(sample_file(tmp_path / "cache"))}, "benchmark")
    with pytest.raises(ValueError, match="records are from the sample data"):
        multiemo_judge.plan(records, bench)
    stranger = [{**r, "image_id": "not_in_data"} for r in records]
    with pytest.raises(DataError, match="not_in_data"):
        multiemo_judge.plan(stranger, None)


@pytest.mark.parametrize("size", [(96, 72), (1024, 1024), (3000, 1000), (1000, 3000), (1500, 1001), (7, 2000)])
def test_sent_size_is_what_the_engine_sends(tmp_path: Path, size: tuple[int, int]) -> None:
    from judges import ImagePart

    path = tmp_path / "x.png"
    Image.new("RGB", size).save(path)
    part = ImagePart(path, max_side=multiemo_judge.IMAGE_MAX_SIDE)
    with Image.open(io.BytesIO(part.jpeg_bytes())) as sent:  # the JPEG the engine would send
        assert multiemo_judge._sent_size(part) == sent.size
