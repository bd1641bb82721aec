"""Whether two runs can be compared at all, the one rule `emo-tasks compare` and `report --trend` share: the same
data (dataset, data hash, rows), the same prompts, medium and generation settings, and the same judge setup.  Each
reason they cannot is a `Difference`, printed as one line."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from emo_tasks.benchmarks import benchmark_of
from emo_tasks.results.reader import PROMPT_FIELDS, Run, leaves
from emo_tasks.results.same_judge import FINGERPRINT_KEY, fingerprint_difference  # noqa: F401 - the one rule

#: Summary keys that must agree for two runs to be comparable, and what a difference means.
SUMMARY_KEYS = (
    ("data_source", "data"),
    ("prompt_hashes", "prompts"),
    ("judge_models", "judges"),
    ("judge_protocol", "judges"),
    ("judge_mode", "judges"),
    ("alpha", "judges"),
)


@dataclass(frozen=True)
class Difference:
    """One reason two runs are not comparable (`comparability`): its kind (data, rows, prompts, judges,
    generation, reasoning), the line `compare` prints, and the same said without the task (`what`, with the
    `tasks` it is true of), so that a summary over many tasks (`summarize`: the trend's note) says it once."""

    kind: str
    line: str
    what: str
    tasks: tuple[str, ...] = ()


@dataclass
class Comparability:
    """What `comparability` found: `setup` (prompts, medium, generation settings, judges, data config) and `data`
    (data hashes, subset rows) differences make two runs not comparable; `unchecked` and `notes` are said, not
    refused (data identity without sample logs, a generation setting only one run records)."""

    setup: list[Difference] = field(default_factory=list)
    data: list[Difference] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def differences(self) -> list[Difference]:
        return self.setup + self.data


def comparability(
    base: Run, new: Run, tasks: Sequence[str] | None = None, *, paired: bool = True,
    names: tuple[str, str] = ("base", "new"),
) -> Comparability:  # fmt: skip
    """The one rule for whether two runs' numbers can be set side by side, used by `emo-tasks compare` (BASE vs
    NEW) and by `report --trend` (each run vs the one before it): the same data (dataset_name, data hash of the
    sample logs, a subset's rows), prompts (task config, medium, prompt hashes, system instruction), generation
    settings, judges (models, protocol, mode, alpha) and the reasoning tags the answers were read with.  `tasks`:
    the tasks whose data identity is checked (default: every emo-tasks task both runs have).  `paired` (compare):
    NEW is paired with BASE on its rows, so a base run on a subset needs a new run on the same subset; unpaired (a
    trend): either may be the subset run.  `names`: how the messages call the two runs."""
    shared = sorted(t for t in set(base.results) & set(new.results) if benchmark_of(t))
    out = Comparability(setup=setup_differences(base, new, names))
    out.notes.extend(generation_differences(base, new, shared, names, out.setup))
    out.notes.extend(reasoning_differences(base, new, shared, names, out.setup))
    differ, out.unchecked = data_identity(base, new, shared if tasks is None else tasks, paired, names)
    out.data.extend(differ)
    return out


def summarize(differences: Sequence[Difference], limit: int = 3) -> list[str]:
    """The differences, one line per thing that differs ("kind: what (tasks)"), a task list cut after `limit`."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for d in differences:
        tasks = grouped.setdefault((d.kind, d.what), [])
        tasks.extend(t for t in d.tasks if t not in tasks)
    out = []
    for (kind, what), tasks in grouped.items():
        shown = ", ".join(tasks[:limit]) + (f" and {len(tasks) - limit} more" if len(tasks) > limit else "")
        out.append(f"{kind}: {what}" + (f" ({shown})" if tasks else ""))
    return out


def data_identity(
    base: Run, new: Run, tasks: Sequence[str], paired: bool = True, names: tuple[str, str] = ("base", "new")
) -> tuple[list[Difference], list[str]]:
    """(reasons: leaf tasks whose data hashes differ, unchecked: leaf tasks a run has no sample log for).  A new
    run on a subset against a full base run is proven by `subset_rows` instead; unpaired (`comparability`), a
    base run on a subset against a full new run too, and two runs on different subsets are unchecked."""
    reasons, unchecked = [], []
    b_name, n_name = names
    for leaf in sorted({t for task in tasks for t in leaves(base, task) + leaves(new, task)}):
        bs, ns = base.subset(leaf), new.subset(leaf)
        if not paired and bs is not None and ns is not None and ns.get("digest") != bs.get("digest"):
            unchecked.append(f"{leaf} (the runs ran on different subsets, {bs.get('name')!r} and {ns.get('name')!r})")
            continue
        if not paired and bs is not None and ns is None:
            reasons.extend(subset_rows(new, base, leaf, bs, names=(n_name, b_name)))
            continue
        if bs is not None and (ns is None or ns.get("digest") != bs.get("digest")):
            reasons.append(Difference(
                "data",
                f"data: {leaf}: the base run ran on subset {bs.get('name')!r} ({bs.get('n')} rows) and the new run "
                + ("on the full data" if ns is None else f"on subset {ns.get('name')!r}")
                + ": a gate compares a subset run against a full base run, or two runs of one subset",
                "the base run ran on a subset, the new run " + ("on the full data" if ns is None else "on another"),
                (leaf,),
            ))  # fmt: skip
            continue
        if ns is not None and bs is None:
            reasons.extend(subset_rows(base, new, leaf, ns, names=names))
            continue
        bh, nh = base.data_hashes.get(leaf), new.data_hashes.get(leaf)
        if bh is None or nh is None:
            side = " and ".join(s for s, h in ((b_name, bh), (n_name, nh)) if h is None)
            unchecked.append(f"{leaf} (no sample log in the {side} run)")
        elif bh != nh:
            reasons.append(Difference(
                "data",
                f"data: {leaf} used different data (data hash {bh} vs {nh}: the rows or their gold labels differ, "
                "e.g. another EMO_DATA_ROOT or dataset version)",
                "another data hash (the rows or their gold labels differ, e.g. another EMO_DATA_ROOT or dataset "
                "version)",
                (leaf,),
            ))  # fmt: skip
    return reasons, unchecked


def subset_rows(
    base: Run, new: Run, leaf: str, rec: Mapping[str, Any], names: tuple[str, str] = ("base", "new")
) -> list[Difference]:
    """Why a subset run's task is not a sample of the base run's rows ([] when it is): each of its rows logged
    once, every row of its subset (`rec`, as the run recorded it) answered, and each row's target (the gold answer
    plus a hash of the row's content) one the base run logged: the rows are the base run's own, so comparing on
    them needs no second base run.  `names`: how the messages call the full run and the subset run."""
    from collections import Counter

    from emo_tasks.subset import digest

    b_name, n_name = names

    def diff(kind: str, text: str, what: str) -> Difference:
        return Difference(kind, f"{kind}: {leaf}: {text}", what, (leaf,))

    name, n = rec.get("name"), rec.get("n")
    keys = [str(k) for k in rec.get("keys") or []]
    if len(keys) != n or rec.get("digest") != digest(keys):
        return [
            diff(
                "data",
                f"the {n_name} run's subset record is inconsistent (its keys do not match its count "
                "or digest): the results file was edited",
                f"the {n_name} run's subset record is edited",
            )
        ]
    bl, nl = base.logged.get(leaf), new.logged.get(leaf)
    if bl is None or nl is None:
        side = " and ".join(s for s, rows in ((b_name, bl), (n_name, nl)) if rows is None)
        return [
            diff(
                "data",
                f"the {n_name} run ran on subset {name!r}, and without a sample log in the {side} run "
                f"its rows cannot be proven to be the {b_name} run's (run lmms-eval with --log_samples)",
                f"a subset run's rows not proven (no sample log in the {side} run)",
            )
        ]
    reasons = []
    ids = Counter(d for d, _ in nl)
    twice = sorted((d for d, c in ids.items() if c > 1), key=lambda d: (len(d), d))
    if twice:
        reasons.append(
            diff(
                "rows",
                f"the {n_name} run logs {len(twice)} row(s) twice (doc_id {', '.join(twice[:10])})",
                f"the {n_name} run logs rows twice",
            )
        )
    counts = (new.data.get("n-samples") or {}).get(leaf) or {}
    original, effective = counts.get("original"), counts.get("effective")
    if effective != original:
        reasons.append(
            diff(
                "rows",
                f"the {n_name} run answered {effective} of its subset {name!r}'s {original} "
                "rows (--limit): a gate runs on every row it planned",
                f"the {n_name} run answered part of its subset (--limit)",
            )
        )
    elif len(ids) != original:
        reasons.append(
            diff(
                "rows",
                f"the {n_name} run's sample log holds {len(ids)} of the {original} rows it "
                "answered (an edited or cut sample log)",
                f"the {n_name} run's sample log is cut",
            )
        )
    foreign = list((Counter(t for _, t in nl) - Counter(t for _, t in bl)).elements())
    if foreign:
        reasons.append(
            diff(
                "data",
                f"{len(foreign)} of the {n_name} run's {len(nl)} rows are not rows of the "
                f"{b_name} run (first target {foreign[0]!r}): another dataset or data version",
                f"the {n_name} run's subset rows are not rows of the {b_name} run (another dataset or data version)",
            )
        )
    return reasons


#: What the model is sent, by the medium its prompt names (`lmms_eval_specific_kwargs` `medium`, MME-Emotion's):
#: lmms-eval picks the entry by the model's name, VLMEvalKit by --video-llm.
MEDIA = {"video": "a video model, sent the video", "video frames": "an image model, sent frames of the video",
         "audio": "an audio model, sent the audio track"}  # fmt: skip


def prompt_kwargs(run: Run, task: str) -> dict[str, Any]:
    """The `lmms_eval_specific_kwargs` a task's prompt was built with, as lmms-eval picks them: the entry named
    like the model, else the table's `default` (which lmms-eval merges into the table it records, at the top)."""
    table = (run.configs.get(task) or {}).get("lmms_eval_specific_kwargs")
    if not isinstance(table, dict):
        return {}
    if isinstance(table.get(run.model), dict):
        return dict(table[run.model])
    top = {k: v for k, v in table.items() if not isinstance(v, dict)}
    return top or dict(table.get("default") or table.get("dataset") or {})


def _kwargs_table(config: Mapping[str, Any]) -> Any:
    """A config's `lmms_eval_specific_kwargs` table of per-model entries, without what was merged into it for the
    run's model and without its fallback entries (lmms-eval merges `default` in at the top; a VLMEvalKit run writes
    its medium into `default`): what the run's model was asked is compared by `prompt_kwargs`."""
    table = config.get("lmms_eval_specific_kwargs")
    if not isinstance(table, dict):
        return table
    return {k: v for k, v in table.items() if isinstance(v, dict) and k not in ("default", "dataset")}


def setup_differences(base: Run, new: Run, names: tuple[str, str] = ("base", "new")) -> list[Difference]:
    """Data config, prompts (task config, the prompt's medium, prompt hashes, system instruction), generation
    settings and judges that differ between two runs, over the emo-tasks tasks both have."""
    reasons = []
    shared = sorted(t for t in set(base.results) & set(new.results) if benchmark_of(t))
    if not shared:
        reasons.append(Difference("data", "data: the runs share no emo-tasks task", "the runs share no task"))
    media: dict[tuple[Any, Any], list[str]] = {}
    for task in shared:
        bc, nc = base.configs.get(task, {}), new.configs.get(task, {})
        if bc.get("dataset_name") != nc.get("dataset_name"):
            what = f"dataset_name {bc.get('dataset_name')!r} vs {nc.get('dataset_name')!r}"
            reasons.append(Difference("data", f"data: {task} {what}", what, (task,)))
        for f in PROMPT_FIELDS:
            if f == "lmms_eval_specific_kwargs":
                if _stable(_kwargs_table(bc)) != _stable(_kwargs_table(nc)):
                    what = f"config field {f} differs"
                    reasons.append(Difference("prompts", f"prompts: {task} {what}", what, (task,)))
                bk, nk = prompt_kwargs(base, task), prompt_kwargs(new, task)
                for key in sorted(set(bk) | set(nk)):
                    if _stable(bk.get(key)) == _stable(nk.get(key)):
                        continue
                    if key == "medium":
                        media.setdefault((bk.get(key), nk.get(key)), []).append(task)
                    else:
                        what = f"prompt setting {key} {bk.get(key)!r} vs {nk.get(key)!r} (lmms_eval_specific_kwargs)"
                        reasons.append(Difference("prompts", f"prompts: {task} {what}", what, (task,)))
            elif _stable(bc.get(f)) != _stable(nc.get(f)):
                what = f"config field {f} differs"
                reasons.append(Difference("prompts", f"prompts: {task} {what}", what, (task,)))
        bs, ns = base.summaries.get(task), new.summaries.get(task)
        if bs is not None and ns is not None:
            for key, kind in SUMMARY_KEYS:
                if bs.get(key) != ns.get(key):
                    what = f"{key} {bs.get(key)!r} vs {ns.get(key)!r}"
                    reasons.append(Difference(kind, f"{kind}: {task} {what}", what, (task,)))
            what = fingerprint_difference(bs.get(FINGERPRINT_KEY), ns.get(FINGERPRINT_KEY))
            if what:
                reasons.append(Difference("judges", f"judges: {task} {what}", what, (task,)))
    for (bm, nm), tasks in media.items():
        what = (f"the medium differs: the {names[0]} run's prompt asked about {bm!r} ({_sent(bm)}), the "
                f"{names[1]} run's about {nm!r} ({_sent(nm)})")  # fmt: skip
        line = (f"prompts: {what}, in {_tasks_text(tasks)}: the model saw other input (lmms-eval picks the medium by "
                "the model's name, lmms_eval_specific_kwargs; VLMEvalKit by --video-llm)")  # fmt: skip
        reasons.append(Difference("prompts", line, what, tuple(tasks)))
    if (base.data.get("system_instruction") or None) != (new.data.get("system_instruction") or None):
        reasons.append(Difference("prompts", "prompts: system_instruction differs", "system_instruction differs"))
    return reasons


def _sent(medium: Any) -> str:
    return MEDIA.get(medium, "a medium of its own") if medium is not None else "no medium named"


def _tasks_text(tasks: Sequence[str]) -> str:
    return f"{len(tasks)} tasks ({', '.join(tasks)})" if len(tasks) > 1 else f"{tasks[0]}"


#: lmms-eval's `generation_kwargs` name of a setting a VLMEvalKit run records under another name
GENERATION_NAMES = {"max_tokens": "max_new_tokens"}


def generation_settings(run: Run, task: str) -> tuple[dict[str, Any], bool, str] | None:
    """(settings, complete, source) a leaf task's answers were generated with: lmms-eval's task config
    `generation_kwargs` (the YAML's with --gen_kwargs applied: every setting the model was handed, complete),
    else what a VLMEvalKit run recorded (`emo_tasks_vlmeval.generation`: the settings it knows, names mapped to
    lmms-eval's; not complete: what it does not record is the model's own); None when the run records none."""
    kwargs = (run.configs.get(task) or {}).get("generation_kwargs")
    if isinstance(kwargs, dict):
        return dict(kwargs), True, "generation_kwargs"
    host = run.data.get("emo_tasks_vlmeval")
    gen = host.get("generation") if isinstance(host, dict) else None
    if isinstance(gen, dict):
        settings = {GENERATION_NAMES.get(k, k): v for k, v in gen.items() if k != "model"}
        return settings, False, f"VLMEvalKit, {gen.get('model') or 'its model'}"
    return None


def _same_setting(a: Any, b: Any) -> bool:
    """Two settings' values are the same: numbers by value (0 and 0.0), anything else as JSON."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    return float(a) == float(b) if numbers else _stable(a) == _stable(b)


def generation_differences(
    base: Run, new: Run, tasks: Sequence[str], names: tuple[str, str], out: list[Difference]
) -> list[str]:
    """Generation settings that differ between two runs' leaf tasks, appended to `out` (one Difference per setting
    and pair of values, with its tasks); returns the notes: settings only one run records where the other's record
    is not complete (a VLMEvalKit run records only what it knows), or a run that records none.

    Every setting can move the number (max_new_tokens cuts an answer; temperature, do_sample, top_p, top_k,
    num_beams and repetition_penalty change what is sampled; until stops an answer), so a setting both runs record
    with different values, or that one run sets and the other, complete, leaves to the model, is a difference."""
    diffs: dict[tuple[str, str, str], list[str]] = {}
    unknown: dict[tuple[str, str], dict[str, list[str]]] = {}  # (side, its record) -> {unrecorded key: tasks}
    leaf_tasks = sorted({t for task in tasks for t in leaves(base, task) + leaves(new, task)
                         if t in base.results and t in new.results})  # fmt: skip
    for leaf in leaf_tasks:
        b, n = generation_settings(base, leaf), generation_settings(new, leaf)
        if b is None and n is None:
            continue
        if b is None or n is None:
            side = names[0] if b is None else names[1]
            unknown.setdefault((side, "no record"), {}).setdefault("any setting", []).append(leaf)
            continue
        for key in sorted(set(b[0]) | set(n[0])):
            if key in b[0] and key in n[0]:
                if _same_setting(b[0][key], n[0][key]):
                    continue
            elif not (n[1] if key in b[0] else b[1]):  # the other run's record is not complete: unknown there
                side, other = (names[1], n[2]) if key in b[0] else (names[0], b[2])
                unknown.setdefault((side, other), {}).setdefault(key, []).append(leaf)
                continue
            shown = [repr(r[0][key]) if key in r[0] else "not set (the model's default)" for r in (b, n)]
            k = (key, shown[0], shown[1])
            diffs.setdefault(k, []).append(leaf)
    for k, leaves_ in diffs.items():
        what = f"{k[0]} {k[1]} vs {k[2]}"
        out.append(Difference(
            "generation",
            f"generation: {what} in {_tasks_text(leaves_)}: answers can be cut or sampled otherwise, so the numbers "
            "can differ",
            what,
            tuple(leaves_),
        ))  # fmt: skip
    notes = []
    for (side, record), keys in unknown.items():
        tasks_ = sorted({t for ts in keys.values() for t in ts})
        if record == "no record":
            notes.append(f"generation settings not checked for {_tasks_text(tasks_)}: the {side} run records none")
        else:
            notes.append(f"generation settings not checked for {_tasks_text(tasks_)}: {', '.join(sorted(keys))} "
                         f"(the {side} run, {record}, does not record them)")  # fmt: skip
    return notes


#: lmms-eval 0.7.3's tags for a task's `auto_strip_thinking` (its StripThinkingFilter's default), used when no
#: `reasoning_tags` is in force.
AUTO_STRIP_TAGS = [["<think>", "</think>"], ["<thinking>", "</thinking>"]]


def reasoning_tags(run: Run, task: str) -> tuple[Any, ...] | str | None:
    """The reasoning blocks removed from a task's answers before our hooks read them: a tuple of (open, close)
    pairs, "none", or None when the run does not say.  lmms-eval: the task config's `reasoning_tags`, else the
    command line's (`config.resolved_cli_args.reasoning_tags`, default think and analysis), else the task's
    `auto_strip_thinking` tags; a results file without resolved_cli_args does not say.  VLMEvalKit (our adapter):
    what it records (`emo_tasks_vlmeval.reasoning_tags`; none recorded: an adapter that stripped nothing)."""
    config = run.configs.get(task) or {}
    value: Any = config.get("reasoning_tags")
    host = run.data.get("emo_tasks_vlmeval")
    cli = (run.data.get("config") or {}).get("resolved_cli_args")
    if value is None and isinstance(host, dict):
        value = host.get("reasoning_tags") or "none"
    elif value is None and isinstance(cli, dict):
        value = cli.get("reasoning_tags") or "none"
    elif value is None:
        return None
    if isinstance(value, str) and value.strip().lower() != "none":
        try:
            value = json.loads(value)
        except ValueError:
            return value  # as lmms-eval would have refused to run with it: said as it is
    if value in (None, False, "none", "None", []):
        value = AUTO_STRIP_TAGS if config.get("auto_strip_thinking") else "none"
    return tuple(tuple(pair) for pair in value) if isinstance(value, list) else value


def _tags_text(tags: Any) -> str:
    if tags == "none":
        return "nothing stripped (--reasoning_tags none)"
    if isinstance(tags, tuple):
        return "strips " + ", ".join("…".join(pair) for pair in tags)
    return repr(tags)


def reasoning_differences(
    base: Run, new: Run, tasks: Sequence[str], names: tuple[str, str], out: list[Difference]
) -> list[str]:
    """Tasks whose answers the two runs read with other reasoning tags (`reasoning_tags`), appended to `out`: a
    reasoning model's numbers then differ (docs/lmms_eval.md#reasoning-models); returns the notes on tasks a run
    does not say it for."""
    differ: dict[tuple[str, str], list[str]] = {}
    unknown: list[str] = []
    for task in tasks:
        b, n = reasoning_tags(base, task), reasoning_tags(new, task)
        if b is None or n is None:
            if b != n:
                unknown.append(task)
        elif b != n:
            differ.setdefault((_tags_text(b), _tags_text(n)), []).append(task)
    for (b_text, n_text), tasks_ in differ.items():
        what = f"the answers were read otherwise: the {names[0]} run {b_text}, the {names[1]} run {n_text}"
        out.append(Difference(
            "reasoning",
            f"reasoning: {what}, in {_tasks_text(tasks_)}: a reasoning model's numbers differ "
            "(docs/lmms_eval.md#reasoning-models)",
            what,
            tuple(tasks_),
        ))  # fmt: skip
    if unknown:
        return [f"reasoning tags not checked for {_tasks_text(unknown)}: one run does not record them"]
    return []


def _stable(value: Any) -> str:
    """A config value without the memory addresses lmms-eval leaves in function reprs ('<function f at 0x..>')."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", json.dumps(value, sort_keys=True, default=str))
