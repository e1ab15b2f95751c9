import shutil
import threading

import pytest

from store.activation import (
    ActivationConflictError,
    ActivationError,
    activate,
    read_active,
    read_history,
    rollback,
)
from store.bundles import bundle_path, list_bundles, resolve_root
from validation import validate_bundle


def test_root_resolution_order(monkeypatch, tmp_path):
    monkeypatch.delenv("EVIDEX_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert resolve_root() == str(tmp_path / ".evidex")
    monkeypatch.setenv("EVIDEX_HOME", str(tmp_path / "home"))
    assert resolve_root() == str(tmp_path / "home")
    assert resolve_root(str(tmp_path / "explicit")) == str(tmp_path / "explicit")


def test_an_unvalidated_bundle_is_refused(fresh_root):
    with pytest.raises(ActivationError, match="has not been validated"):
        activate(str(fresh_root), "b1")
    assert read_active(str(fresh_root)) is None


def test_a_missing_bundle_is_refused(fresh_root):
    with pytest.raises(ActivationError, match="no manifest"):
        activate(str(fresh_root), "nope")


def _two_validated(root) -> None:
    validate_bundle(bundle_path(str(root), "b1"))
    shutil.copytree(bundle_path(str(root), "b1"), bundle_path(str(root), "b2"))


def test_activate_compare_and_swap_history_and_rollback(fresh_root):
    root = str(fresh_root)
    _two_validated(fresh_root)
    assert list_bundles(root) == ["b1", "b2"]
    activate(root, "b1", expected_previous=None)
    with pytest.raises(ActivationConflictError):
        activate(root, "b2", expected_previous=None)
    activate(root, "b2", expected_previous="b1")
    assert read_active(root) == "b2"
    event = rollback(root)
    assert (event["action"], event["bundle_id"], event["previous"]) == ("rollback", "b1", "b2")
    assert read_active(root) == "b1"
    assert [(e["action"], e["bundle_id"]) for e in read_history(root)] == [
        ("activate", "b1"),
        ("activate", "b2"),
        ("rollback", "b1"),
    ]
    with pytest.raises(ActivationError, match="no such bundle"):
        rollback(root, to="b9")


def test_rollback_with_no_history_says_so(fresh_root):
    with pytest.raises(ActivationError, match="nothing to roll back to"):
        rollback(str(fresh_root))


def test_of_two_concurrent_activators_exactly_one_wins(fresh_root):
    root = str(fresh_root)
    _two_validated(fresh_root)
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def contender(bundle_id: str) -> None:
        barrier.wait()
        try:
            activate(root, bundle_id, expected_previous=None)
            outcomes[bundle_id] = "won"
        except ActivationConflictError:
            outcomes[bundle_id] = "conflict"

    threads = [threading.Thread(target=contender, args=(b,)) for b in ("b1", "b2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes.values()) == ["conflict", "won"]
    winner = next(b for b, o in outcomes.items() if o == "won")
    assert read_active(root) == winner
    assert len(read_history(root)) == 1
