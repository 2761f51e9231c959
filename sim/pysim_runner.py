"""Run GA-2 programs on the Amaranth RTL in Amaranth's Python simulator (pysim), on ``sim.testing.ChipBench``.

``run_pysim`` runs one program; ``PysimSim`` is the session of the ``pysim`` backend of ``sim.backends`` (the
same ``run``/``run_many`` as ``VerilatorSim``). Both run on a ``PysimChip``: the chip elaborated and compiled
once, reset between programs."""

import time

from .axi_mem import AxiMemoryModel
from .jobs import DEFAULT_CYCLE_LIMIT, Job, Session, check_job
from .testing import ChipBench

__all__ = ["run_pysim", "PysimChip", "PysimSim"]


class PysimChip:
    """One chip of ``config`` elaborated and compiled for pysim once, then run for each program: between runs
    the simulation is reset (every signal and memory back to its initial value, the testbenches restarted) and
    the next program's external memory is loaded by the testbench before the chip starts. Elaborating and
    compiling a chip takes one to three seconds, so a session of many programs on one chip (``PysimSim``, and
    ``run_pysim``'s recent chips) runs each in the time of its cycles alone; the chip and every memory start
    each run as a fresh one would (a test holds a reused chip's results equal to a fresh chip's)."""

    def __init__(self, config):
        from amaranth.sim import Simulator

        self.config = config
        self.bench = bench = ChipBench(config)
        self._job = self._out = None
        self._sim = Simulator(bench)
        self._sim.add_clock(1e-8)
        self._sim.add_testbench(self._testbench)
        if isinstance(bench.extmem, AxiMemoryModel):
            self._sim.add_testbench(bench.extmem.run, background=True)
        self._fresh = True

    async def _testbench(self, ctx):
        bench, (words, ext, sp, cycle_limit, on_hang) = self.bench, self._job
        host = bench.chip.host
        # The external memory starts as its image (all zeros after a reset, so only the other words are set),
        # the program goes in through the host port, where each word is validated as it is written, and the
        # scratchpad is loaded directly (no cycles).
        if not isinstance(bench.extmem, AxiMemoryModel):
            for addr, value in bench.extmem.nonzero_cells(ext):
                ctx.set(addr, value)
        await bench.load_program(ctx, words)
        bench.poke_scratchpad(ctx, sp or ())
        out = self._out
        out["sim_cycles"] = await bench.run_to_done(ctx, cycle_limit, wait_running=False, step=64, on_hang=on_hang)
        out["hang"] = not ctx.get(host.done)
        out["result"] = bench.result(ctx)

    def run(self, words, ext=None, sp=None, cycle_limit=DEFAULT_CYCLE_LIMIT, on_hang="raise", vcd=None):
        """The ``Result`` of checked program ``words`` (``check_job``) run to HALT, with ``sim_cycles``,
        ``hang`` and ``seconds`` (wall time of the simulation) as ``run_pysim`` returns them."""
        if isinstance(self.bench.extmem, AxiMemoryModel):
            self.bench.extmem.load(ext or ())
        self._job, self._out = (words, ext or (), sp, cycle_limit, on_hang), {}
        if not self._fresh:
            self._sim.reset()
        self._fresh = False
        t0 = time.perf_counter()
        try:
            if vcd:
                with self._sim.write_vcd(vcd):
                    self._sim.run()
            else:
                self._sim.run()
        finally:
            self._job = None
        result = self._out["result"]
        result.sim_cycles, result.hang = self._out["sim_cycles"], self._out["hang"]
        result.seconds = time.perf_counter() - t0
        return result


# The chips ``run_pysim`` ran last, most recent last: a test's programs on one chip share its elaboration.
_RECENT, _RECENT_SIZE = [], 2


def _chip_for(config):
    for n, chip in enumerate(_RECENT):
        if chip.config == config:
            _RECENT.append(_RECENT.pop(n))
            return chip
    chip = PysimChip(config)
    _RECENT.append(chip)
    del _RECENT[:-_RECENT_SIZE]
    return chip


def run_pysim(config, program, ext=None, sp=None, cycle_limit=DEFAULT_CYCLE_LIMIT, vcd=None, on_hang="raise"):
    """Run one program to HALT (or a fault) and return a ``ga2_sw.machine.Result`` plus timing attributes
    ``sim_cycles`` (clock cycles simulated, program loading excluded, counted from the start pulse and
    rounded up to the 64-cycle steps ``done`` is sampled in) and ``seconds`` (wall time of the simulation,
    program loading included). A program that has not halted within ``cycle_limit`` cycles raises
    ``sim.jobs.HangError``; with ``on_hang="return"`` it is returned with ``hang=True`` (and the state it
    reached). The chip is elaborated once for the last few configurations run (``PysimChip``)."""
    words = check_job(Job(program, ext, sp, cycle_limit), config)
    chip = PysimChip(config) if vcd else _chip_for(config)      # a waveform starts from a fresh simulation
    try:
        return chip.run(words, ext, sp, cycle_limit, on_hang=on_hang, vcd=vcd)
    except BaseException:
        if chip in _RECENT:                  # a run that failed midway is not run again
            _RECENT.remove(chip)
        raise


class PysimSim(Session):
    """The pysim session: ``run``/``run_many`` as ``sim.verilator.VerilatorSim``'s, each program on the chip
    ``run_pysim`` keeps elaborated. Each result also carries ``cpu_seconds``: the process CPU time of the call
    (elaboration included, when the call elaborated the chip) scaled by the share of its wall time the
    simulation took."""

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
