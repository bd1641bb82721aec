"""One benchmark, one folder: the generic tools ask the registry and name no benchmark.

Why: a tool that names a benchmark learns it again (its files, its wording, its rules), and the next benchmark or
host framework must then touch it too.  Here the code of `report`, `export`, `agreement` and `stage` (names and
string literals, not docstrings or comments) is read token by token for a benchmark's name.  Pure reads: fast.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENERIC = ("report", "export", "agreement", "stage",
           "site/__init__", "site/model", "site/media", "site/files", "site/command", "flips", "memo",
           "vlmeval/__init__", "vlmeval/runfolder")  # fmt: skip
NAMES = re.compile(r"mme|mvei|multiemo", re.IGNORECASE)


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def benchmark_names_in_code(source: str) -> list[tuple[int, str]]:
    """(line, token) of every name or string literal outside docstrings that names a benchmark."""
    skip = _docstring_lines(ast.parse(source))
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.NAME, tokenize.STRING) and tok.start[0] not in skip and NAMES.search(tok.string):
            found.append((tok.start[0], tok.string))
    return found


@pytest.mark.parametrize("module", GENERIC)
def test_generic_tools_name_no_benchmark(module: str) -> None:
    source = (ROOT / "emo_tasks" / f"{module}.py").read_text(encoding="utf-8")
    assert benchmark_names_in_code(source) == []


def test_the_check_sees_names_in_code_but_not_in_docstrings_or_comments() -> None:
    source = '"""About MME-Emotion."""\n# mvei here\ndef f():\n    """multiemo"""\n'
    source += '    return "mme-official", multiemo_judge\n'
    assert [t for _, t in benchmark_names_in_code(source)] == ['"mme-official"', "multiemo_judge"]


def test_every_benchmark_folder_has_its_own_parts() -> None:
    """Each registered benchmark's folder holds its hooks, run state, scoring, results (registry entry) and view;
    its export formats and judge ratings are modules of its own folder."""
    from emo_tasks.benchmarks import all_benchmarks, load_object

    for bench in all_benchmarks():
        folder = bench.hooks.rsplit(".", 1)[0]
        for part in ("hooks", "run_state", "scoring", "results", "view"):
            assert (ROOT / folder.replace(".", "/") / f"{part}.py").is_file(), (bench.key, part)
        for fmt, spec in bench.exports.items():
            assert spec.startswith(folder + "."), (fmt, spec)
            assert callable(load_object(spec))
        assert not bench.judge_ratings or bench.judge_ratings.startswith(folder + ".")
        assert bench.view_samples.startswith(folder + ".")
