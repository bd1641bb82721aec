"""The README and docs/ stay readable and connected: short README, its two commands, no broken link or anchor.

Why: the README is the newcomer's entry point and links into docs/ for the depth. A renamed heading or a moved
file silently breaks those links, so every relative link and `#anchor` is resolved here (anchors with GitHub's
heading-slug rule). Pure file reads: part of the fast tier.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 150

INSTALL_AND_RUN = (
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[dev]" && '
    "lmms-eval --model dummy --tasks mme_emotion_sample"
)
FAST_TESTS = 'python -m pytest -m "not slow"'
ALL_TESTS = "python -m pytest"

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
# [text](target) or ![alt](target), with an optional "title"; images count as links too.
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")


def doc_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def markdown_files() -> list[Path]:
    return [README, *doc_pages()]


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (code may show headings and links that are not ones)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lowercased; punctuation dropped except hyphens,
    underscores and spaces; spaces become hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = _INLINE_CODE.sub(lambda m: m.group(2), text)
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a file; repeated headings get -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    result = set()
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def links(path: Path) -> list[str]:
    """Every link target in a file's prose (inline code spans are not links)."""
    targets = []
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        ref = _REF_DEF.match(line)
        if ref:
            targets.append(ref.group(1))
            continue
        targets.extend(m.group(1) for m in _LINK.finditer(_INLINE_CODE.sub("", line)))
    return targets


def _is_external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith("//")


def broken_links(path: Path) -> list[str]:
    """The relative links of `path` that do not resolve, each with the reason."""
    problems = []
    for target in links(path):
        if _is_external(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{target}: no file {dest}")
            continue
        if anchor:
            if dest.suffix.lower() != ".md":
                problems.append(f"{target}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(dest):
                problems.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
    return problems


# --------------------------------------------------------------------------------------------------- the checks


def test_docs_folder_has_pages() -> None:
    assert doc_pages(), "docs/*.md is missing"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    problems = broken_links(path)
    assert not problems, f"broken links in {path.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_readme_is_short() -> None:
    n_lines = len(README.read_text(encoding="utf-8").splitlines())
    assert n_lines <= MAX_README_LINES, f"README.md has {n_lines} lines; keep it at most {MAX_README_LINES}"


def test_readme_has_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    for command in (INSTALL_AND_RUN, FAST_TESTS):
        assert command in text, f"README.md lost the command: {command}"
    # the whole suite: `python -m pytest` on its own, not only as the prefix of the fast tier
    assert re.search(r"python -m pytest\s*(?:$|#)", text, re.MULTILINE), f"README.md lost the command: {ALL_TESTS}"


def test_every_docs_page_is_linked_from_readme() -> None:
    linked = {
        (README.parent / t.partition("#")[0]).resolve()
        for t in links(README)
        if not _is_external(t) and t.partition("#")[0]
    }
    missing = [p.name for p in doc_pages() if p.resolve() not in linked]
    assert not missing, f"docs pages not linked from README.md: {missing}"


# ------------------------------------------------------------------------------------- the checker checks itself


def test_slug_rule_matches_github() -> None:
    assert github_slug("Offline mode (`EMO_JUDGE=offline`)") == "offline-mode-emo_judgeoffline"
    assert github_slug("The `judges` name clash") == "the-judges-name-clash"
    assert github_slug("What a CPU user needs, and the traps") == "what-a-cpu-user-needs-and-the-traps"
    assert github_slug("Leaderboards and CI: the `emo-tasks` command") == "leaderboards-and-ci-the-emo-tasks-command"


def test_checker_catches_broken_links(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A section\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n"
        "[ok](other.md) [ok](other.md#a-section) [ok](#page) [web](https://example.com/x.md)\n"
        "`[not a link](nowhere.md)`\n"
        "```\n[in code](nowhere.md)\n```\n"
        "[bad file](missing.md) [bad anchor](other.md#no-such-section) [bad local](#nope)\n",
        encoding="utf-8",
    )
    problems = broken_links(page)
    assert [p.split(":")[0] for p in problems] == ["missing.md", "other.md#no-such-section", "#nope"]


def _dotted_names(section: str) -> list[str]:
    """The `module.name` code names a docs/development.md section gives (relative to `emo_tasks`, or `judges.`)."""
    text = (DOCS / "development.md").read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"`([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`", body)
    files = (".py", ".md", ".yml", ".yaml", ".json")
    # utils.py is loaded by lmms-eval per YAML folder; file names are not code names
    return [n for n in names if not n.startswith("utils.") and not n.endswith(files)]


def _resolves(name: str) -> bool:
    import importlib

    parts = name.split(".")
    if parts[0] not in ("emo_tasks", "judges"):  # the judge engine is named from its own package
        parts = ["emo_tasks", *parts]
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


@pytest.mark.parametrize("section", ["How data flows", "Adding a benchmark"])
def test_development_data_flow_names_exist(section: str) -> None:
    """Every function docs/development.md names in the data flow is a real one (a rename breaks this test)."""
    names = _dotted_names(section)
    assert len(names) >= (25 if section == "How data flows" else 1)
    missing = [n for n in names if not _resolves(n)]
    assert not missing, f"docs/development.md '{section}' names code that does not exist: {missing}"
    assert not _resolves("mme_emotion.hooks.no_such_function")
