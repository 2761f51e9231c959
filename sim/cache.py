"""The on-disk caches of the simulators (``$GA2_CACHE`` or ``~/.cache/ga2``): where they are, a per-key file
lock, and pruning of old builds.

``verilator/`` and ``icarus/`` hold harness builds (sim/verilator.py, sim/icarus.py), ``verilog/`` the
generated Verilog (sim/verilog.py). Everything is written to a temporary name first and renamed into place,
under a per-key lock, so concurrent processes build once and never see half a build."""

import contextlib
import fcntl
import os
import shutil
import time
from pathlib import Path

__all__ = ["cache_root", "file_lock", "prune"]


def cache_root():
    """``$GA2_CACHE`` or ``~/.cache/ga2``."""
    return Path(os.environ.get("GA2_CACHE") or Path.home() / ".cache" / "ga2")


@contextlib.contextmanager
def file_lock(path):
    """An exclusive lock on ``path`` (created if missing) for the ``with`` block."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def prune(root, keep, newest=4, min_age=7 * 86400):
    """Remove old builds next to ``keep`` with the same name before its last ``-`` (each RTL or harness change
    makes a new one): all but the ``newest`` few, and only those unused for ``min_age`` seconds, so a binary
    another process may still be running is left alone."""
    prefix = keep.name.rsplit("-", 1)[0] + "-"
    builds = sorted((p for p in root.glob(prefix + "*") if p.is_dir() and p.name.rsplit("-", 1)[0] + "-" == prefix),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    now = time.time()
    for p in builds[newest:]:
        if p != keep and now - p.stat().st_mtime > min_age:
            shutil.rmtree(p, ignore_errors=True)
            with contextlib.suppress(OSError):
                (root / (p.name + ".lock")).unlink()
