"""Compaction beside the stream: the merge policy's compaction runs in a child process
while the windows go on, so a window never waits for it.

The child runs ``evidex compact --source S --no-activate`` with the stream's merge policy
(a tiered merge of the small window segments, or a whole merge; then validation). When
it has finished, the stream's next window takes the result (:meth:`BackgroundCompaction.
finished`): if nothing was activated since ``S``, the compacted generation is activated in
``S``'s place (compare-and-swap); otherwise the window *rebases* onto it: it builds on the
compacted generation instead of the active one, so the documents the windows added or
changed meanwhile go into its new segment (read again, their vectors reused from the
windows' segments: nothing is embedded twice) and the windows' segments are left out
(see :func:`pipelines.refresh.refresh`). Readers only ever see whole generations.

The child is killed with the stream (Linux: a parent-death signal); a compaction cut
short leaves its staging directory to the stale-staging sweep, and ``ACTIVE`` as it was.
"""

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

NICENESS = 10
"""How much lower the child's CPU priority is than the stream's: a window, which readers
wait on, gets the cores first, and the merge takes what is left (as search engines
throttle their background merges)."""

# The child lowers its priority, asks the kernel to kill it when the stream dies
# (PR_SET_PDEATHSIG = 1), then runs the evidex command line as ``python -m evidex.cli``
# would.
_CHILD = (
    "import ctypes, os, runpy, signal, sys\n"
    f"os.nice({NICENESS})\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
    "except (AttributeError, OSError):\n"
    "    pass\n"
    "if os.getppid() != int(os.environ['EVIDEX_STREAM_PID']):\n"
    "    sys.exit(1)\n"
    "sys.argv = ['evidex', *sys.argv[1:]]\n"
    "runpy.run_module('evidex.cli', run_name='__main__', alter_sys=True)\n"
)


@dataclass(frozen=True)
class Compacted:
    """A finished, validated compaction the stream has not taken yet."""

    bundle_id: str
    """The compacted generation (validated, not activated)."""
    source: str
    """The generation it compacted."""
    files: dict[str, list[float]]
    """The input listing behind ``source`` (path -> size, modification time)."""


@dataclass
class _Running:
    process: subprocess.Popen[bytes]
    source: str
    files: dict[str, list[float]]
    out: Any
    log: Any


class BackgroundCompaction:
    """At most one compaction at a time, in a child process, for one bundle root.

    Example:
        >>> compactor = BackgroundCompaction(root)
        >>> compactor.maybe_start(bundle_id, manifest, files)  # after an activation
        >>> ready = compactor.finished()  # at the next windows, until not None

    Args:
        root: the bundle root.
        build_args: the stream's build options (Beam runner flags reach the child).
        policy: when to compact (default ``pipelines.compact.MergePolicy()``).
    """

    def __init__(self, root: str, build_args: Sequence[str] = (), policy: Any = None) -> None:
        self._root = root
        self._build_args = list(build_args)
        self._policy = policy
        self._running: _Running | None = None
        self._failure = ""

    @property
    def running(self) -> bool:
        return self._running is not None

    @property
    def exited(self) -> bool:
        """A compaction's child has exited: :meth:`finished` has its result (or its
        failure) to hand over."""
        return self._running is not None and self._running.process.poll() is not None

    def maybe_start(self, bundle_id: str, manifest: Any, files: dict[str, list[float]]) -> str:
        """Start compacting ``bundle_id`` (just activated, built from the input listing
        ``files``) if the merge policy calls for it and none is running; returns a note
        for the window's progress line ("" when nothing started)."""
        from pipelines.compact import MergePolicy

        if self._running is not None:
            return ""
        policy = self._policy or MergePolicy()
        reason = policy.reason(manifest)
        if reason is None:
            return ""
        # Both stay open while the child runs; finished() and stop() close them.
        out = tempfile.TemporaryFile()  # noqa: SIM115
        log = tempfile.NamedTemporaryFile(  # noqa: SIM115
            prefix="evidex-compact-", suffix=".log", delete=False
        )
        command = [
            sys.executable,
            "-c",
            _CHILD,
            "compact",
            "--root",
            self._root,
            "--source",
            bundle_id,
            "--max-segments",
            str(policy.max_segments),
            "--max-deleted",
            str(policy.max_deleted_share),
            "--no-activate",
            "--json",
            *self._build_args,
        ]
        env = {**os.environ, "EVIDEX_STREAM_PID": str(os.getpid())}
        process = subprocess.Popen(command, stdout=out, stderr=log, env=env)
        self._running = _Running(process, bundle_id, dict(files), out, log)
        logger.info("compacting %s in the background (%s); log: %s", bundle_id, reason, log.name)
        return f"compacting in the background ({reason})"

    def finished(self) -> Compacted | None:
        """The compaction, once its child has exited and its result passed validation;
        ``None`` while it runs, when none runs, or when it failed (logged, and forgotten:
        the policy starts another after a later window)."""
        running = self._running
        if running is None or running.process.poll() is None:
            return None
        self._running = None
        running.out.seek(0)
        output = running.out.read().decode("utf-8", "replace")
        running.out.close()
        running.log.close()
        try:  # `evidex compact --json` prints one JSON object
            payload = json.loads(output[output.index("{") :])
        except ValueError:  # no object, or not JSON
            payload = {}
        if running.process.returncode != 0 or not payload.get("compacted"):
            checks = payload.get("failed_checks") or []
            refused = ", ".join(f"{c['name']} = {c['observed']}" for c in checks[:3])
            with open(running.log.name, "a", encoding="utf-8") as log:
                log.write(output)  # the child's report (its failed checks) joins its stderr
            self._failure = (
                f"background compaction of {running.source} failed (exit "
                f"{running.process.returncode}, validation "
                f"{payload.get('validation', 'not reached')}"
                f"{': ' + refused if refused else ''}); log: {running.log.name}"
            )
            logger.warning("%s", self._failure)
            return None
        os.unlink(running.log.name)
        return Compacted(str(payload["bundle_id"]), running.source, running.files)

    def take_failure(self) -> str:
        """Why the last compaction failed ("" if it did not), once: for a progress line."""
        failure, self._failure = self._failure, ""
        return failure

    def wait(self, timeout: float | None = None) -> None:
        """Block until a running compaction's child exits (``subprocess.TimeoutExpired``
        past ``timeout``); :meth:`finished` then returns its result."""
        if self._running is not None:
            self._running.process.wait(timeout)

    def stop(self) -> None:
        """Kill a running compaction (the stream is stopping)."""
        if self._running is not None:
            self._running.process.kill()
            self._running.process.wait()
            self._running.out.close()
            self._running.log.close()
            os.unlink(self._running.log.name)  # a compaction cut short: nothing to read
            self._running = None
