"""Formal checks (sim.formal) with SymbiYosys and Yices: every check must pass and every deliberately
false twin must fail, naming the Assert that fails. Each sby run takes 1-40 s here (docs/VERIFICATION.md
has the table); the default tier runs all but the slowest proofs (SLOW_CHECKS), each answered from the ``formal``
cache where sby solved the same problem before. Skipped when the tools are missing."""

# amaranth: UnusedElaboratable=no

import subprocess
import sys

import pytest

from amaranth.hdl import Assert, ClockDomain, Elaboratable, Module, Signal

from sim import formal

TOOLS, WHY_NOT = formal.tools_available()
needs_tools = pytest.mark.skipif(not TOOLS, reason=WHY_NOT or "formal tools missing")


# The slowest proofs run in the slow tier; the default tier proves every other check. seq-check-default and
# seq-check-odd are seq-check's logic at other sizes: the default tier proves it at seq-check's. seq-hazard's
# false twin goes with its check.
SLOW_CHECKS = ("seq-hazard", "seq-check-default", "seq-check-odd")
SLOW_TWINS = ("seq-hazard/lanes-never-overlap",)


@needs_tools
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_CHECKS else n
                                  for n in formal.CHECKS])
def test_check_passes(name, record_property):
    r = formal.run_check(name)
    record_property("seconds", round(r.seconds, 1))
    print(r.summary())
    assert r.status == "PASS", f"{r.summary()}\n{r.log[-3000:]}"


@needs_tools
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_TWINS else n
                                  for n in formal.MUTANTS])
def test_false_twin_fails(name, record_property):
    """The check style can fail: sby reports a counterexample and names the failing Assert's line."""
    r = formal.run_check(name)
    record_property("seconds", round(r.seconds, 1))
    print(r.summary())
    assert r.status == "FAIL", f"{r.summary()}\n{r.log[-3000:]}"
    assert r.failed and all(loc.startswith("formal.py:") for loc in r.failed), r.failed
    assert r.step is not None


@needs_tools
@pytest.mark.parametrize("name", list(formal.KNOWN_BUGS))
def test_known_bug_still_fails(name):
    """Checks that find a known RTL bug. When this test fails, the bug is fixed: move the check into
    formal.CHECKS (and drop the xfail of its pysim twin in tests/test_fault.py)."""
    r = formal.run_check(name)
    print(r.summary())
    assert r.status == "FAIL", f"{name} no longer fails ({r.status}): move it to formal.CHECKS"


@needs_tools
def test_reload_without_reset_passes():
    """The known bug's control: the same reload scenario without a reset is correct."""
    r = formal.run_check("seq-reload")
    assert r.status == "PASS", r.summary()


def test_every_check_has_a_false_twin():
    styles = {name.split("-")[0] for name in formal.CHECKS}
    twins = {name.split("/")[0].split("-")[0] for name in formal.MUTANTS}
    assert styles == twins
    assert all(c.expect == "PASS" for c in formal.CHECKS.values())
    assert all(c.expect == "FAIL" for c in formal.MUTANTS.values())


class _ConstantClock(Elaboratable):
    def elaborate(self, platform):
        m = Module()
        m.domains.sync = ClockDomain("sync")
        r = Signal(4)
        m.d.sync += r.eq(r + 1)
        m.d.comb += Assert(r == 0)
        return m


def test_constant_clock_is_refused():
    """An explicit domain with an undriven clock would make every check pass vacuously."""
    with pytest.raises(ValueError, match=r"^Spec has flip-flops on a constant clock"):
        formal.run_sby(_ConstantClock(), name="const-clock", depth=3)


def test_parse_sby_output():
    log = ("SBY 1:00:00 [spec] engine_0: ##   0:00:00  Checking assertions in step 3..\n"
           "SBY 1:00:00 [spec] engine_0: ##   0:00:00  BMC failed!\n"
           "SBY 1:00:00 [spec] engine_0: ##   0:00:00  Assert failed in top: /x/sim/formal.py:123 ($check$1)\n"
           "SBY 1:00:00 [spec] DONE (FAIL, rc=2)\n")
    assert formal._parse(log) == ("FAIL", ["formal.py:123"], 3)
    assert formal._parse("SBY [spec] DONE (PASS, rc=0)\n") == ("PASS", [], None)
    assert formal._parse("Status: PREUNSAT\nSBY [spec] DONE (ERROR, rc=16)\n")[0] == "ERROR"
    assert formal._parse("garbage")[0] == "ERROR"


def test_cli_list_and_unknown(capsys):
    assert formal.main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in [*formal.CHECKS, *formal.MUTANTS, *formal.KNOWN_BUGS, *formal.EXTRA])
    with pytest.raises(KeyError, match="Unknown formal check 'nope'"):
        formal.run_check("nope")
    if TOOLS:
        with pytest.raises(SystemExit):
            formal.main(["nope"])


@pytest.mark.parametrize("argv, says", [
    (["--depth", "0", "requant-expr"], "--depth: must be a whole number in 1..1000"),
    (["--depth", "-3", "requant-expr"], "--depth: must be a whole number in 1..1000"),
    (["--timeout", "-1", "requant-expr"], "--timeout: must be a number with 1 <= x <= 86400"),
    (["--keep", "/proc/ga2-formal", "requant-expr"], "--keep: /proc/ga2-formal: cannot be created"),
    (["--dep", "3", "list"], "unrecognized arguments: --dep"),
])
def test_bad_options_are_one_line_before_any_run(argv, says, capsys):
    """A BMC of depth 0 or less would prove nothing and print PASS: the command refuses it, and every bad option,
    in one line with exit status 2, before sby runs."""
    with pytest.raises(SystemExit) as info:
        formal.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1 and says in err


@needs_tools
def test_module_entry_point():
    """``python -m sim.formal CHECK`` prints PASS and the time, and exits 0."""
    proc = subprocess.run([sys.executable, "-m", "sim.formal", "requant-expr", "requant-expr/wrapping-add"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS    requant-expr" in proc.stdout
    assert "FAIL    requant-expr--wrapping-add" in proc.stdout and "expected FAIL: ok" in proc.stdout
    assert "2/2 as expected" in proc.stdout


@needs_tools
def test_a_problem_solved_before_comes_from_the_cache(tmp_path, monkeypatch):
    """A check or false twin sby has solved is answered from the ``formal`` cache with its outcome, failing
    Assert and step, without running sby; another depth, a spec that differs, or ``cache=False`` runs it."""
    monkeypatch.setenv("GA2_CACHE", str(tmp_path))
    solved = {n: formal.run_check(n) for n in ("requant-expr", "pe/unregistered")}
    assert [(r.status, r.cached) for r in solved.values()] == [("PASS", False), ("FAIL", False)]
    assert len(list((tmp_path / "formal").glob("*.json"))) == 2

    def no_sby(*args, **kwargs):
        raise AssertionError("sby ran")
    monkeypatch.setattr(formal.subprocess, "Popen", no_sby)
    for name, first in solved.items():
        again = formal.run_check(name)
        assert again.cached and "cached" in again.summary()
        assert (again.status, again.failed, again.step, again.mode, again.depth) == \
            (first.status, first.failed, first.step, first.mode, first.depth)
    for other in (lambda: formal.run_check("pe/unregistered", depth=5), lambda: formal.run_check("pe"),
                  lambda: formal.run_check("requant-expr", cache=False)):
        with pytest.raises(AssertionError, match="sby ran"):
            other()
