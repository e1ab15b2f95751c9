"""Parts of the stream latency benchmark: when arrivals land, and the reader that polls."""

import shutil

import pytest

from benchmarks.stream_latency import Reader, until_phase


@pytest.mark.parametrize(
    ("now", "phase", "wait"),
    [(1003.0, 5.0, 2.0), (1006.0, 5.0, 9.0), (1005.0, 5.0, 0.0), (999.5, 0.25, 0.75)],
)
def test_arrivals_land_at_their_phase_of_the_window_cycle(now, phase, wait):
    assert until_phase(now, phase, 10.0) == pytest.approx(wait)
    assert (now + until_phase(now, phase, 10.0)) % 10.0 == pytest.approx(phase % 10.0)


def test_the_reader_reopens_when_active_moves_and_keeps_its_encoder(
    two_bundle_root, tmp_path, st_model
):
    from store.activation import activate

    root = str(tmp_path / "root")
    shutil.copytree(two_bundle_root, root)
    reader = Reader(root, st_model)
    assert reader.answerable("Danube delta pelicans", "river.md")
    assert not reader.answerable("barn owls hunt at night", "owls.md")
    encoder = reader._reader.current.encoder
    activate(root, "b2")
    assert reader.answerable("barn owls hunt at night", "owls.md")
    assert reader._reader.current.bundle_id == "b2"
    assert reader._reader.current.encoder is encoder  # no second ONNX export
