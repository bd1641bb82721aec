"""`emo-tasks judge --dry-run`: what the stage would send (requests, cached answers, tokens, cost), sending nothing.

Why a module of its own: the cost estimate is a separate concern from judging; it only reads the checked plans
(`stage.TaskPlan`) and asks each benchmark's planner (`hooks.plan`, `hooks.judge_plan`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from emo_tasks.stage import EXIT_OK, StageError, TaskPlan


def dry_run_report(
    plans: Sequence[TaskPlan], prices: Mapping[str, tuple[float, float]], outp: Any, multiemo_judge: bool = False
) -> int:
    """Per task and agent: requests, cached, tokens and cost — sending nothing."""
    rows: list[dict[str, Any]] = []
    for planner_name in ("plan", "judge_plan") if multiemo_judge else ("plan",):
        rows.extend(_marginal_rows(plans, planner_name))
    if not rows:
        print("emo-tasks judge --dry-run: nothing to send (no task of this run needs a judge)", file=outp)
        return EXIT_OK
    header = ("task", "agent", "model", "requests", "cached", "to send", "input tok", "output tok", "cost USD")
    table = []
    total_cost: float | None = 0.0
    for r in rows:
        to_send = r["to_send"]  # duplicates inside a batch are sent once
        out_tok, out_text = _output_estimate(r)
        price = prices.get(r["model"])
        cost = None
        if price is not None and out_tok is not None:
            cost = r["input_tokens"] * price[0] / 1e6 + out_tok * price[1] / 1e6
        total_cost = None if cost is None or total_cost is None else total_cost + cost
        shown_cost = "-" if price is None else ("?" if cost is None else f"{cost:.4f}")
        table.append((r["task"], r["agent"], r["model"], str(r["requests"]), str(r["cached"]), str(to_send),
                      str(r["input_tokens"]), out_text, shown_cost))  # fmt: skip
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), file=outp)
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)), file=outp)
    print(
        "Tokens and cost count only the requests still to send. Output tokens: <=N is the max_tokens bound, ~N the "
        "mean real usage of the cached answers, ? unknown (no bound, nothing cached yet)."
        + ("" if total_cost is None else f" Total: {total_cost:.4f} USD."),
        file=outp,
    )
    return EXIT_OK


_ADDITIVE = ("requests", "unique_requests", "cached", "to_send", "input_tokens", "output_tokens_cached")


def _marginal_rows(plans: Sequence[TaskPlan], planner_name: str) -> list[dict[str, Any]]:
    """Per task and agent, what judging the tasks in order adds: each benchmark's planner sees the records of
    the tasks so far, so a request an earlier task already sends (same cache key) is not counted twice."""
    rows: list[dict[str, Any]] = []
    seen: dict[str, list[dict[str, Any]]] = {}  # hooks module -> records of the tasks planned so far
    before: dict[tuple[str, str], dict[str, Any]] = {}  # (hooks module, agent) -> cumulative plan row
    for plan in plans:
        planner = getattr(plan.hooks, planner_name, None)
        if planner is None:
            continue
        records = seen.setdefault(plan.hooks.__name__, [])
        records.extend(plan.records)
        for agent in planner(list(records)):
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
    return rows


def _output_estimate(row: Mapping[str, Any]) -> tuple[float | None, str]:
    """Output tokens of the requests still to send: the max_tokens bound, else the cached answers' mean usage."""
    to_send = row["to_send"]
    if row.get("output_tokens_max") is not None:
        bound = row["output_tokens_max"] * to_send / max(1, row["requests"])
        return bound, f"<={round(bound)}"
    cached, used = row.get("cached") or 0, row.get("output_tokens_cached") or 0
    if to_send == 0:
        return 0.0, "0"
    if cached and used:
        est = to_send * used / cached
        return est, f"~{round(est)}"
    return None, "?"


def parse_prices(specs: Sequence[str]) -> dict[str, tuple[float, float]]:
    """`MODEL=IN/OUT` (USD per 1M input / output tokens) -> {model: (in, out)}."""
    out = {}
    for spec in specs:
        model, _, pair = spec.rpartition("=")
        try:
            price_in, price_out = (float(x) for x in pair.split("/"))
        except ValueError:
            raise StageError(f"--price {spec!r}: expected MODEL=IN/OUT, e.g. gpt-4o-2024-11-20=2.5/10") from None
        if not model:
            raise StageError(f"--price {spec!r}: expected MODEL=IN/OUT, e.g. gpt-4o-2024-11-20=2.5/10")
        out[model] = (price_in, price_out)
    return out
