"""`emo-tasks judge --dry-run`: what the stage would send (requests, cached answers, tokens, cost), sending nothing.

Why a module of its own: the cost estimate is a separate concern from judging; it only reads the checked plans
(`stage_types.TaskPlan`) and asks each benchmark's planner (`hooks.plan`, `hooks.judge_plan`).

The dry run is the moment a user needs the cost, usually before anything is cached, so every row gets one: input
tokens are counted exactly; output tokens come from the agent's `max_tokens` bound, else the mean real usage of
the agent's cached answers, else the agent's typical answer length (an estimate, marked `(est.)`; see the
planners' `output_tokens_typical`).  It needs no judge endpoint
(`dry_run_env`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from emo_tasks.judging.stage_types import EXIT_OK, StageError, TaskPlan

#: Where the settings of a dry run with no judge endpoint point: a host that cannot resolve (RFC 6761 `.invalid`),
#: so nothing could be sent even by mistake (nor `/models` asked).  Cache keys do not depend on the endpoint host
#: (`JudgeRequest.cache_key`; what a real endpoint serves joins them: `judges.fingerprint`).
STAND_IN_BASE_URL = "http://no-judge-endpoint.invalid/v1"

_PRICE_HELP = "expected MODEL=IN/OUT (USD per 1M input/output tokens, finite and >= 0), e.g. gpt-4o-2024-11-20=2.5/10"


def dry_run_env(env: Mapping[str, str], err: Any = None) -> dict[str, str]:
    """The stage environment for a dry run: `env` itself when a judge endpoint is configured, else `env` with a
    stand-in endpoint (`STAND_IN_BASE_URL`), because a dry run needs models and token counts, not an endpoint;
    one line on `err` says the real run will need one.  Malformed endpoint values still raise (JudgeConfigError)."""
    from judges.config import EndpointConfig, JudgeConfigError

    out = dict(env)
    endpoint = EndpointConfig.from_env(out)  # a malformed value raises here, naming its variable
    try:
        endpoint.check_usable()
        return out
    except JudgeConfigError:
        pass  # no endpoint (or an incomplete Azure one): nothing is sent, so a stand-in will do
    out.pop("OPENAI_API_URL", None)
    out.update(API_TYPE="openai", OPENAI_BASE_URL=STAND_IN_BASE_URL)
    print(
        "emo-tasks judge --dry-run: no judge endpoint is configured (fine for counting: nothing is sent). Judging "
        "for real needs OPENAI_API_KEY, or OPENAI_BASE_URL for a vLLM/SGLang server, or API_TYPE=azure with "
        "AZURE_ENDPOINT and AZURE_API_KEY.",
        file=sys.stderr if err is None else err,
    )
    return out


def dry_run_report(
    plans: Sequence[TaskPlan],
    prices: Mapping[str, tuple[float, float]],
    outp: Any,
    extra_judge: bool = False,
    batch: Any = None,
) -> int:
    """Per task and agent: requests, cached, tokens and cost — sending nothing; then a Total line and what in it
    is an estimate.  `batch` (a `judges.batch_files.BatchOptions`, `--batch`): also each row's cost at the batch
    rate (x `batch.discount`) and the rounds, files and bytes a batch judging would send (`batch_plan`)."""
    rows: list[dict[str, Any]] = []
    lines: list[Any] | None = [] if batch is not None else None
    for planner_name in ("plan", "judge_plan") if extra_judge else ("plan",):
        rows.extend(_marginal_rows(plans, planner_name, lines))
    if not rows:
        print("emo-tasks judge --dry-run: nothing to send (no task of this run needs a judge)", file=outp)
        return EXIT_OK
    header: tuple[str, ...] = ("task", "agent", "model", "requests", "cached", "to send", "input tok", "output tok",
                               "cost USD")  # fmt: skip
    if batch is not None:
        header = (*header, "batch USD")
    table = []
    total = 0.0
    estimated: list[tuple[str, str]] = []  # (task, agent) of the rows whose output is a typical length
    typical: dict[str, int] = {}  # agent -> typical tokens per request, of the rows that used it
    unpriced: list[str] = []  # models with no --price
    unknown = 0  # rows with a price but no output estimate at all
    for r in rows:
        out_tok, out_text, how = _output_estimate(r)
        if how == "typical":
            estimated.append((r["task"], r["agent"]))
            typical[r["agent"]] = _typical(r) or 0
        price = prices.get(r["model"])
        shown_batch = None
        if price is None:
            shown_cost = shown_batch = "-"
            if r["model"] not in unpriced:
                unpriced.append(r["model"])
        elif out_tok is None:
            shown_cost = shown_batch = "?"
            unknown += 1
        else:
            cost = r["input_tokens"] * price[0] / 1e6 + out_tok * price[1] / 1e6
            total += cost
            mark = " (est.)" if how == "typical" else ""
            shown_cost = f"{cost:.4f}{mark}"
            if batch is not None:
                shown_batch = f"{cost * batch.discount:.4f}{mark}"
        cells = (r["task"], r["agent"], r["model"], str(r["requests"]), str(r["cached"]), str(r["to_send"]),
                 str(r["input_tokens"]), out_text, shown_cost)  # fmt: skip
        table.append(cells if batch is None else (*cells, shown_batch or "-"))
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip(), file=outp)
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=outp)
    lengths = ", ".join(f"{agent} {n}" for agent, n in typical.items())
    print(
        "Tokens and cost count only the requests still to send (duplicates once). Output tokens: <=N the max_tokens "
        "bound, ~N the mean real usage of the agent's cached answers, ~N (est.) an estimate: requests to send x the "
        f"agent's typical answer length{f' ({lengths} tokens per request)' if lengths else ''}, see docs/judges.md; "
        "? unknown.",
        file=outp,
    )
    if estimated:
        print(_estimated_line(estimated, rows), file=outp)
    print(_total_line(total, len(estimated), len(rows), unpriced, unknown, bool(prices)), file=outp)
    if batch is not None:
        from emo_tasks.judging.batch_plan import batch_report

        line = _total_line(total * batch.discount, len(estimated), len(rows), unpriced, unknown, bool(prices))
        rate = f"Batch total (--batch: batch USD, the cost sent one by one x {batch.discount:g}, --batch-discount): "
        print(line.replace("Total: ", rate, 1), file=outp)
        try:
            batch_report(lines or [], batch.limits, outp)
        except ValueError as exc:  # one request larger than a file may be: the real run could not send it either
            raise StageError(f"--batch: {exc}") from None
    return EXIT_OK


def _estimated_line(estimated: Sequence[tuple[str, str]], rows: Sequence[Mapping[str, Any]]) -> str:
    """Which rows are estimates: all rows with requests to send, or per agent, the tasks."""
    sending = [(r["task"], r["agent"]) for r in rows if r["to_send"]]
    if list(estimated) == sending:
        which = f"every row with requests to send ({len(estimated)} of {len(rows)} rows)"
    else:
        by_agent: dict[str, list[str]] = {}
        for task, agent in estimated:
            by_agent.setdefault(agent, []).append(task)
        which = "; ".join(f"{agent} of {', '.join(tasks)}" for agent, tasks in by_agent.items())
    return f"Estimated rows (est.: no max_tokens bound, nothing cached to go by): {which}."


def _total_line(total: float, estimated: int, n_rows: int, unpriced: Sequence[str], unknown: int, priced: bool) -> str:
    """The Total line, saying what it leaves out and whether it rests on estimates (`estimated` rows of `n_rows`)."""
    if not priced:
        return "Total: - USD (give --price MODEL=IN/OUT, USD per 1M input/output tokens, for a cost)."
    notes = []
    if estimated:
        notes.append("an estimate: " + ("every row is (est.)" if estimated == n_rows else "includes (est.) rows"))
    if unpriced:
        notes.append(f"without the rows of {', '.join(unpriced)} (no --price)")
    if unknown:
        notes.append(f"without {unknown} row(s) of unknown output")
    return f"Total: {total:.4f} USD" + (f" ({'; '.join(notes)})." if notes else ".")


_ADDITIVE = ("requests", "unique_requests", "cached", "to_send", "input_tokens", "output_tokens_cached")


def _marginal_rows(
    plans: Sequence[TaskPlan], planner_name: str, lines: list[Any] | None = None
) -> list[dict[str, Any]]:
    """Per task and agent, what judging the tasks in order adds: each benchmark's planner sees the records of
    the tasks so far, so a request an earlier task already sends (same cache key) is not counted twice.  Each row
    also gets `output_tokens_mean`: the mean real usage of the agent's cached answers over all the tasks (None
    when nothing is cached), the best guess for the output of its requests still to send.  `lines` (a dry run
    with --batch): the planners' last call per benchmark (all its tasks' records) also measures each request's
    batch line (`batch_lines`), added here."""
    rows: list[dict[str, Any]] = []
    seen: dict[str, list[dict[str, Any]]] = {}  # hooks module -> records of the tasks planned so far
    before: dict[tuple[str, str], dict[str, Any]] = {}  # (hooks module, agent) -> cumulative plan row
    keys: list[tuple[str, str]] = []
    last = {p.hooks.__name__: i for i, p in enumerate(plans) if getattr(p.hooks, planner_name, None) is not None}
    for i, plan in enumerate(plans):
        planner = getattr(plan.hooks, planner_name, None)
        if planner is None:
            continue
        records = seen.setdefault(plan.hooks.__name__, [])
        records.extend(plan.records)
        measure = lines is not None and last[plan.hooks.__name__] == i
        agents = planner(list(records), lines=True) if measure else planner(list(records))
        if measure:
            from emo_tasks.judging.batch_plan import agents_lines

            lines.extend(agents_lines(agents))  # type: ignore[union-attr]
        for agent in agents:
            key = (plan.hooks.__name__, agent["agent"])
            prev = before.get(key, {})
            row = {"task": plan.task, **agent}
            for name in _ADDITIVE:
                if isinstance(agent.get(name), int | float):
                    row[name] = agent[name] - prev.get(name, 0)
            if agent.get("output_tokens_max") is not None:
                row["output_tokens_max"] = agent["output_tokens_max"] - (prev.get("output_tokens_max") or 0)
            before[key] = agent
            if row["requests"]:
                rows.append(row)
                keys.append(key)
    for row, key in zip(rows, keys, strict=True):
        row["output_tokens_mean"] = _cached_mean(before[key])
    return rows


def _cached_mean(agent: Mapping[str, Any]) -> float | None:
    """Mean completion tokens of an agent's cached answers (each distinct request once), None when none is cached
    or the cache recorded no usage."""
    used = agent.get("output_tokens_cached") or 0
    distinct = (agent.get("unique_requests") or 0) - (agent.get("to_send") or 0)
    if distinct <= 0:
        distinct = agent.get("cached") or 0  # a planner that does not count distinct requests
    return used / distinct if used and distinct > 0 else None


def _typical(row: Mapping[str, Any]) -> int | None:
    """The agent's typical answer length per request, as its benchmark's planner states it (None: unknown)."""
    return row.get("output_tokens_typical")


def _output_estimate(row: Mapping[str, Any]) -> tuple[float | None, str, str]:
    """Output tokens of the requests still to send, as shown, and how they were had ("bound", "none", "cached",
    "typical" or "unknown"): the max_tokens bound, else the agent's cached answers' mean usage, else its typical
    answer length (an estimate)."""
    to_send = row["to_send"]
    if row.get("output_tokens_max") is not None:
        bound = row["output_tokens_max"] * to_send / max(1, row["requests"])
        return bound, f"<={round(bound)}", "bound"
    if to_send == 0:
        return 0.0, "0", "none"
    mean = row.get("output_tokens_mean")
    if mean is None and row.get("cached") and row.get("output_tokens_cached"):
        mean = row["output_tokens_cached"] / row["cached"]  # rows not made by `_marginal_rows`
    if mean:
        est = to_send * mean
        return est, f"~{round(est)}", "cached"
    per_request = _typical(row)
    if per_request:
        est = float(to_send * per_request)
        return est, f"~{round(est)} (est.)", "typical"
    return None, "?", "unknown"


def parse_prices(specs: Sequence[str]) -> dict[str, tuple[float, float]]:
    """`MODEL=IN/OUT` (USD per 1M input / output tokens) -> {model: (in, out)}.  A price must be a finite number
    >= 0: `nan` or `inf` would make every cost meaningless, a negative one would hide others in the total."""
    out = {}
    for spec in specs:
        model, _, pair = spec.rpartition("=")
        try:
            price_in, price_out = (float(x) for x in pair.split("/"))
        except ValueError:
            raise StageError(f"--price {spec!r}: {_PRICE_HELP}") from None
        if not model:
            raise StageError(f"--price {spec!r}: {_PRICE_HELP}")
        if not all(math.isfinite(p) and p >= 0 for p in (price_in, price_out)):
            raise StageError(f"--price {spec!r}: a price must be a finite number >= 0; {_PRICE_HELP}")
        out[model] = (price_in, price_out)
    return out


def price_arg(spec: str) -> str:
    """`--price MODEL=IN/OUT` (`parse_prices`' rule) as the argument is parsed, so a bad price is exit 3: USD per
    1M tokens, finite and >= 0."""
    try:
        parse_prices([spec])
    except StageError:
        raise argparse.ArgumentTypeError(f"{spec!r}: {_PRICE_HELP}") from None
    return spec
