"""The RTL mutation tool (``ga2 mutants --rtl``, ``sim/rtl_mutants.py``).

Fast: every anchor occurs exactly once in the current tree (so the list stays valid as the RTL evolves),
labels are unique, and a few cheap mutants run end to end against the pysim unit tests, next to an
unmutated copy that must pass them (else "caught" would mean nothing). Slow (``-m slow``): the whole
mutant set against the whole selection, which must catch at least 90% and leave no unexplained survivor."""

import os

import pytest

from sim.rtl_mutants import (RTL_MUTANTS, SELECTION, UNIT_TESTS, RtlMutant, check_anchors, mutate, run_mutant,
                             run_mutants, selection_for, summarise)

BY_LABEL = {m.label: m for m in RTL_MUTANTS}


def test_every_anchor_occurs_exactly_once():
    problems = check_anchors()
    assert not problems, "\n".join(f"{label}: {why}" for label, why in problems)


def test_enough_mutants_across_the_units():
    assert len(RTL_MUTANTS) >= 30
    units = {m.unit for m in RTL_MUTANTS}
    assert {"pe", "systolic", "matrix_unit", "dma", "requantiser", "softmax", "divider", "sequencer",
            "checker"} <= units
    for m in RTL_MUTANTS:
        assert os.path.exists(os.path.join(os.path.dirname(os.path.dirname(__file__)), m.file)), m.file


def test_a_bad_anchor_is_reported_not_applied():
    bad = RtlMutant("no such text", "ga2_hdl/matrix/pe.py", "this text is not in pe.py", "x", unit="pe")
    with pytest.raises(ValueError, match="occurs 0 times"):
        mutate(bad)
    twice = RtlMutant("twice", "ga2_hdl/matrix/pe.py", "self.b_o", "self.a_o", unit="pe")
    assert check_anchors([twice])[0][1].startswith("bad anchor")
    assert run_mutant(bad).status == "bad anchor"


def test_selection_puts_the_units_tests_first():
    m = BY_LABEL["rq: half_shift shifts by s instead of s - 1"]
    order = selection_for(m)
    assert order[0] == UNIT_TESTS["requantiser"] and sorted(order) == sorted(SELECTION)
    assert selection_for(None) == list(SELECTION)


CHEAP = ["rq: half_shift shifts by s instead of s - 1", "div: trial subtraction when trial > den (not >=)",
         "pe: accumulates the current product instead of the registered one"]
UNIT_ONLY = tuple(sorted(set(UNIT_TESTS.values())))


def test_cheap_mutants_end_to_end():
    """Three mutants against the pysim unit tests only, and the unmutated tree against the requantiser's
    tests (it must pass: the control)."""
    rows = run_mutants([BY_LABEL[label] for label in CHEAP], jobs=2, baseline=False, timeout=120,
                       selection=UNIT_ONLY)
    for m, o in rows:
        assert o.status == "caught", (m.label, o)
        assert o.detail.startswith(UNIT_TESTS[m.unit] + "::"), (m.label, o.detail)
    base = run_mutant(None, selection=(UNIT_TESTS["requantiser"],), timeout=120)
    assert base.status == "survived", base
    s = summarise([(None, base)] + rows)
    assert s["baseline"] == "passes" and s["caught"] == 3 and not s["problems"]


@pytest.mark.slow
def test_full_rtl_mutation_run(request):
    """Every mutant against the whole selection (20-40 minutes on two cores)."""
    if "slow" not in (request.config.getoption("-m") or "") and not os.environ.get("GA2_SLOW"):
        pytest.skip("long run: select it with -m slow (or set GA2_SLOW=1)")
    s = summarise(run_mutants(RTL_MUTANTS, jobs=2, timeout=900))
    assert s["baseline"] == "passes"
    assert not s["problems"], s["problems"]
    assert s["caught_fraction"] >= 0.9
