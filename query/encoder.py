"""Query embedding: the bundle's own ONNX encoder, or its sentence-transformers model.

A bundle built by this version carries its query encoder (``encoder/model.onnx`` and
``encoder/tokenizer.json``, see :mod:`pipelines.encoder_artifact`): the model exported
to ONNX and checked against PyTorch at build time. :class:`BundledEncoder` runs it
with ONNX Runtime and the ``tokenizers`` library only, so answering a query imports
neither PyTorch nor transformers nor sentence-transformers.

Older bundles (and ``--query-encoder torch``) go through :class:`QueryEncoder`, which
wraps the loaded sentence-transformers model: one short query through PyTorch costs
25-35 ms on two cores, mostly framework overhead, so the model is exported to an
in-memory ONNX graph when the bundle is opened (about 2 s) and used once it
reproduces the PyTorch vectors on probe texts to within ``MAX_DEVIATION``; otherwise
(or without ``onnxruntime``) the query is embedded by PyTorch and the reason is logged.
"""

import io
import logging
import os
import threading
import warnings
from typing import Any, Literal

import numpy as np

logger = logging.getLogger(__name__)

Backend = Literal["auto", "bundled", "onnx", "torch"]
BACKENDS: tuple[str, ...] = ("auto", "bundled", "onnx", "torch")
"""How a bundle's queries are embedded: every choice but ``torch`` uses the bundle's own
encoder when it has one. Without one, ``bundled`` and ``torch`` use PyTorch, ``onnx``
exports the model at load, ``auto`` exports it when the export matches PyTorch."""

MAX_DEVIATION = 1e-4
"""Largest absolute difference allowed between an in-memory ONNX export and PyTorch."""

OPSET = 17
"""ONNX operator set of exported graphs."""

PROBES = (
    "a",
    "Is UPI Lite capped at 500 rupees per transaction in India?",
    "0-dimensional biomaterials show inductive properties.",
    "  What does heapq.heappush() return?\n",
    "résumé naïve café — «quoted» ünïcode, 東京",
    " ".join(["The committee reviewed the quarterly report and approved the budget."] * 40),
)
"""Texts an exported graph must reproduce: one token, typical queries, surrounding
whitespace, accents and CJK, one longer than the model's window (truncated)."""


_INHERITED: list[Any] = []
"""ONNX Runtime sessions a forked process inherited, kept alive on purpose (see
:meth:`BundledEncoder.reopen`)."""


class EncoderError(RuntimeError):
    """The requested query-embedding backend cannot be used with this model."""


class QueryEncoder:
    """Unit-norm query vectors from a loaded sentence-transformers model.

    Example:
        >>> encoder = QueryEncoder.load(model)          # ONNX when it matches PyTorch
        >>> encoder.backend, encoder.encode("what causes tides?").shape
        ('onnx', (384,))
    """

    def __init__(self, model: Any, session: Any = None, inputs: tuple[str, ...] = ()) -> None:
        self.model = model
        self._features = _preprocessor(model)
        self._session = session
        self._inputs = inputs
        self._lock = threading.Lock()  # fast tokenizers refuse concurrent calls

    @property
    def backend(self) -> str:
        return "onnx" if self._session is not None else "torch"

    @classmethod
    def load(cls, model: Any, backend: Backend = "auto") -> "QueryEncoder":
        """Wrap ``model``, exporting it to ONNX unless ``backend`` is ``"torch"``.

        Raises:
            EncoderError: ``backend="onnx"`` and ONNX Runtime is missing, the export
                fails, or the exported graph does not reproduce the model's vectors.
            ValueError: an unknown backend.
        """
        if backend not in BACKENDS:
            raise ValueError(f"query encoder must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if backend in ("torch", "bundled"):
            return cls(model)
        try:
            return _exported(model)
        except EncoderError as exc:
            if backend == "onnx":
                raise
            logger.warning("query embedding by PyTorch: %s", exc)
            return cls(model)

    @property
    def dimension(self) -> int:
        return int(self.model.get_embedding_dimension())

    def vocab(self) -> dict[str, int]:
        """The model tokenizer's vocabulary (word piece -> id)."""
        tokenizer = getattr(self.model, "tokenizer", None)
        return dict(tokenizer.get_vocab()) if tokenizer is not None else {}

    def encode(self, text: str) -> np.ndarray:
        """The unit-norm vector of ``text`` (float32, the model's dimension)."""
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: list[str]) -> np.ndarray:
        """Unit-norm vectors of ``texts`` in one forward pass (n x dimension, float32).

        The texts are padded to the longest, so callers keep batches of similar length.
        """
        if not texts:
            return np.empty((0, self.model.get_embedding_dimension()), dtype=np.float32)
        if self._session is None:
            with self._lock:
                vectors = self.model.encode(texts, normalize_embeddings=True)
            return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)
        with self._lock:
            features = self._features(texts)
        feed = {name: features[name].numpy().astype(np.int64) for name in self._inputs}
        vectors = np.asarray(self._session.run(None, feed)[0], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)


def _preprocessor(model: Any) -> Any:
    """The model's text -> tensors step (sentence-transformers 6 renamed ``tokenize``
    to ``preprocess``; accept either)."""
    return getattr(model, "preprocess", None) or model.tokenize


def export_onnx(model: Any) -> tuple[bytes, tuple[str, ...]]:
    """The sentence-transformers ``model`` (transformer, pooling, normalization) as an
    ONNX graph, and the names of its inputs in order.

    Raises:
        EncoderError: PyTorch's exporter cannot trace the model.
    """
    import torch

    features = _preprocessor(model)([PROBES[1]])
    inputs = tuple(
        name for name in ("input_ids", "attention_mask", "token_type_ids") if name in features
    )
    graph = io.BytesIO()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _pooled_module(model, inputs).eval(),
                tuple(features[name] for name in inputs),
                graph,  # type: ignore[arg-type]  # the TorchScript exporter writes to files
                input_names=list(inputs),
                output_names=["sentence_embedding"],
                dynamic_axes={name: {0: "batch", 1: "tokens"} for name in inputs},
                opset_version=OPSET,
                dynamo=False,
            )
    except Exception as exc:  # any tracing failure means: this model stays on PyTorch
        raise EncoderError(f"cannot export {type(model).__name__} to ONNX: {exc}") from exc
    return graph.getvalue(), inputs


def deviation(encoder: "QueryEncoder | BundledEncoder", model: Any) -> float:
    """Largest vector-component difference between ``encoder`` and the PyTorch ``model``
    on :data:`PROBES`, one text at a time and all in one padded batch."""
    expected = model.encode(list(PROBES), normalize_embeddings=True)
    one_by_one = np.vstack([encoder.encode(text) for text in PROBES])
    padded = encoder.encode_batch(list(PROBES))  # padding must not move a vector either
    return float(max(np.abs(one_by_one - expected).max(), np.abs(padded - expected).max()))


def _exported(model: Any) -> QueryEncoder:
    """Export ``model`` to an in-memory ONNX graph and check it against PyTorch."""
    try:
        import onnxruntime  # noqa: F401  # the session below needs it
        import torch  # noqa: F401
    except ImportError as exc:
        raise EncoderError(f"onnxruntime is not installed ({exc})") from exc
    graph, inputs = export_onnx(model)
    encoder = QueryEncoder(model, session(graph), inputs)
    found = deviation(encoder, model)
    if not found <= MAX_DEVIATION:
        raise EncoderError(
            f"the ONNX graph deviates from PyTorch by {found:.2e} (> {MAX_DEVIATION:.0e})"
        )
    return encoder


def session(graph: bytes, threads: int = 0) -> Any:
    """An ONNX Runtime CPU session over ``graph`` (bytes: a graph that names external
    data files cannot load them). ``threads`` caps intra-op threads (0: one per core)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.inter_op_num_threads = 1
    options.intra_op_num_threads = threads
    # Idle pool threads sleep instead of spinning: a spinning thread holds a core that the
    # server's other work (its Python thread, other workers, the clients) needs.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def tokenizer_json(model: Any) -> str:
    """The model's fast tokenizer as a ``tokenizers`` JSON document, set to truncate at the
    model's window and pad batches to their longest text, as the model does.

    Raises:
        EncoderError: the model has no fast (Rust) tokenizer to serialize.
    """
    backend = getattr(getattr(model, "tokenizer", None), "backend_tokenizer", None)
    if backend is None:
        raise EncoderError(f"{type(model).__name__} has no fast tokenizer to bundle")
    from tokenizers import Tokenizer

    copy = Tokenizer.from_str(backend.to_str())  # never change the model's own tokenizer
    copy.enable_truncation(max_length=int(model.max_seq_length or 512))
    pad = model.tokenizer.pad_token
    copy.enable_padding(pad_id=int(model.tokenizer.pad_token_id or 0), pad_token=pad or "[PAD]")
    return str(copy.to_str())


class BundledEncoder:
    """Unit-norm query vectors from a bundle's own ONNX graph and tokenizer file.

    Imports only ``onnxruntime`` and ``tokenizers``. ``digest`` names the files
    (their manifest checksums), so a reader can keep one encoder across bundles
    that carry the same one.

    Example:
        >>> encoder = query.bundle.open_encoder("/srv/evidex/bundles/<id>", manifest)
        >>> encoder.encode("what causes tides?").shape
        (384,)
    """

    backend = "onnx (bundled)"

    def __init__(
        self,
        session: Any,
        tokenizer: Any,
        inputs: tuple[str, ...],
        digest: str,
        graph: bytes = b"",
        threads: int = 0,
    ):
        self._session = session
        self._tokenizer = tokenizer
        self._inputs = inputs
        self._graph = graph
        self._threads = threads
        self._pid = os.getpid()
        self.digest = digest
        self.dimension = int(session.get_outputs()[0].shape[-1])

    def reopen(self, threads: int | None = None) -> None:
        """A new ONNX Runtime session for this process (after a fork: a session's thread
        pool does not survive one), with ``threads`` intra-op threads if given."""
        if threads is not None:
            self._threads = threads
        if self._pid != os.getpid():
            # A session made before a fork must never be destroyed in the child: its
            # destructor would wait forever for pool threads that only the parent has.
            _INHERITED.append(self._session)
        if self._graph:
            self._session = session(self._graph, self._threads)
        self._pid = os.getpid()

    @classmethod
    def from_bytes(
        cls,
        graph: bytes,
        tokenizer: str,
        inputs: tuple[str, ...],
        digest: str = "",
        threads: int = 0,
    ) -> "BundledEncoder":
        """An encoder over an ONNX graph and a ``tokenizers`` JSON document."""
        from tokenizers import Tokenizer

        return cls(
            session(graph, threads), Tokenizer.from_str(tokenizer), inputs, digest, graph, threads
        )

    def encode(self, text: str) -> np.ndarray:
        """The unit-norm vector of ``text`` (float32, the model's dimension)."""
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: list[str]) -> np.ndarray:
        """Unit-norm vectors of ``texts`` (n x dimension, float32), padded to the longest."""
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        if self._pid != os.getpid():
            self.reopen()
        encodings = self._tokenizer.encode_batch(texts)
        columns = {
            "input_ids": [e.ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
        }
        feed = {name: np.asarray(columns[name], dtype=np.int64) for name in self._inputs}
        vectors = np.asarray(self._session.run(None, feed)[0], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)

    def vocab(self) -> dict[str, int]:
        """The tokenizer's vocabulary (word piece -> id)."""
        return dict(self._tokenizer.get_vocab())


def _pooled_module(model: Any, inputs: tuple[str, ...]) -> Any:
    import torch

    class Pooled(torch.nn.Module):
        """Positional tensors in, the model's ``sentence_embedding`` out (traceable)."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: Any) -> Any:
            return self.model(dict(zip(inputs, tensors, strict=True)))["sentence_embedding"]

    return Pooled()
