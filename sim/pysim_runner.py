"""Run GA-2 programs on the Amaranth RTL in Amaranth's Python simulator (pysim), on ``sim.testing.ChipBench``.

``run_pysim`` runs one program; ``PysimSim`` is the session of the ``pysim`` backend of ``sim.backends`` (the
same ``run``/``run_many`` as ``VerilatorSim``, one simulation per program)."""

import time

from .jobs import DEFAULT_CYCLE_LIMIT, Job, Session, check_job
from .testing import ChipBench

__all__ = ["run_pysim", "PysimSim"]


def run_pysim(config, program, ext=None, sp=None, cycle_limit=DEFAULT_CYCLE_LIMIT, vcd=None, on_hang="raise"):
    """Run one program to HALT (or a fault) and return a ``ga2_sw.machine.Result`` plus timing attributes
    ``sim_cycles`` (clock cycles simulated, program loading excluded, counted from the start pulse and
    rounded up to the 64-cycle steps ``done`` is sampled in) and ``seconds`` (wall time). A program that has
    not halted within ``cycle_limit`` cycles raises ``sim.jobs.HangError``; with ``on_hang="return"`` it is
    returned with ``hang=True`` (and the state it reached)."""
    words = check_job(Job(program, ext, sp, cycle_limit), config)
    bench = ChipBench(config, ext or ())
    host = bench.chip.host
    out = {}

    async def testbench(ctx):
        # The program goes in through the host port, where each word is validated as it is written; the
        # scratchpad is loaded directly (no cycles).
        await bench.load_program(ctx, words)
        bench.poke_scratchpad(ctx, sp or ())
        out["sim_cycles"] = await bench.run_to_done(ctx, cycle_limit, wait_running=False, step=64, on_hang=on_hang)
        out["hang"] = not ctx.get(host.done)
        out["result"] = bench.result(ctx)

    t0 = time.perf_counter()
    bench.simulate(testbench, vcd=vcd)
    result = out["result"]
    result.sim_cycles = out["sim_cycles"]
    result.hang = out["hang"]
    result.seconds = time.perf_counter() - t0
    return result


class PysimSim(Session):
    """The pysim session: ``run``/``run_many`` as ``sim.verilator.VerilatorSim``'s, one simulation per
    program. Each result also carries ``cpu_seconds``: the process CPU time of the call (elaboration
    included) scaled by the share of its wall time the simulation took."""

    build_time = cached = load_time = None          # nothing is built

    def __init__(self, config):
        self.config = config

    def run(self, program, ext=None, sp=None, cycle_limit=DEFAULT_CYCLE_LIMIT, *, vcd=None, dump_sp=True,
            on_hang="raise"):
        w0, c0 = time.perf_counter(), time.process_time()
        r = run_pysim(self.config, program, ext, sp, cycle_limit=cycle_limit, vcd=vcd, on_hang=on_hang)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        r.cpu_seconds = cpu * min(1.0, r.seconds / wall) if wall > 0 else r.seconds
        return r
