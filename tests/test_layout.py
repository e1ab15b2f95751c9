"""The packages' one-way arrows (docs/architecture.md), read from the source with ``ast``.

Nothing is imported: each module's import statements (module level or inside a
function) are read, so an import added anywhere in a module fails here. Two rules: no
package imports one above it (``FORBIDDEN``), and no two modules of the project import
each other, directly or around a longer circle.
"""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# package -> top-level packages its modules must not import
FORBIDDEN = {
    "schemas": {"store", "algorithms", "transforms", "query", "pipelines", "validation", "evidex"},
    "store": {"query", "pipelines", "transforms", "validation", "evidex", "algorithms"},
    "algorithms": {"apache_beam", "store", "transforms", "pipelines", "query", "validation"}
    | {"evidex"},
    "transforms": {"query", "pipelines", "validation", "evidex", "benchmarks"},
    "query": {"transforms", "pipelines", "validation", "evidex", "apache_beam"},
    "validation": {"transforms", "pipelines", "evidex", "benchmarks"},
    "pipelines": {"evidex", "benchmarks"},
    "evidex": {"benchmarks"},
}
PACKAGES = sorted({*FORBIDDEN, "benchmarks"})
"""Every package of the project, for the circles check."""


def import_statements(path: Path, root: Path = REPO) -> list[tuple[str, list[str]]]:
    """Each import statement of ``path`` (under ``root``, anywhere in it) as ``(module,
    names)``: ``import a.b`` is ``("a.b", [])``, ``from .x import y`` in package ``p`` is
    ``("p.x", ["y"])`` (relative imports resolved)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((name, [alias.name for alias in node.names]))
    return found


def imported_modules(path: Path, root: Path = REPO) -> set[str]:
    """Every absolute module name that ``path`` (under ``root``) imports, relative
    imports resolved."""
    return {module for module, _ in import_statements(path, root)}


def modules_of(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_every_layered_package_has_modules(package):
    assert modules_of(package), f"{package}/ holds no modules: was it renamed?"


@pytest.mark.parametrize(
    "path",
    [path for package in sorted(FORBIDDEN) for path in modules_of(package)],
    ids=lambda path: str(path.relative_to(REPO)),
)
def test_imports_point_down_the_layers(path):
    package = path.relative_to(REPO).parts[0]
    wrong = sorted(
        name for name in imported_modules(path) if name.split(".")[0] in FORBIDDEN[package]
    )
    assert not wrong, (
        f"{path.relative_to(REPO)} imports {', '.join(wrong)}: {package}/ must not import "
        f"{', '.join(sorted(FORBIDDEN[package]))} (see docs/architecture.md)"
    )


def test_the_reader_sees_imports_inside_functions_and_relative_ones(tmp_path):
    module = tmp_path / "query" / "probe.py"
    module.parent.mkdir()
    module.write_text(
        "import numpy as np\n"
        "from . import fusion\n"
        "from .bundle import LoadedBundle\n"
        "def f():\n"
        "    from transforms.ann import build_index\n"
        "    import pipelines.build_index\n"
    )
    assert imported_modules(module, root=tmp_path) == {
        "numpy",
        "query",
        "query.bundle",
        "transforms.ann",
        "pipelines.build_index",
    }


def module_name(path: Path, root: Path = REPO) -> str:
    """``store/bundles.py`` -> ``store.bundles``; a package's ``__init__.py`` -> the package."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path, known: set[str], root: Path = REPO) -> set[str]:
    """The modules of ``known`` that ``path`` imports: ``from pkg import mod`` counts as an
    import of ``pkg.mod`` when that is a module (else of ``pkg``), and ``import a.b.c`` as one
    of the longest known prefix (the module a name lives in)."""
    found: set[str] = set()
    for module, imported in import_statements(path, root):
        names = [f"{module}.{n}" if f"{module}.{n}" in known else module for n in imported]
        for name in names or [module]:
            parts = name.split(".")
            prefixes = (".".join(parts[:i]) for i in range(len(parts), 0, -1))
            match = next((p for p in prefixes if p in known), None)
            if match is not None:
                found.add(match)
    return found


def import_graph(root: Path = REPO, packages: list[str] = PACKAGES) -> dict[str, set[str]]:
    """module -> the project's modules it imports (itself left out)."""
    paths = {
        module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))
    }
    known = set(paths)
    return {name: module_imports(path, known, root) - {name} for name, path in paths.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_two_modules_import_each_other():
    found = circles(import_graph())
    assert not found, "import circles (docs/architecture.md): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_the_circles_check_finds_a_circle_through_a_package_and_a_function(tmp_path):
    for rel, text in {
        "store/__init__.py": "from store import bundles\n",
        "store/bundles.py": "def f():\n    from store.segments import own_parts\n",
        "store/segments.py": "from .bundles import f\nimport store.config\n",
        "store/config.py": "X = 1\n",
        "query/__init__.py": "",
        "query/reader.py": "from store import config, segments\n",
    }.items():
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = import_graph(tmp_path, ["store", "query"])
    assert graph["query.reader"] == {"store.config", "store.segments"}
    assert circles(graph) == [["store.bundles", "store.segments"]]


def test_the_longest_modules_named_for_the_test_order_exist():
    from tests.conftest import LONGEST_MODULES

    missing = [name for name in LONGEST_MODULES if not (REPO / name).is_file()]
    assert not missing, f"tests/conftest.py LONGEST_MODULES names missing modules: {missing}"
