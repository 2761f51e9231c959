"""One entry point for every simulator of GA-2: the reference machine, pysim, Verilator and Icarus.

Each backend runs a list of (program, ext) jobs and returns ``ga2_sw.machine.Result``s with identical
meaning, so callers compare them field by field."""

import importlib
import shutil

from ga2_sw.machine import Machine

__all__ = ["SIMULATORS", "available", "run_jobs", "unavailable_reason"]

SIMULATORS = ("model", "pysim", "verilator", "icarus")


def unavailable_reason(name):
    """None when the simulator can run here, else a sentence saying why not."""
    if name not in SIMULATORS:
        return f"unknown simulator {name!r} (known: {', '.join(SIMULATORS)})"
    if name == "verilator":
        try:
            importlib.import_module("sim.verilator")
        except ImportError as exc:
            return f"the Verilator backend is not available ({exc})"
        if not shutil.which("g++") and not shutil.which("c++"):
            return "no C++ compiler (g++) on PATH"
    if name == "icarus":
        if not shutil.which("iverilog"):
            return "Icarus Verilog (iverilog) is not installed"
        try:
            importlib.import_module("sim.icarus")
        except ImportError as exc:
            return f"the Icarus backend is not available ({exc})"
    return None


def available(name):
    return unavailable_reason(name) is None


def run_jobs(name, config, jobs, cycle_limit=5_000_000):
    """Run ``jobs`` = [(program, ext)] on simulator ``name``; return the Results in order."""
    reason = unavailable_reason(name)
    if reason:
        raise ValueError(reason)
    if name == "model":
        m = Machine(config)
        return [m.run(p, ext) for p, ext in jobs]
    if name == "pysim":
        from .pysim_runner import run_pysim
        return [run_pysim(config, p, ext, cycle_limit=cycle_limit) for p, ext in jobs]
    if name == "verilator":
        from .verilator import VerilatorSim
        return VerilatorSim(config).run_many([(p, ext, None, cycle_limit) for p, ext in jobs])
    from .icarus import IcarusSim
    return IcarusSim(config).run_many([(p, ext, None, cycle_limit) for p, ext in jobs])
