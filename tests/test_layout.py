"""The packages' one-way arrows (docs/architecture.md), read from the source with ``ast``.

Nothing is imported: each module's import statements (module level or inside a
function) are read, so an import added anywhere in a module fails here.
"""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# package -> top-level packages its modules must not import
FORBIDDEN = {
    "query": {"transforms", "pipelines", "validation", "evidex", "apache_beam"},
    "store": {"query", "pipelines", "transforms", "validation", "evidex", "algorithms"},
    "algorithms": {"apache_beam", "transforms", "pipelines", "query", "validation", "evidex"},
}


def imported_modules(path: Path, root: Path = REPO) -> set[str]:
    """Every absolute module name that ``path`` (under ``root``) imports, relative
    imports resolved."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.add(name)
    return found


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
