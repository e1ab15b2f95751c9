import logging
import os

import pytest

from transforms.offload import SplitRunner, available_cores, split

_SETUP_PID = "unset"


def _remember_pid() -> None:
    global _SETUP_PID
    _SETUP_PID = str(os.getpid())


def _tag(items: list[int]) -> list[tuple[int, str, str]]:
    """Each item with the pid that ran it and the pid its initializer saw."""
    return [(item, str(os.getpid()), _SETUP_PID) for item in items]


def _fail_on_seven(items: list[int]) -> list[tuple[int, str, str]]:
    if 7 in items:
        raise ValueError("seven")
    return _tag(items)


def _dies(items: list[int]) -> list[tuple[int, str, str]]:
    os._exit(3)  # the helper process disappears mid-task


def test_split_keeps_order_and_sizes():
    assert split([1, 2, 3, 4, 5], 2) == [[1, 2, 3], [4, 5]]
    assert split([1, 2], 4) == [[1], [2]]
    assert split([], 3) == []
    pieces = split(list(range(101)), 3)
    assert [x for piece in pieces for x in piece] == list(range(101))
    assert max(map(len, pieces)) - min(map(len, pieces)) <= 1
    with pytest.raises(ValueError, match="positive"):
        split([1], 0)
    assert available_cores() >= 1


def test_helpers_start_after_the_threshold_and_share_the_work():
    runner = SplitRunner(helpers=1, remote=_tag, initializer=_remember_pid, start_after=4)
    try:
        here = str(os.getpid())
        first = runner.run([1, 2, 3, 4], _tag)
        assert not runner.active
        assert {pid for _, pid, _ in first} == {here}
        starting = runner.run(list(range(5, 10)), _tag)  # starts the helper, runs here
        assert runner.active
        assert [item for item, _, _ in starting] == list(range(5, 10))
        assert runner.wait_ready(timeout=60)
        second = runner.run(list(range(10, 20)), _tag)
        assert [item for item, _, _ in second] == list(range(10, 20))  # input order
        mine, theirs = second[:5], second[5:]
        assert {pid for _, pid, _ in mine} == {here}
        helper = {pid for _, pid, _ in theirs}
        assert len(helper) == 1 and here not in helper
        assert {seen for _, _, seen in theirs} == helper  # its initializer ran there
    finally:
        runner.close()
    assert not runner.active


def test_a_failing_helper_hands_its_part_back_and_is_not_restarted(caplog):
    runner = SplitRunner(helpers=1, remote=_fail_on_seven, initializer=_remember_pid)
    here = str(os.getpid())
    with caplog.at_level(logging.WARNING, logger="transforms.offload"):
        runner.run([0], _tag)  # starts the helper
        assert runner.wait_ready(timeout=60)
        results = runner.run([1, 2, 3, 7], _tag)
    assert [item for item, _, _ in results] == [1, 2, 3, 7]
    assert {pid for _, pid, _ in results} == {here}
    assert "ValueError: seven" in caplog.text
    assert not runner.active
    assert {pid for _, pid, _ in runner.run([8, 9], _tag)} == {here}
    assert not runner.active


def test_a_helper_that_dies_does_not_hang_or_lose_items(caplog):
    runner = SplitRunner(helpers=1, remote=_dies, initializer=_remember_pid)
    with caplog.at_level(logging.WARNING, logger="transforms.offload"):
        runner.run([0], _tag)  # starts the helper
        assert runner.wait_ready(timeout=60)
        results = runner.run(list(range(6)), _tag)
    assert [item for item, _, _ in results] == list(range(6))
    assert "BrokenProcessPool" in caplog.text
    assert not runner.active


def _broken_setup() -> None:
    raise RuntimeError("no model here")


def test_work_runs_here_while_helpers_start_and_a_failed_start_stops_them(caplog):
    runner = SplitRunner(helpers=1, remote=_tag, initializer=_broken_setup)
    here = str(os.getpid())
    with caplog.at_level(logging.WARNING, logger="transforms.offload"):
        assert {pid for _, pid, _ in runner.run(list(range(4)), _tag)} == {here}
        assert runner.wait_ready(timeout=60) is False
        results = runner.run(list(range(4, 8)), _tag)
    assert [item for item, _, _ in results] == list(range(4, 8))
    assert {pid for _, pid, _ in results} == {here}
    assert "failed to start" in caplog.text
    assert not runner.active


def test_negative_helpers_are_refused():
    with pytest.raises(ValueError, match="zero or more"):
        SplitRunner(helpers=-1, remote=_tag, initializer=_remember_pid)


def _import_beam_gcp_clients() -> None:
    # Importing this module logs "apitools not found ..." through logging.warning when
    # the optional GCP clients are absent, as in evidex's own installs.
    import apache_beam.io.gcp.internal.clients.bigquery  # noqa: F401


def test_helpers_do_not_print_beams_import_time_gcp_warning(capfd):
    runner = SplitRunner(helpers=1, remote=_tag, initializer=_import_beam_gcp_clients)
    try:
        runner.run([1, 2], _tag)  # starts the helper, whose initializer imports Beam's client
        assert runner.wait_ready(timeout=60)
        results = runner.run(list(range(8)), _tag)
        assert any(pid != str(os.getpid()) for _, pid, _ in results)  # it ran in the helper
    finally:
        runner.close()
    err = capfd.readouterr().err
    assert "apitools not found" not in err
    assert "WARNING:root" not in err
