"""Session-wide fixtures: the real default model and tokenizer, loaded once, and one
small real bundle built with the real pipeline, shared by read-only tests; and the order
in which modules run (the longest first, see ``LONGEST_MODULES``)."""

import os
import shutil
import socket
from pathlib import Path

import pytest

LONGEST_MODULES = (
    "tests/pipelines/test_segment_crash.py",
    "tests/store/test_lifecycle.py",
    "tests/pipelines/test_stream.py",
    "tests/pipelines/test_build_crash.py",
    "tests/pipelines/test_refresh.py",
    "tests/reliability/test_load.py",
    "tests/pipelines/test_object_store.py",
    "tests/pipelines/test_segments.py",
    "tests/test_cli.py",
    "tests/pipelines/test_knowledge_update.py",
)
"""The modules that take longest (each 45 s to 4 min here: kills at many points, 100
activation swaps under eight readers, a minute of HTTP load, streams over real time),
longest first. They run before every other module, so that ``make test``'s workers
(``--dist loadscope``: one module per worker at a time) start them early and fill the
rest of their time with the short ones, instead of one worker finishing alone."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the modules of ``LONGEST_MODULES`` first, in that order; every other test keeps
    its place (no test depends on the order: each builds or copies what it reads)."""
    rank = {name: i for i, name in enumerate(LONGEST_MODULES)}
    root = Path(config.rootpath)

    def key(item: pytest.Item) -> int:
        module = Path(str(item.fspath)).resolve()
        try:
            name = module.relative_to(root).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(name, len(rank))

    items.sort(key=key)  # stable: the rest keep collection order


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

# Six short documents on distinct topics, written by the tests themselves.
TINY_CORPUS = {
    "river.md": "# Rivers\n\nThe Danube flows through ten countries before reaching the Black Sea."
    "\n\nIts delta is a wetland reserve famous for pelicans.",
    "bread.txt": "Sourdough bread rises because wild yeast and lactic acid bacteria ferment the "
    "dough. Bakers feed the starter with flour and water every day.",
    "chess.md": "# Chess openings\n\nThe Sicilian Defence begins with 1.e4 c5 and is the most "
    "popular reply to the king's pawn.\n\n- It leads to sharp, unbalanced games.\n- White often "
    "plays the Open Sicilian with 2.Nf3 and 3.d4.",
    "volcano.txt": "Mount Etna on Sicily is one of the most active volcanoes in the world; its "
    "eruptions are mostly effusive lava flows.",
    "tea.md": "# Tea\n\nGreen tea is steamed or pan-fired soon after picking, which stops "
    "oxidation. Black tea is fully oxidised before drying.",
    "records.jsonl": '{"_id": "bike-1", "title": "Bicycle gears", "text": "A derailleur moves '
    'the chain between sprockets so the rider can change gear while pedalling."}\n'
    '{"_id": "bike-2", "title": "Bicycle brakes", "text": "Disc brakes squeeze a rotor '
    'mounted on the hub and keep working in wet weather."}\n',
}


@pytest.fixture(scope="session")
def model_path() -> str:
    from store.models import default_model_path

    return default_model_path()


@pytest.fixture(scope="session")
def st_model(model_path: str):
    from store.models import load_sentence_transformer

    return load_sentence_transformer(model_path)


@pytest.fixture(scope="session")
def query_encoder(st_model):
    """The default query encoder (ONNX), exported once and shared by bundle loads."""
    from query.encoder import QueryEncoder

    encoder = QueryEncoder.load(st_model, "onnx")
    assert encoder.backend == "onnx"
    return encoder


@pytest.fixture(scope="session")
def token_counter(model_path: str):
    from transforms.chunk import TokenCounter

    return TokenCounter.load(model_path)


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_corpus(directory: Path, files: dict[str, str | bytes]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return directory


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus"), TINY_CORPUS)


@pytest.fixture(scope="session")
def built_root(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle root holding one built (not yet validated) bundle of the tiny corpus."""
    from pipelines.build_index import run

    root = tmp_path_factory.mktemp("root")
    run(["--input", str(tiny_corpus), "--root", str(root)], bundle_id="b1")
    return root


@pytest.fixture
def fresh_root(built_root: Path, tmp_path: Path) -> Path:
    """A private copy of ``built_root`` that a test may change."""
    target = tmp_path / "root"
    shutil.copytree(built_root, target)
    return target


def validate_and_activate(root: str, bundle_id: str) -> None:
    """Validate the bundle ``bundle_id`` under ``root`` (it must pass) and activate it."""
    from store.activation import activate
    from store.bundles import bundle_path
    from validation import validate_bundle

    report = validate_bundle(bundle_path(root, bundle_id))
    assert report.passed, report.failed()
    activate(root, bundle_id)


@pytest.fixture(scope="session")
def validated_root(built_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root whose bundle ``b1`` passed validation and is active."""
    root = tmp_path_factory.mktemp("validated")
    shutil.rmtree(root)
    shutil.copytree(built_root, root)
    validate_and_activate(str(root), "b1")
    return root


OTHER_CORPUS = {
    "owls.md": "# Owls\n\nBarn owls hunt at night and locate mice by sound alone.",
    "glass.txt": "Glass is made by melting sand with soda ash and lime, then cooling it fast.",
    "rust.md": "# Rust\n\nIron rusts when it reacts with oxygen and water to form iron oxide.",
}


@pytest.fixture(scope="session")
def two_bundle_root(validated_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root with two validated bundles of disjoint corpora: ``b1`` (active) and ``b2``."""
    from pipelines.build_index import run
    from store.activation import activate
    from store.bundles import bundle_path
    from validation import validate_bundle

    root = tmp_path_factory.mktemp("two")
    shutil.rmtree(root)
    shutil.copytree(validated_root, root)
    corpus = write_corpus(tmp_path_factory.mktemp("other"), OTHER_CORPUS)
    run(["--input", str(corpus), "--root", str(root)], bundle_id="b2")
    assert validate_bundle(bundle_path(str(root), "b2")).passed
    assert activate(str(root), "b1")["bundle_id"] == "b1"
    return root
