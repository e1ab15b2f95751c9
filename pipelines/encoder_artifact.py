"""The bundle's query encoder: the embedding model exported to ONNX, with its tokenizer.

Written into staging before the manifest, so both files are checksummed and verified
like every other artifact. The export is checked by running the exact bytes through
the read path's own :class:`query.encoder.BundledEncoder` and comparing the vectors
with the PyTorch model's on :data:`query.encoder.PROBES`; a graph that deviates by
more than ``MAX_DEVIATION`` is not written, and the bundle answers queries through
PyTorch as older bundles do.
"""

import logging
from typing import Any

from query.encoder import (
    OPSET,
    PROBES,
    BundledEncoder,
    EncoderError,
    deviation,
    export_onnx,
    tokenizer_json,
)
from schemas.manifest import ModelFingerprint, QueryEncoderInfo
from store import storage
from store.bundles import ENCODER_GRAPH, ENCODER_TOKENIZER, BundleError, read_manifest

logger = logging.getLogger(__name__)

MAX_DEVIATION = 1e-5
"""Largest vector-component difference from PyTorch a bundled encoder may have."""


class EncoderRefusedError(EncoderError):
    """The exported graph does not reproduce the PyTorch model closely enough."""


def export_encoder(model: Any) -> tuple[bytes, str, QueryEncoderInfo]:
    """Export ``model`` and check the export against it.

    Raises:
        EncoderError: the model cannot be exported or has no fast tokenizer.
        EncoderRefusedError: the export deviates by more than ``MAX_DEVIATION``.
    """
    graph, inputs = export_onnx(model)
    tokenizer = tokenizer_json(model)
    found = deviation(BundledEncoder.from_bytes(graph, tokenizer, inputs), model)
    if not found <= MAX_DEVIATION:
        raise EncoderRefusedError(
            f"the ONNX export deviates from PyTorch by {found:.2e} (> {MAX_DEVIATION:.0e})"
        )
    info = QueryEncoderInfo(
        graph=ENCODER_GRAPH,
        tokenizer=ENCODER_TOKENIZER,
        inputs=list(inputs),
        opset=OPSET,
        max_deviation=found,
        probes=len(PROBES),
    )
    return graph, tokenizer, info


def reuse_encoder(parent: str, staging: str, model: ModelFingerprint) -> QueryEncoderInfo | None:
    """Give ``staging`` the encoder files of the bundle at ``parent`` when it was embedded
    with the same model (a delta build or a stream window): hard links on a local root, a
    copy on an object store. ``None`` when the parent has no encoder or another model."""
    try:
        manifest = read_manifest(parent)
    except BundleError:
        return None
    info = manifest.query_encoder
    if info is None or manifest.model != model:
        return None
    for rel in (info.graph, info.tokenizer):
        storage.reuse_file(storage.join(parent, rel), storage.join(staging, rel))
    logger.info("query encoder: the files of bundle %s, reused", manifest.bundle_id)
    return info


def write_encoder(staging: str, model: Any) -> QueryEncoderInfo | None:
    """Write the checked encoder files into ``staging``; ``None`` (and a warning saying
    why) when the model cannot be bundled, so the build goes on without them."""
    try:
        graph, tokenizer, info = export_encoder(model)
    except EncoderError as exc:
        logger.warning("no query encoder in this bundle (queries will need PyTorch): %s", exc)
        return None
    storage.write_bytes(storage.join(staging, info.graph), graph)
    storage.write_bytes(storage.join(staging, info.tokenizer), tokenizer.encode("utf-8"))
    logger.info(
        "query encoder: ONNX graph of %.1f MB, largest deviation from PyTorch %.1e on %d probes",
        len(graph) / 1e6,
        info.max_deviation,
        info.probes,
    )
    return info
