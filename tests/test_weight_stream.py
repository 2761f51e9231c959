"""``ga2 weight-stream`` (ga2_cli/analyses/weight_stream.py): a decode step's weights streamed from a DRAM.

The program's outputs are held to numpy (not to the reference machine, which runs the same program), the
DRAM's peak to the data sheet's arithmetic done here, and the figure quoted in docs/ARCHITECTURE.md ("A DRAM
behind the port") is pinned: the cycle model's count, which the Verilator run (slow tier) must equal."""

import dataclasses
import json

import numpy as np
import pytest

from ga2_cli.analyses.weight_stream import QK_MN, V_MN, stream_config, stream_rows, stream_workload
from ga2_sw.config import Config
from ga2_sw.machine import Machine
from ga2_sw.numerics import s8

# The command's chip: 4 x 16, decoupled, 32 banks, 16 bytes a beat on the AXI4 port, a row of results a cycle.
CHIP = Config(rows=4, cols=16, mode="decoupled", sp_banks=32, bus_bytes=16, axi=1, row_writes=1)
SMALL = {"d_model": 40, "heads": 2, "kv_heads": 1, "d": 8}      # 32 weight rows of 40: two tiles


def _outputs(config, shape, batch, ext):
    rows = (shape["heads"] + 2 * shape["kv_heads"]) * shape["d"]
    at = rows * shape["d_model"] + batch * shape["d_model"]
    return np.array([s8(v) for v in ext[at:at + batch * rows]])


@pytest.mark.parametrize("bus_bytes, cols", [(1, 4), (4, 4), (16, 16)])
def test_outputs_are_numpys(bus_bytes, cols):
    """A small block's projections on the reference machine: every int8 output numpy's, in the stored order
    (tile by tile); with q, k and v's requantisations swapped, some differ (the check can fail)."""
    config = stream_config(CHIP.replace(bus_bytes=bus_bytes, cols=cols), 3, SMALL)
    program, ext, expected = stream_workload(config, 3, seed=7, shape=SMALL)
    r = Machine(config).run(program, ext)
    assert r.ok and np.array_equal(_outputs(config, SMALL, 3, r.ext), expected)
    swapped = [dataclasses.replace(i, m=V_MN[0], s=V_MN[1]) if i.op.name == "RQ" and (i.m, i.s) == QK_MN else i for i in program]
    r = Machine(config).run(swapped, ext)
    assert r.ok and not np.array_equal(_outputs(config, SMALL, 3, r.ext), expected)


def test_ddr3_800_peak_is_the_data_sheets():
    """DDR3-800 x16: 800 MT/s of 2 bytes, 1.6 GB/s, 16 bytes in a 10 ns (100 MHz) cycle; DDR3-1600 twice that."""
    rows = stream_rows(CHIP, 1, [16], ["ddr3-800", "ddr3-1600"], seed=1, shape=SMALL)
    assert [r["dram_peak_bytes_per_cycle"] for r in rows] == [800e6 * 2 / 100e6, 1600e6 * 2 / 100e6]
    for r in rows:
        assert r["dram_bandwidth_fraction"] == round(r["bytes"] / (r["cycles"] * r["dram_peak_bytes_per_cycle"]), 4)


def test_the_block_reaches_89_percent_of_ddr3_800():
    """The figure docs/ARCHITECTURE.md quotes: SmolLM2's block, batch 4, 16 bytes a beat, on the cycle model
    (the reference machine): 39,164 cycles for 559,104 bytes, 89.2% of DDR3-800's peak; 89.7% of the bus bound
    against the ideal memory; the outputs numpy's."""
    ideal, ddr = stream_rows(CHIP, 4, [16], ["ideal", "ddr3-800"])
    assert (ideal["cycles"], ddr["cycles"], ddr["bytes"]) == (38_969, 39_164, 559_104)
    assert ddr["dram_bandwidth_fraction"] == 0.8922 and ddr["stall_cycles"] == 1_639
    assert all(r["matches_reference"] and r["outputs_match_numpy"] for r in (ideal, ddr))


def test_command(tmp_path, capsys):
    """The command's JSON and its refusals: one line, status 2."""
    from ga2_cli import main
    out = tmp_path / "ws.json"
    assert main(["weight-stream", "--memories", "ddr3-800", "--batch", "1", "--no-progress", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["memory"] == "ddr3-800" and row["batch"] == 1 and row["outputs_match_numpy"]
    assert "of DRAM peak" in capsys.readouterr().out
    for argv, message in ((["--batch", "9"], "--batch 9: at most the array's rows (8, --rows)"),
                          (["--widths", "3"], "--widths: each must be one of 1, 4, 8, 16, not 3"),
                          (["--axi", "0"], "--axi: the weight stream runs on the AXI4 port (1), not 0"),
                          (["--sp-words", "1024"], "--sp-words is 1024, but the weight stream of a batch of 8"),
                          (["--memory", "ddr3-800"], "--memory: the weight stream runs the memories of --memories")):
        assert main(["weight-stream", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0]


@pytest.mark.slow
def test_verilator_is_the_cycle_model():
    """The chip itself (Verilator, the C++ DRAM model of the harness) against the cycle model: the same memory,
    the same counters, with the ideal memory and with DDR3-800."""
    from sim.backends import get_backend
    if not get_backend("verilator").available():
        pytest.skip("Verilator not installed")
    rows = stream_rows(CHIP, 4, [16], ["ideal", "ddr3-800"], sim="verilator")
    assert [r["cycles"] for r in rows] == [38_969, 39_164]
    assert all(r["matches_reference"] and r["outputs_match_numpy"] for r in rows)
