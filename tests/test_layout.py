"""The package's shape: one benchmark, one folder; the generic tools in folders named for what users do; layers
that import only downwards; no circle; no module too long to read.

Why: a tool that names a benchmark learns it again (its files, its wording, its rules), and the next benchmark or
host framework must then touch it too.  So the code of every generic tool (names and string literals, not
docstrings or comments) is read token by token for a benchmark's name.  And a newcomer finds a command's code by
the folder named for it (docs/development.md#layout) only while the top level stays small, every folder says what
it is for, and an import never climbs from a lower layer to a higher one.  Pure reads: fast.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "emo_tasks"
#: The folders of generic tools (every module in them is generic), and the generic modules elsewhere.
GENERIC_FOLDERS = ("results", "judging", "gate", "site")
GENERIC = tuple(
    sorted(str(p.relative_to(PACKAGE).with_suffix("")) for f in GENERIC_FOLDERS for p in (PACKAGE / f).glob("*.py"))
) + ("vlmeval/__init__", "vlmeval/runfolder", "common", "datafiles", "images", "settings", "subset", "cliargs")


def _benchmark_folders() -> tuple[str, ...]:
    """Each registered benchmark's folder (the package its hooks live in): the registry says which there are, so a
    benchmark added with its folder and its line in `_MODULES` is checked with no edit here."""
    from emo_tasks.benchmarks import all_benchmarks

    return tuple(b.hooks.split(".")[1] for b in all_benchmarks())


def _names_pattern() -> re.Pattern[str]:
    """Every registered benchmark's key and folder name ("_" matching "-" too: export formats use dashes)."""
    from emo_tasks.benchmarks import _MODULES

    names = {*_MODULES, *_benchmark_folders()}
    return re.compile("|".join(sorted(re.escape(n).replace("_", "[_-]") for n in names)), re.IGNORECASE)


NAMES = _names_pattern()


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
    """Each registered benchmark's folder holds its hooks, run state, scoring, registry entry and view;
    its export formats and judge ratings are modules of its own folder."""
    from emo_tasks.benchmarks import all_benchmarks, load_object

    for bench in all_benchmarks():
        folder = bench.hooks.rsplit(".", 1)[0]
        for part in ("hooks", "run_state", "scoring", "registry", "view"):
            assert (ROOT / folder.replace(".", "/") / f"{part}.py").is_file(), (bench.key, part)
        for fmt, spec in bench.exports.items():
            assert spec.startswith(folder + "."), (fmt, spec)
            assert callable(load_object(spec))
        assert not bench.judge_ratings or bench.judge_ratings.startswith(folder + ".")
        assert bench.view_samples.startswith(folder + ".")


# ------------------------------------------------------------------------------------------------ the house
#: Layers, lowest first: a module may import its own layer or a lower one, never a higher one.  The judge engine;
#: the benchmark kit and the command line's helpers at the top level; reading runs; judging them; gating on them;
#: the VLMEvalKit host; the benchmarks; the results site; the command line.
LAYERS = ("judges", "emo_tasks", "results", "judging", "gate", "vlmeval", "benchmark", "site", "cli")
BENCHMARK_FOLDERS = _benchmark_folders()


def _modules() -> dict[str, Path]:
    out = {}
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "judges").rglob("*.py")]:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def layer(module: str) -> int:
    """The layer of a module (`LAYERS`)."""
    parts = module.split(".")
    if parts[0] == "judges":
        return LAYERS.index("judges")
    folder = len(parts) > 1 and (PACKAGE / parts[1]).is_dir()  # a folder's __init__ is of the folder's layer
    if len(parts) == 1 or (not folder and parts[1] not in ("cli", "__main__")) or parts[1] in ("models", "tasks"):
        return LAYERS.index("emo_tasks")
    name = "benchmark" if parts[1] in BENCHMARK_FOLDERS else "cli" if parts[1] == "__main__" else parts[1]
    return LAYERS.index(name)


def import_edges() -> set[tuple[str, str]]:
    """(importer, imported) over every import of the package and the engine, at module level or inside a function
    (a lazy import is still a dependency), relative ones resolved."""
    modules = _modules()
    edges = set()
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([base] if base else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add((name, target))
    return edges


def circles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The import circles (strongly connected groups of two or more modules); a package importing its own
    submodules (an `__init__` handing names on) is no circle."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        if not b.startswith(a + "."):
            graph.setdefault(a, set()).add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_and_no_import_upward() -> None:
    edges = import_edges()
    assert circles(edges) == []
    upward = sorted(f"{a} -> {b}" for a, b in edges if layer(a) < layer(b))
    assert upward == [], "an import from a lower layer to a higher one (tests/test_layout.py LAYERS)"


def test_the_house_checks_see_a_circle_and_an_upward_import() -> None:
    assert circles({("a", "b"), ("b", "c"), ("c", "a"), ("p", "p.q")}) == [["a", "b", "c"]]
    assert layer("emo_tasks.results.reader") < layer("emo_tasks.gate.compare") < layer("emo_tasks.cli")
    assert layer("emo_tasks.common") < layer("emo_tasks.results.report") < layer("emo_tasks.mvei.hooks")
    assert layer("judges.engine") < layer("emo_tasks.settings")


def test_the_top_level_is_the_kit_and_the_entry_points() -> None:
    """At most 12 modules at the top of the package; the generic tools live in folders named for what users do."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top


def test_every_folder_says_what_it_is_for() -> None:
    for folder in sorted(p.parent for p in PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"{folder.name}/__init__.py: a docstring saying what the folder is for"


def test_no_module_is_too_long_to_read() -> None:
    """No module over 700 lines in the package or the judge engine (tests and benchmarks aside)."""
    long = {
        name: n for name, path in _modules().items() if (n := len(path.read_text(encoding="utf-8").splitlines())) > 700
    }
    assert long == {}
