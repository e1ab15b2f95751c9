"""Query embedding: the bundle's sentence-transformers model, run by ONNX Runtime.

One short query through PyTorch costs 25-35 ms on two cores, mostly framework
overhead; the same graph exported to ONNX and run by ONNX Runtime costs about a
third of that. The export happens in memory when a bundle is opened (about 2 s),
and is only used after it reproduces the PyTorch vectors on probe texts to
within ``MAX_DEVIATION``; otherwise (or without ``onnxruntime``) the query is
embedded by PyTorch and the reason is logged.
"""

import io
import logging
import threading
import warnings
from typing import Any, Literal

import numpy as np

logger = logging.getLogger(__name__)

Backend = Literal["auto", "onnx", "torch"]
BACKENDS: tuple[str, ...] = ("auto", "onnx", "torch")

MAX_DEVIATION = 1e-4
"""Largest absolute difference allowed between ONNX and PyTorch vector components."""

PROBES = (
    "a",
    "Is UPI Lite capped at 500 rupees per transaction in India?",
    "0-dimensional biomaterials show inductive properties.",
    " ".join(["The committee reviewed the quarterly report and approved the budget."] * 40),
)
"""Texts the exported graph must reproduce: one token, typical queries, one truncated."""


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
        if backend == "torch":
            return cls(model)
        try:
            return _exported(model)
        except EncoderError as exc:
            if backend == "onnx":
                raise
            logger.warning("query embedding by PyTorch: %s", exc)
            return cls(model)

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


def _exported(model: Any) -> QueryEncoder:
    """Export ``model`` to an in-memory ONNX graph and check it against PyTorch."""
    try:
        import onnxruntime as ort
        import torch
    except ImportError as exc:
        raise EncoderError(f"onnxruntime is not installed ({exc})") from exc
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
                opset_version=17,
                dynamo=False,
            )
    except Exception as exc:  # any tracing failure means: this model stays on PyTorch
        raise EncoderError(f"cannot export {type(model).__name__} to ONNX: {exc}") from exc
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(graph.getvalue(), options, providers=["CPUExecutionProvider"])
    encoder = QueryEncoder(model, session, inputs)
    expected = model.encode(list(PROBES), normalize_embeddings=True)
    one_by_one = np.vstack([encoder.encode(text) for text in PROBES])
    padded = encoder.encode_batch(list(PROBES))  # padding must not move a vector either
    deviation = float(max(np.abs(one_by_one - expected).max(), np.abs(padded - expected).max()))
    if not deviation <= MAX_DEVIATION:
        raise EncoderError(
            f"the ONNX graph deviates from PyTorch by {deviation:.2e} (> {MAX_DEVIATION:.0e})"
        )
    return encoder


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
