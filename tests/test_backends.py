"""The simulator registry (sim/backends.py), the result comparison (sim/compare.py) and the shared job code
(sim/jobs.py), on the backends that need no build: the reference machine and pysim. The harness backends are
held to the same protocol in tests/test_verilator.py."""

import argparse

import pytest

from ga2_sw import isa
from ga2_sw.config import Config
from ga2_sw.machine import Machine
from sim.backends import BACKENDS, DEFAULT_CYCLE_LIMIT, backend_names, get_backend
from sim.compare import compare_results, format_program
from sim.jobs import HangError, Job, as_job

SMALL = Config(sp_words=128, ext_words=128, imem_words=8)
PROGRAM = [isa.ld(0, 0, 8), isa.rq(16, 0, 8, 300, 4), isa.st(16, 64, 8), isa.halt()]
EXT = [(i * 2654435761) & 0xFFFFFFFF for i in range(32)]
LONG = [isa.mm(0, 0, 0, 4, 20, 4, 1, 0, 0, 4), isa.halt()]       # about 200 cycles


def test_registry_names_and_protocol():
    assert backend_names() == ("model", "pysim", "verilator", "icarus")
    assert backend_names(harness=True) == ("verilator", "icarus")
    for name, backend in BACKENDS.items():
        assert backend.name == name and backend.description
        reason = backend.unavailable_reason()
        assert reason is None or isinstance(reason, str)
    assert get_backend("model").available() and get_backend("pysim").available()
    with pytest.raises(ValueError, match="Unknown simulator 'spice'; known: model, pysim, verilator, icarus"):
        get_backend("spice")


def _option(command, option):
    import ga2_cli
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    for name in ga2_cli.COMMAND_MODULES:
        __import__(name, fromlist=["register"]).register(sub)
    return next(a for a in sub.choices[command]._actions if option in a.option_strings)


def _choices(command, option="--sim"):
    return tuple(_option(command, option).choices)


def test_every_sim_option_offers_the_registry(capsys, tmp_path):
    from ga2_cli import main
    assert _choices("decode-table") == backend_names()
    assert _choices("fuzz") == backend_names(harness=True)
    (tmp_path / "x.s").write_text("HALT\n")                  # the program file is checked first
    for command in ("run", "check-batching"):                 # free-form, checked by the registry
        assert ", ".join(backend_names()) in _option(command, "--sim").help
        args = [command] + ([str(tmp_path / "x.s")] if command == "run" else []) + ["--sim", "spice"]
        assert main(args) == 2
        assert "Unknown simulator 'spice'; known: model, pysim, verilator, icarus" in capsys.readouterr().err
    assert ", ".join(backend_names()) in _option("bench-sim", "--sims").help


def test_one_default_cycle_limit():
    import inspect
    from sim.backends import Backend, ModelSim
    from sim.icarus import IcarusSim
    from sim.pysim_runner import PysimSim, run_pysim
    from sim.testing import ChipBench
    from sim.verilator import VerilatorSim
    for f in (Backend.run, Backend.run_many, ModelSim.run, run_pysim, PysimSim.run, VerilatorSim.run, IcarusSim.run,
              ChipBench.run_to_done):
        assert inspect.signature(f).parameters["cycle_limit"].default == DEFAULT_CYCLE_LIMIT, f
    assert _option("run", "--cycle-limit").default == DEFAULT_CYCLE_LIMIT
    assert Job([]).cycle_limit == DEFAULT_CYCLE_LIMIT
    assert as_job(([], None), cycle_limit=7).cycle_limit == 7
    assert as_job(([], None, None, 9), cycle_limit=7).cycle_limit == 9


def test_a_harness_s_time_and_batch_follow_the_memories():
    """A harness loads, clears and prints both memories whole for every job, so its time limit grows with them
    and a batch holds at most BATCH_WORDS words: the llm chip's 4 M external words are 4 jobs a batch, each
    allowed ten times the 1.5 s measured for one (not the 0.6 s a job of a fixed two-minute limit)."""
    from ga2_sw.chips import chip
    from sim.jobs import BATCH_WORDS, batch_for, harness_timeout
    small, llm = chip("chapter").config, chip("llm").config
    words = llm.ext_words + llm.sp_words
    assert batch_for(small) == 200 and batch_for(llm) == BATCH_WORDS // words == 4
    assert batch_for(llm.replace(ext_words=1 << 26, sp_words=1 << 16)) == 1
    jobs = [Job([], cycle_limit=10_000)] * 4
    slow = harness_timeout(jobs, llm, start_seconds=0, cycles_per_second=1e9)
    assert 4 * 1.5 * 10 <= slow <= 4 * 1.5 * 20
    quick = harness_timeout(jobs, small, start_seconds=120, cycles_per_second=1e4)
    assert quick == pytest.approx(120 + 4 * (1 + (small.ext_words + small.sp_words) * 4e-6))


@pytest.mark.parametrize("name", ["model", "pysim"])
def test_backend_runs_like_the_machine(name):
    ref = Machine(SMALL).run(PROGRAM, EXT)
    backend = get_backend(name)
    got = backend.run(SMALL, PROGRAM, EXT)
    assert compare_results(ref, got) == []
    both = backend.run_many(SMALL, [(PROGRAM, EXT), Job(PROGRAM[:1], EXT)])
    assert compare_results(ref, both[0]) == []
    assert compare_results(Machine(SMALL).run(PROGRAM[:1], EXT), both[1]) == []      # falls off: ILLEGAL
    runner = backend.runner(SMALL)
    assert runner(PROGRAM, EXT) == ref.ext
    with pytest.raises(RuntimeError, match="faulted with ILLEGAL at pc 1"):
        runner(PROGRAM[:1], EXT)


@pytest.mark.parametrize("name", ["model", "pysim", "verilator", "icarus"])
def test_an_external_window_returns_those_words_alone(name):
    """A job's ``ext_window`` brings back just that part of the external memory, on every backend (the harnesses
    print only it: the job-file format's ``window``); a window outside the memory is refused."""
    backend = get_backend(name)
    if backend.unavailable_reason():
        pytest.skip(backend.unavailable_reason())
    ref = Machine(SMALL).run(PROGRAM, EXT)
    got = backend.run_many(SMALL, [Job(PROGRAM, EXT, ext_window=(60, 12)), Job(PROGRAM, EXT, ext_window=(128, 0)),
                                   Job(PROGRAM, EXT)])
    assert got[0].ext is None and got[0].ext_window == (60, ref.ext[60:72])
    assert ref.ext[64:72] != EXT[64:72]                     # the ST's bytes are in the window
    assert got[1].ext is None and got[1].ext_window == (128, [])
    assert got[0].counters == got[2].counters == ref.counters and got[2].ext == ref.ext
    for bad in [(120, 9), (-1, 4), (3,), "all"]:
        with pytest.raises(ValueError, match="External window"):
            backend.run_many(SMALL, [Job(PROGRAM, EXT, ext_window=bad)])
    with backend.open(SMALL) as sim:                        # a bad window is refused before any job runs
        inner = sim.session                                 # the backend's own session, under its name
        runs, run = [], inner.run
        inner.run = lambda *args, **kwargs: runs.append(1) or run(*args, **kwargs)
        with pytest.raises(ValueError, match="External window"):
            sim.run_many([Job(PROGRAM, EXT), Job(PROGRAM, EXT, ext_window=(120, 9))])
        assert runs == []


def test_pysim_hang_raises_or_returns():
    with get_backend("pysim").open(SMALL) as sim:
        with pytest.raises(HangError, match=r"did not halt within 100 cycles \(pc=0, cycles counter=\d+\)"):
            sim.run(LONG, cycle_limit=100)
        hung, = sim.run_many([Job(LONG, cycle_limit=100)], on_hang="return")
    assert hung.hang and hung.sim_cycles >= 100
    assert compare_results(Machine(SMALL).run(LONG), hung)[0].startswith("the simulator did not halt")


def test_compare_results_names_every_difference():
    ref = Machine(SMALL).run(PROGRAM, EXT)
    assert compare_results(ref, Machine(SMALL).run(PROGRAM, EXT)) == []
    other = Machine(SMALL).run(PROGRAM, [w ^ 1 for w in EXT])
    diffs = compare_results(ref, other)
    assert any(d.startswith("ext: ") for d in diffs) and any(d.startswith("sp: ") for d in diffs)
    assert not any(d.startswith("counter") for d in diffs)
    shorter = Machine(SMALL).run(PROGRAM[:2] + PROGRAM[3:], EXT)
    diffs = compare_results(ref, shorter)
    assert "counter instructions: reference 4, simulator 3" in diffs and "pc: reference 3, simulator 2" in diffs
    shorter.sp = None
    assert "sp: the simulator returned no image" in compare_results(ref, shorter)
    assert "sp: the simulator returned no image" not in compare_results(ref, shorter, check_sp=False)


def test_format_program_shows_raw_words():
    text = format_program([isa.ld(0, 0, 1), 10])
    assert "LD dst=0 src=0 len=1" in text and "ILLEGAL" in text
