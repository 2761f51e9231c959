"""Run GA-2 programs on the generated Verilog under Icarus Verilog (iverilog + vvp).

The testbench ``sim/harness/ga2_tb.v`` reads the same job files as the Verilator harness (``sim.jobs``,
docs/SIMULATORS.md) and models the external memory the same way, so ``IcarusSim(config)`` has the same
``.run``/``.run_many`` as ``sim.verilator.VerilatorSim``; it is the session of the ``icarus`` backend of
``sim.backends``. Icarus is a second, independent simulator of the same Verilog (event-driven, four-state): a
third opinion next to pysim and Verilator, not a fast one. Used only when ``iverilog`` is on PATH
(``icarus_available()``). Compiled testbenches are cached like the Verilator builds (``sim.cache``), in
``icarus/<rows>x<cols>-<key>/``: the key holds the Verilog, the testbench and its parameters, and the paths and
versions of ``iverilog`` and ``vvp`` (a compiled ``.vvp`` names the VPI modules of the installation that
compiled it by path, and runs under that installation's ``vvp``). Those modules are also checked before reuse
(``sim.cache.missing_references``): a build that names one that is gone is made again.
"""

import hashlib
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from amaranth.utils import ceil_log2

from ga2_sw.banking import bank_bits
from ga2_sw.timing import debug_read_latency

from .cache import cache_root, discard, file_lock, missing_references, tool_identity
from .jobs import (DEFAULT_CYCLE_LIMIT, Job, Session, SimulatorError, SimulatorMissing, as_job, check_job, parse_results,
                   SECONDS_PER_WORD, harness_timeout, write_jobs)
from .verilog import verilog_for

__all__ = ["IcarusSim", "icarus_available"]

TB = Path(__file__).resolve().parent / "harness" / "ga2_tb.v"


def icarus_available():
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def _tools():
    """The Icarus installation a build uses and runs under: ``iverilog`` and ``vvp``, by path and version."""
    return {"iverilog": tool_identity("iverilog", ("-V",)), "vvp": tool_identity("vvp", ("-V",))}


def sp_access(config):
    """The testbench's ``sp_poke(a, w)`` and ``sp_peek(a)`` for this build's scratchpad: one memory ``mem`` in
    order; decoupled, the banks ``bank0`` ... of ``ga2_sw.banking`` (Verilog names them at compile time, so the
    bank is chosen by a case over this build's banks)."""
    if not config.decoupled:
        return ("task sp_poke(input integer a, input [31:0] w); dut.scratchpad.mem[a] = w; endtask\n"
                "function [31:0] sp_peek(input integer a); sp_peek = dut.scratchpad.mem[a]; endfunction\n")
    b, nb = bank_bits(config), config.sp_banks
    bank = f"((a + (a >> {b})) % {nb})"
    poke = "".join(f"            {n}: dut.scratchpad.bank{n}[a >> {b}] = w;\n" for n in range(nb))
    peek = "".join(f"            {n}: sp_peek = dut.scratchpad.bank{n}[a >> {b}];\n" for n in range(nb))
    return (f"task sp_poke(input integer a, input [31:0] w);\n    begin\n        case {bank}\n{poke}"
            f"        endcase\n    end\nendtask\n"
            f"function [31:0] sp_peek(input integer a);\n    begin\n        sp_peek = 32'd0;\n        case {bank}\n"
            f"{peek}        endcase\n    end\nendfunction\n")


class IcarusSim(Session):
    """GA-2 programs on the RTL under Icarus Verilog; ``build_time``/``cached`` as for ``VerilatorSim``."""

    def __init__(self, config, *, cache_dir=None):
        if not icarus_available():
            raise SimulatorMissing("Icarus Verilog not found (iverilog and vvp must be on PATH)")
        if config.axi:
            raise SimulatorMissing("the Icarus testbench has no AXI4 subordinate yet (axi = 1): use verilator "
                                   "or pysim")
        self.config = config
        t0 = time.perf_counter()
        self.verilog = verilog_for(config)
        self.vvp, self.build_time, self.cached = self._build(Path(cache_dir) if cache_dir else cache_root())
        self.load_time = time.perf_counter() - t0

    def _params(self):
        c = self.config
        return {"EXT_WORDS": c.ext_words, "SP_WORDS": c.sp_words, "SP_BANKS": c.sp_banks if c.decoupled else 0,
                "DEBUG_LATENCY": debug_read_latency(c),
                "IMEM_WORDS": c.imem_words,
                "EXT_LATENCY": c.ext_latency,
                "SP_AW": max(1, ceil_log2(c.sp_words)), "IMEM_AW": max(1, ceil_log2(c.imem_words)),
                "PC_W": ceil_log2(c.imem_words + 1), "BUS_BYTES": c.bus_bytes,
                "EXT_AW": max(1, ceil_log2(c.ext_words // c.bus_bytes))}

    def _build(self, root):
        params = self._params()
        args = (["-g2005", "-s", "ga2_tb"] + [f"-Pga2_tb.{k}={v}" for k, v in params.items()]
                + (["-DGA2_PACKED"] if self.config.bus_bytes > 1 else []))
        h = hashlib.sha256()
        access = sp_access(self.config)
        tools = _tools()
        for part in (self.verilog, TB.read_text(), access, json.dumps(args), json.dumps(tools, sort_keys=True)):
            h.update(part.encode() + b"\0")
        key = h.hexdigest()[:24]
        tag = f"{self.config.rows}x{self.config.cols}"
        final = root / "icarus" / f"{tag}-{key}"
        vvp = final / "ga2.vvp"
        meta = final / "build.json"
        if vvp.exists() and meta.exists() and not missing_references(final):
            return vvp, json.loads(meta.read_text())["build_seconds"], True
        with file_lock(root / "icarus" / f"{tag}-{key}.lock"):
            if vvp.exists() and meta.exists():
                if not missing_references(final):
                    return vvp, json.loads(meta.read_text())["build_seconds"], True
                discard(final)                          # its VPI modules are gone: compile again
            tmp = Path(tempfile.mkdtemp(prefix="build-", dir=root / "icarus"))
            (tmp / "ga2.v").write_text(self.verilog)
            shutil.copy2(TB, tmp / "ga2_tb.v")
            (tmp / "sp_access.vh").write_text(access)
            t0 = time.perf_counter()
            r = subprocess.run(["iverilog", *args, "-o", "ga2.vvp", "ga2_tb.v", "ga2.v"], cwd=tmp,
                               capture_output=True, text=True, timeout=1800)
            seconds = time.perf_counter() - t0
            if r.returncode != 0:
                raise SimulatorError(f"iverilog failed (rc={r.returncode}); files kept in {tmp}:\n"
                                     f"{(r.stdout + r.stderr)[-4000:]}")
            (tmp / "build.json").write_text(json.dumps({"build_seconds": seconds, "args": args, **tools}))
            try:
                os.rename(tmp, final)
            except OSError:
                if not vvp.exists():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)
            return vvp, seconds, False

    def run(self, program, ext=None, sp=None, cycle_limit=DEFAULT_CYCLE_LIMIT, *, trace=None, dump_sp=True,
            on_hang="raise"):
        """As ``VerilatorSim.run``; ``trace=FILE.vcd`` writes a VCD. ``seconds`` is the whole vvp run."""
        return self.run_many([Job(list(program), ext, sp, cycle_limit, dump_sp=dump_sp)], trace=trace,
                             on_hang=on_hang)[0]

    def run_many(self, jobs, *, trace=None, on_hang="raise", keep=None, timeout=None):
        """All jobs in one vvp process. Icarus reports no per-job time: each result's ``seconds`` and
        ``cpu_seconds`` are the process's wall and CPU time shared out in proportion to its simulated cycles
        (so they include loading and read-back)."""
        jobs = [as_job(j) for j in jobs]
        if not jobs:
            return []
        for j in jobs:
            check_job(j, self.config)
        text = write_jobs(jobs, self.config)
        if timeout is None:
            timeout = harness_timeout(jobs, self.config, start_seconds=300, cycles_per_second=1e3,
                                      seconds_per_word=10 * SECONDS_PER_WORD)
        with tempfile.TemporaryDirectory(prefix="ga2-icarus-") as d:
            jf, rf = Path(d) / "jobs.txt", Path(d) / "results.txt"
            jf.write_text(text)
            cmd = ["vvp", "-n", str(self.vvp), f"+jobs={jf}", f"+out={rf}"]
            if trace:
                cmd.append(f"+vcd={Path(trace).resolve()}")
            t0 = time.perf_counter()
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=d)
            except subprocess.TimeoutExpired:
                raise SimulatorError(f"vvp did not finish {len(jobs)} jobs within {timeout:.0f} s") from None
            wall = time.perf_counter() - t0
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
            out = rf.read_text() if rf.exists() else ""
            if keep:
                Path(keep).mkdir(parents=True, exist_ok=True)
                shutil.copy2(jf, Path(keep) / "jobs.txt")
                (Path(keep) / "results.txt").write_text(out)
        if r.returncode != 0 or "error" in r.stdout.lower() or not out.rstrip().endswith("done"):
            raise SimulatorError(f"vvp failed (rc={r.returncode}): {(r.stdout + r.stderr).strip()[-2000:]}")
        results = parse_results(out, jobs, on_hang)
        total = sum(res.sim_cycles for res in results) or 1
        for res in results:
            res.seconds = wall * res.sim_cycles / total
            res.cpu_seconds = cpu * res.sim_cycles / total
        return results
