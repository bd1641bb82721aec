"""`emo-tasks judge RUN --dry-run` gives a cost before the first call (issue 19, item 6).

Why: the dry run is the moment a user decides whether to spend money, and that is usually before anything is
cached.  So every row needs a cost (output tokens estimated from the agent's typical answer length when neither a
max_tokens bound nor cached usage says better, and marked as such), prices must be real numbers, and counting
must work with no endpoint configured (it sends nothing).  The slow tests go through the real CLI over one real
`--predict_only --log_samples` lmms-eval run of `mme_emotion_sample` (`--model dummy`).
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import API_KEY, cli_env, run_emo, with_mme_sample
from fakes import Judge
from shared_runs import dummy_mme_predicted_run

from emo_tasks.judging.dryrun import STAND_IN_BASE_URL, dry_run_env
from emo_tasks.mme_emotion.dry_run import AUDIO_ANSWER_TOKENS, JUDGE_ANSWER_TOKENS, STEP_ANSWER_TOKENS
from judges.config import JudgeConfigError
from judges.testing import LoopbackServer, Reply, last_user_text

PRICES = {"gpt-4.1-2025-04-14": (2.0, 8.0), "gpt-4o-2024-11-20": (2.5, 10.0)}  # the paper's step and judge models
PRICE_FLAGS = [arg for model, (i, o) in PRICES.items() for arg in ("--price", f"{model}={i:g}/{o:g}")]
TYPICAL = {"step": STEP_ANSWER_TOKENS, "judge": JUDGE_ANSWER_TOKENS}
SHARED_CLUES = Path(__file__).resolve().parents[3] / "shared" / "data" / "mme_emotion"


def _base_env(cache: Path, srv: LoopbackServer | None = None) -> dict[str, str]:
    return cli_env(with_mme_sample(cache), srv)


def emo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return run_emo(env, *args, timeout=600)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `--predict_only --log_samples` run of the MME-Emotion sample: answers saved, nothing judged.  The
    session's shared run (tests/shared_runs.py, also test_fingerprint_stage's), read only: every judge here --out."""
    out = dummy_mme_predicted_run(tmp_path_factory) / "run"
    assert sorted(out.rglob("*_samples_mme_emotion_sample_*.jsonl"))
    return out


def dry_table(text: str) -> tuple[list[dict[str, str]], list[str]]:
    """The dry run's rows ({column: cell}, cut at the header's column offsets) and the lines after the table."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("task "))
    header = lines[at]
    names = re.findall(r"\S+(?: \S+)*", header)  # columns are 2+ spaces apart; a name may hold one space
    starts = [header.index(name) for name in names]
    rows, footer = [], []
    for line in lines[at + 1 :]:
        if footer or not re.match(r"\S+\s+\S+\s+\S+\s+\d+\s", line):
            footer.append(line)
            continue
        cuts = [*starts[1:], None]
        rows.append({n: line[s:e].strip() for n, s, e in zip(names, starts, cuts, strict=True)})
    assert rows, text
    return rows, footer


def _cost(cell: str) -> float:
    m = re.fullmatch(r"(\d+\.\d{4})( \(est\.\))?", cell)
    assert m, f"not a numeric cost: {cell!r}"
    return float(m.group(1))


def _total(footer: list[str]) -> float:
    line = next((x for x in footer if x.startswith("Total:")), None)
    assert line is not None, footer
    m = re.match(r"Total: (\d+\.\d{4}) USD", line)
    assert m, line
    return float(m.group(1))


def _check_costs(rows: list[dict[str, str]], footer: list[str]) -> None:
    """Every row has a numeric cost equal to its tokens at the given prices, and the Total is their sum."""
    for r in rows:
        price_in, price_out = PRICES[r["model"]]
        out_tok = float(re.sub(r"[^\d.]", "", r["output tok"].replace("(est.)", "")) or 0)
        expected = int(r["input tok"]) * price_in / 1e6 + out_tok * price_out / 1e6
        assert _cost(r["cost USD"]) == pytest.approx(expected, abs=6e-5), r
    assert _total(footer) == pytest.approx(sum(_cost(r["cost USD"]) for r in rows), abs=1e-4 * len(rows))


@pytest.mark.slow
def test_nothing_cached_every_row_gets_an_estimated_cost_and_a_total(run_dir: Path, tmp_path: Path) -> None:
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        proc = emo(_base_env(tmp_path / "cache", srv), "judge", str(run_dir), "--dry-run", *PRICE_FLAGS)
        assert srv.calls == [], "a dry run sends nothing"
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows, footer = dry_table(proc.stdout)
    assert {r["agent"] for r in rows} == {"step", "judge"} and all(r["cached"] == "0" for r in rows)
    sending = [r for r in rows if int(r["to send"])]
    assert sending
    for r in sending:  # nothing cached, no bound: the typical answer length per request, marked as an estimate
        assert r["output tok"] == f"~{int(r['to send']) * TYPICAL[r['agent']]} (est.)", r
        assert r["cost USD"].endswith("(est.)"), r
    _check_costs(rows, footer)
    assert any(line.startswith("Estimated rows") and "every row with requests to send" in line for line in footer)
    assert any(line.startswith("Total:") and "estimate" in line for line in footer), footer


class _Usage(Judge):
    """The fake step agent and judge, reporting a fixed, recognisable completion usage per agent."""

    def __call__(self, body: dict, attempt: int) -> Reply:
        reply = super().__call__(body, attempt)
        tokens = 77 if last_user_text(body).startswith("Given the following answer") else 33
        return dataclasses.replace(reply, completion_tokens=tokens)


@pytest.mark.slow
def test_cached_usage_is_preferred_over_the_typical_length(run_dir: Path, tmp_path: Path) -> None:
    """After one task is judged, the other tasks' rows take the mean real usage of the agent's cached answers
    (not the typical length, not `?`), unmarked; the judged task sends nothing."""
    with LoopbackServer(responder=_Usage(), expected_api_key=API_KEY) as srv:
        env = _base_env(tmp_path / "cache", srv)
        real = emo(env, "judge", str(run_dir), "--tasks", "mme_emotion_sample_er_lab", "--out", str(tmp_path / "j"))
        assert real.returncode == 0, real.stderr[-3000:]
        srv.reset_log()
        proc = emo(env, "judge", str(run_dir), "--dry-run", *PRICE_FLAGS)
        assert srv.calls == []
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows, footer = dry_table(proc.stdout)
    per_request = {"step": 77, "judge": 33}
    for r in rows:
        n = int(r["to send"])
        if r["task"] == "mme_emotion_sample_er_lab":
            assert n == 0 and r["output tok"] == "0", r
        elif n:
            assert r["output tok"] == f"~{n * per_request[r['agent']]}", r
            assert "(est.)" not in r["cost USD"], r
    assert any(int(r["to send"]) for r in rows if r["task"] != "mme_emotion_sample_er_lab")
    assert not any(line.startswith("Estimated rows") for line in footer), footer
    _check_costs(rows, footer)


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["gpt-4o-2024-11-20=nan/1", "gpt-4o-2024-11-20=inf/1", "gpt-4o-2024-11-20=1/inf",
                                  "gpt-4o-2024-11-20=-1/2", "gpt-4o-2024-11-20=2/-8"])  # fmt: skip
def test_a_price_must_be_finite_and_non_negative(run_dir: Path, tmp_path: Path, spec: str) -> None:
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        proc = emo(_base_env(tmp_path / "cache", srv), "judge", str(run_dir), "--dry-run", "--price", spec)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and spec in lines[0] and "finite" in lines[0], proc.stderr
    assert proc.stdout == ""


@pytest.mark.slow
def test_dry_run_needs_no_endpoint(run_dir: Path, tmp_path: Path) -> None:
    """No OPENAI_*/AZURE_*/EMO_* variable but EMO_CACHE_DIR: the dry run still counts and prices every row."""
    env = {k: v for k, v in _base_env(tmp_path / "cache").items()
           if not k.startswith(("OPENAI_", "AZURE_", "EMO_")) and k not in ("API_TYPE", "API_VERSION")}  # fmt: skip
    env["EMO_CACHE_DIR"] = str(tmp_path / "cache")
    proc = emo(env, "judge", str(run_dir), "--dry-run", *PRICE_FLAGS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows, footer = dry_table(proc.stdout)
    assert {r["model"] for r in rows} == set(PRICES) and any(int(r["to send"]) for r in rows)
    _check_costs(rows, footer)
    assert "no judge endpoint is configured" in proc.stderr


def test_dry_run_env_stands_in_only_for_a_missing_endpoint() -> None:
    configured = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "EMO_JUDGE": "api"}
    assert dry_run_env(configured, io.StringIO()) == configured
    note = io.StringIO()
    env = dry_run_env({"EMO_JUDGE": "api"}, note)
    assert env == {"EMO_JUDGE": "api", "API_TYPE": "openai", "OPENAI_BASE_URL": STAND_IN_BASE_URL}
    assert ".invalid/" in STAND_IN_BASE_URL and "no judge endpoint" in note.getvalue()
    with pytest.raises(JudgeConfigError, match="EMO_JUDGE_TIMEOUT"):  # a malformed value is still an error
        dry_run_env({"EMO_JUDGE_TIMEOUT": "soon"}, io.StringIO())


def test_typical_answer_lengths_follow_the_protocol() -> None:
    """The documented derivations: the step agent's worked five-step example and the judge's output format at
    five steps (protocol.yml); the live audio agent's, the released Qwen2-Audio clues (when they are here)."""
    from emo_tasks.judging.tokens import count_tokens
    from emo_tasks.mme_emotion.protocol import protocol

    example = re.search(r"result: (<step>Step 1: Observe.*?</step>)", protocol()["step_template"], re.S)
    assert example is not None
    assert count_tokens([example.group(1).format(example_final="emotion")]) == [STEP_ANSWER_TOKENS]
    score = "<score>" + ", ".join(f"Step {i}: 1/1" for i in range(1, 6)) + "</score>"
    assert count_tokens([score]) == [JUDGE_ANSWER_TOKENS]
    files = sorted(SHARED_CLUES.glob("*/audio_clue/*_qwen2_audio_clues.json"))
    if files:
        clues = [row["audio_clue"] for f in files for row in json.loads(f.read_text(encoding="utf-8"))]
        assert round(sum(count_tokens(clues)) / len(clues)) == AUDIO_ANSWER_TOKENS


# ------------------------------------------------------------------------------------------ --dry-run --batch
# issue 35, item 3: the batch rate next to the cost sent one by one, and the rounds, files and bytes of a batch
# judging (MME-Emotion: step agent, then judge; the judge prompt holds the step agent's answer).
MB = 1_000_000  # as --batch-max-mb counts (judges.batch_files.BYTES_PER_MB)


def batch_table(footer: list[str]) -> dict[int, dict[str, str]]:
    """The batch section's rows by round ({column: cell}), from the lines after the cost table."""
    at = next(i for i, line in enumerate(footer) if line.startswith("round "))
    header = footer[at]
    names = re.findall(r"\S+(?: \S+)*", header)
    starts = [header.index(name) for name in names]
    rows = {}
    for line in footer[at + 1 :]:
        if not line[:1].isdigit():
            break
        cells = {n: line[s:e].strip() for n, s, e in zip(names, starts, [*starts[1:], None], strict=True)}
        rows[int(cells["round"])] = cells
    return rows


def _largest(cell: str) -> tuple[int, int]:
    """(requests, bytes) of a "largest file" cell."""
    m = re.match(r"(\d+) req, (\d+) B \(\d+\.\d{3} MB\)", cell)
    assert m, cell
    return int(m.group(1)), int(m.group(2))


def _bytes(cell: str) -> int:
    m = re.match(r"(\d+) B \(\d+\.\d{3} MB\)", cell)
    assert m, cell
    return int(m.group(1))


def _dry_batch(env: dict[str, str], run: Path, *flags: str) -> tuple[list[dict[str, str]], list[str]]:
    proc = emo(env, "judge", str(run), "--dry-run", "--batch", *flags)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dry_table(proc.stdout)


def _to_send(rows: list[dict[str, str]], agent: str) -> int:
    return sum(int(r["to send"]) for r in rows if r["agent"] == agent)


@pytest.mark.slow
@pytest.mark.parametrize("discount", [None, "0.25"])
def test_batch_dry_run_prices_at_the_batch_rate_and_counts_rounds_and_files(
    run_dir: Path, tmp_path: Path, discount: str | None
) -> None:
    """Nothing cached: round 1 the step agent's requests, round 2 the judge's (their prompts wait on the step
    answers: sizes estimated); 5 requests a file (--batch-max-requests 5) split each round by hand."""
    flags = ["--batch-max-requests", "5", *PRICE_FLAGS, *(["--batch-discount", discount] if discount else [])]
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        rows, footer = _dry_batch(_base_env(tmp_path / "cache", srv), run_dir, *flags)
        assert srv.calls == [], "a dry run sends nothing"
    share = float(discount or 0.5)
    _check_costs(rows, footer)  # the cost sent one by one: as without --batch
    for r in rows:  # the batch rate: every row's cost x the discount, marked the same way
        assert _cost(r["batch USD"]) == pytest.approx(_cost(r["cost USD"]) * share, abs=6e-5), r
        assert r["batch USD"].endswith("(est.)") == r["cost USD"].endswith("(est.)"), r
    line = next(x for x in footer if x.startswith("Batch total"))
    assert f"x {share:g}" in line and "estimate" in line, line
    batch_total = float(re.search(r": (\d+\.\d{4}) USD", line).group(1))  # type: ignore[union-attr]
    assert batch_total == pytest.approx(_total(footer) * share, abs=1e-4)

    steps, judges = _to_send(rows, "step"), _to_send(rows, "judge")
    assert steps and judges == 16  # every sample gets a judge request; the step requests are deduplicated
    table = batch_table(footer)
    assert sorted(table) == [1, 2]
    assert table[1]["agents"] == "step" and table[2]["agents"] == "judge"
    for n, sent in ((1, steps), (2, judges)):
        assert int(table[n]["requests"]) == sent
        assert int(table[n]["files"]) == -(-sent // 5), table[n]  # ceil: 5 requests a file, one model a round
        assert _largest(table[n]["largest file"])[0] == min(5, sent)
    assert "(est.)" not in table[1]["bytes"] and table[2]["bytes"].endswith("(est.)")
    total = next(x for x in footer if x.startswith("Batch bytes:"))
    assert total.startswith(f"Batch bytes: {_bytes(table[1]['bytes']) + _bytes(table[2]['bytes'])} B ")
    assert f"in {steps + judges} request lines" in total
    head = next(x for x in footer if x.startswith("Batch (--batch):"))
    assert head.startswith(f"Batch (--batch): 2 round(s), {-(-steps // 5) + 4} file(s); at most 5 requests")


@pytest.mark.slow
def test_batch_dry_run_splits_files_by_bytes(run_dir: Path, tmp_path: Path) -> None:
    """One request a file shows each round's largest line; a byte limit of exactly that judge line puts at most
    one judge request in a file where two do not fit, and a smaller one refuses, naming the size (exit 3)."""
    env = _base_env(tmp_path / "cache")
    _, footer = _dry_batch(env, run_dir, "--batch-max-requests", "1")
    single = batch_table(footer)
    big_step, big_judge = (_largest(single[n]["largest file"])[1] for n in (1, 2))
    step_total, judge_total = (_bytes(single[n]["bytes"]) for n in (1, 2))
    assert big_step < big_judge  # the judge's lines carry frames

    _, footer = _dry_batch(env, run_dir, "--batch-max-mb", f"{(big_judge + 0.5) / MB:.9f}")
    table = batch_table(footer)
    for n, total in ((1, step_total), (2, judge_total)):
        files, (_, largest) = int(table[n]["files"]), _largest(table[n]["largest file"])
        assert largest <= big_judge and _bytes(table[n]["bytes"]) == total
        assert files >= -(-total // big_judge), table[n]  # no file over the limit
    assert _largest(table[2]["largest file"]) == (1, big_judge)  # the largest judge line fills a file alone

    proc = emo(env, "judge", str(run_dir), "--dry-run", "--batch", "--batch-max-mb", f"{(big_step - 1) / MB:.9f}")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert f"{big_step} B" in last and "--batch-max-mb" in last, proc.stderr


@pytest.mark.slow
def test_batch_dry_run_after_one_task_is_judged(run_dir: Path, tmp_path: Path) -> None:
    """After one task is judged, its requests are cached: they count in no file.  A judge request whose step answer
    is cached is known now, exact, and goes in round 1 with the step requests still to send."""
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        env = _base_env(tmp_path / "cache", srv)
        real = emo(env, "judge", str(run_dir), "--tasks", "mme_emotion_sample_er_lab", "--out", str(tmp_path / "j"))
        assert real.returncode == 0, real.stderr[-3000:]
        srv.reset_log()
        rows, footer = _dry_batch(env, run_dir, "--batch-max-requests", "3")
        assert srv.calls == []
    by_task: dict[str, dict[str, dict[str, str]]] = {}
    for r in rows:
        by_task.setdefault(r["task"], {})[r["agent"]] = r
    assert int(by_task["mme_emotion_sample_er_lab"]["judge"]["to send"]) == 0
    # a task whose step requests are all cached has its judge prompts: exact, round 1
    known = sum(int(t["judge"]["to send"]) for t in by_task.values() if t["step"]["cached"] == t["step"]["requests"])
    waiting = _to_send(rows, "judge") - known
    steps = _to_send(rows, "step")
    assert known and waiting and steps, rows
    table = batch_table(footer)
    assert int(table[1]["requests"]) == steps + known and int(table[2]["requests"]) == waiting
    assert table[1]["agents"] == "step, judge" and "(est.)" not in table[1]["bytes"]
    # one model per file: the step and judge models' files apart, 3 requests a file
    assert int(table[1]["files"]) == -(-steps // 3) + -(-known // 3)
    assert int(table[2]["files"]) == -(-waiting // 3) and table[2]["bytes"].endswith("(est.)")


class _Recording(Judge):
    """The fake step agent and judge, keeping every request body it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[dict] = []

    def __call__(self, body: dict, attempt: int) -> Reply:
        self.bodies.append(body)
        return super().__call__(body, attempt)


@pytest.mark.slow
def test_batch_dry_run_sizes_are_the_lines_of_what_is_sent(run_dir: Path, tmp_path: Path) -> None:
    """The exact round (the step agent's) measures the lines of the very bodies the synchronous run then POSTs
    (each distinct request once, a 64-hex custom_id each)."""
    from judges.batch_files import request_line

    fake = _Recording()
    with LoopbackServer(responder=fake, expected_api_key=API_KEY) as srv:
        env = _base_env(tmp_path / "cache", srv)
        _, footer = _dry_batch(env, run_dir)
        real = emo(env, "judge", str(run_dir), "--out", str(tmp_path / "j"))
        assert real.returncode == 0, real.stderr[-3000:]
    table = batch_table(footer)
    steps = {json.dumps(b, sort_keys=True): b for b in fake.bodies if b["model"] == "gpt-4.1-2025-04-14"}
    assert len(steps) == int(table[1]["requests"])
    assert _bytes(table[1]["bytes"]) == sum(len(request_line("k" * 64, b)) for b in steps.values())
