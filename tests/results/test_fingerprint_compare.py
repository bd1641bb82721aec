"""`compare` and `report --trend` refuse two runs whose judge fingerprints differ, saying in one short line what
differs (issue 34, item 3); a run made before fingerprints were recorded is compared on what it records, so old
baselines stay usable (docs/cli.md#compare)."""

from __future__ import annotations

import copy
from pathlib import Path

from emo_tasks.results import reader
from emo_tasks.results.comparable import comparability, summarize
from judges.fingerprint import fingerprint

TASK = "mme_emotion_sample_er_lab"
MODELS = {"step": "gpt-4.1-2025-04-14", "judge": "gpt-4o-2024-11-20"}


def _fingerprint(temperature: float = 0.0, prompts: str = "t", root: str | None = None) -> dict:
    listing = {"gpt-4o-2024-11-20": {"id": "gpt-4o-2024-11-20", **({"root": root} if root else {})}}
    roles = {role: (model, {"temperature": temperature}) for role, model in MODELS.items()}
    return fingerprint(roles, protocol="mme-emotion guarded", prompts=prompts, listing=listing)


def _run(folder: str, fp: dict | None) -> reader.Run:
    path = Path(folder)
    data = {"config": {"model": "m"}, "results": {TASK: {"alias": TASK}}, "configs": {TASK: {}}}
    run = reader.Run(path=path, results_file=path / "20261201_130501_results.json", data=data, label=path.name)
    summary = {"judge_models": dict(MODELS), "judge_protocol": "guarded", "judge_mode": "api", "alpha": 0.5}
    if fp is not None:
        summary["judge_fingerprint"] = fp
    run.summaries = {TASK: summary}
    return run


def _judges(base: reader.Run, new: reader.Run) -> list[str]:
    return [d.line for d in comparability(base, new).setup if d.kind == "judges"]


def test_differing_fingerprints_are_refused_with_a_short_line() -> None:
    base = _run("runs/a", _fingerprint())
    assert _judges(base, _run("runs/b", _fingerprint())) == []  # the same setup, run twice
    assert _judges(base, _run("runs/b", _fingerprint(temperature=0.2))) == [
        f"judges: {TASK} judge fingerprint: judge temperature 0.0 vs 0.2; step temperature 0.0 vs 0.2"
    ]
    (line,) = _judges(base, _run("runs/b", _fingerprint(prompts="edited")))
    assert line == f"judges: {TASK} judge fingerprint: prompt templates differ"
    (line,) = _judges(_run("a", _fingerprint(root="/ckpt/a")), _run("b", _fingerprint(root="/ckpt/b")))
    assert "judge served model id gpt-4o-2024-11-20, root /ckpt/a vs id gpt-4o-2024-11-20, root /ckpt/b" in line
    summary = summarize(comparability(base, _run("runs/b", _fingerprint(prompts="edited"))).setup)
    assert summary == [f"judges: judge fingerprint: prompt templates differ ({TASK})"]


def test_a_run_without_a_fingerprint_is_compared_on_what_it_records() -> None:
    """Runs made before fingerprints existed: neither side refused for lacking one; the other judge keys still
    decide (another judge model is refused as before)."""
    old, new = _run("runs/old", None), _run("runs/new", _fingerprint())
    assert _judges(old, new) == [] and _judges(new, old) == [] and _judges(old, _run("o2", None)) == []
    other = _run("runs/other", None)
    other.summaries[TASK]["judge_models"] = {"step": "s", "judge": "j"}
    assert [line.split(" ")[2] for line in _judges(new, other)] == ["judge_models"]


def test_a_served_model_one_run_could_not_learn_is_not_a_difference() -> None:
    known = _fingerprint(root="/ckpt/a")
    unknown = copy.deepcopy(known)
    unknown["roles"]["judge"]["served"] = "not reported"
    assert _judges(_run("a", known), _run("b", unknown)) == []


def test_the_one_line_setup_names_the_fingerprint_by_a_short_hash() -> None:
    """A judged result's setup line (which-run messages) stays one short line: the fingerprint is not dumped."""
    setup = {"judge_mode": "api", "models": dict(MODELS), "judge_fingerprint": {"mme": _fingerprint()}}
    text = reader.judge_setup_text(setup)
    assert text is not None and "roles" not in text and "temperature" not in text
    assert text.startswith("mode api; step gpt-4.1-2025-04-14, judge gpt-4o-2024-11-20; judge fingerprint ")
    assert len(text.rsplit(" ", 1)[1]) == 10 and text == reader.judge_setup_text(dict(reversed(setup.items())))


def test_one_identity_rule_for_compare_calibrate_and_the_gate() -> None:
    """Issue 42 item 3: "not reported" is never a difference, to compare, a calibration's match, the gate's
    `changed` and calibrate's grouping alike; two reported roots that differ are two judges to all of them."""
    from emo_tasks.results import judge_change
    from emo_tasks.results.calibration import judge_identity
    from emo_tasks.results.same_judge import group_by_judge, identity_difference

    known, other = _fingerprint(root="/ckpt/a"), _fingerprint(root="/ckpt/b")
    unknown = copy.deepcopy(known)
    unknown["roles"]["judge"]["served"] = "not reported"
    a, b, c = (judge_identity(_run(n, fp).summaries[TASK]) for n, fp in (("a", known), ("b", unknown), ("c", other)))
    assert identity_difference(a, b) == [] and identity_difference(b, c) == []
    assert identity_difference(a, c) == ["judge_fingerprint"]
    assert not judge_change.changed(_run("a", known), _run("b", unknown), TASK)
    assert judge_change.changed(_run("a", known), _run("c", other), TASK)
    (group,) = group_by_judge([(b, "t1"), (a, "t2")])
    assert group == (a, ["t1", "t2"])  # the identity that learnt what is served stands for the group
    assert len(group_by_judge([(a, "t1"), (c, "t2")])) == 2
