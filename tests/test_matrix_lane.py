"""``ga2 matrix-lane``: every cycle of a decoupled program told once, against timelines worked by hand and against
counts taken from the programs themselves."""

import json

import pytest

from ga2_sw import isa
from ga2_sw.analyses.matrix_lane import CATEGORIES, lane_rows, matrix_lane_cycles
from ga2_cli import main
from ga2_sw.config import Config
from ga2_sw.cycles import DecoupledTimer, cycle_counts
from ga2_sw.isa import Op
from ga2_sw.timing import MM_PLAN_CYCLES
from ga2_sw.workloads import decode_table_programs
from ga2_sw.chips import chip

CHIP = Config(mode="decoupled", bus_bytes=4, sp_banks=8)
# 1 x 4 x 1 on operands whose banks never meet in a slice (A's word k on bank k, B's on bank 5 + k, 8 banks).
LOAD = isa.ld(dst=0, src=0, len=40)            # 10 beats: starts in 2, last beat in 16


def test_an_mm_waiting_for_its_operands_worked_by_hand():
    """The MM reads what the LD writes: decoded in 3, it waits for the LD's last write (16) and starts in 17, so
    its 17 idle cycles from cycle 0 are the DMA's; 17 is its start, 18 and 19 its plan (3 issue cycles), 20..23
    its four slices; everything from 24 on is the tail."""
    program = [LOAD, isa.mm(900, 0, 104, 1, 4, 1, lda=4, ldb=1, ldc=1), isa.halt()]
    counts, records = matrix_lane_cycles(program, CHIP)
    cycles = cycle_counts(program, CHIP)[0].cycles
    assert records == [{"index": 1, "start": 17, "last_read": 23, "K": 4, "held": 0, "idle": 17, "waited_for": "dma"}]
    assert counts == {**dict.fromkeys(CATEGORIES, 0), "slices": 4, "issue": 3, "wait dma": 17, "tail": cycles - 24}


def test_an_mm_held_by_the_in_order_issue_worked_by_hand():
    """The MM needs nothing in flight, but the RQ before it in program order waits for the LD (it reads the LD's
    words) and starts in 17: the MM is decoded in 18 and starts in 19. Its operands were ready from cycle 0, so
    all 19 idle cycles are the in-order issue's."""
    program = [LOAD, isa.rq(dst=500, src=0, len=40, m=1, s=0), isa.mm(900, 100, 204, 1, 4, 1, lda=4, ldb=1, ldc=1),
               isa.halt()]
    counts, records = matrix_lane_cycles(program, CHIP)
    assert records[0]["start"] == 19 and records[0]["waited_for"] is None
    assert counts["in order"] == 19 and counts["wait dma"] == counts["wait vector"] == 0


def test_held_slices_where_operands_share_a_bank():
    """B's word k on A's word k's bank (B = 96 on 8 banks: (96 + 12) mod 8 = 4 = (4 + 0) mod 8 for A = 4): every
    slice takes two cycles, so the four slices are held four cycles."""
    program = [isa.mm(900, 4, 96, 1, 4, 1, lda=4, ldb=1, ldc=1), isa.halt()]
    counts, records = matrix_lane_cycles(program, CHIP)
    assert records[0]["held"] == 4 and counts["held"] == 4 and counts["wait dma"] == 0


def test_an_mm_held_by_a_later_rq_told_from_its_final_schedule():
    """An RQ that starts beside an MM's reads takes port B's banks first and pushes the MM's last read from cycle
    36 (its schedule when it started) to 56; the next MM starts right after, in 57. Told from the schedule the MM
    had when it started, 20 of the MM's held cycles would show as the next MM's idle cycles."""
    program = [isa.mm(900, 0, 256, 4, 16, 4, lda=16, ldb=4, ldc=4), isa.rq(dst=600, src=400, len=40, m=3, s=2),
               isa.mm(1000, 64, 320, 4, 16, 4, lda=16, ldb=4, ldc=4), isa.halt()]
    timer = DecoupledTimer(CHIP)
    timer.issue(program[0])
    assert timer.schedules[0].last_read == 36            # before the RQ starts beside it
    counts, records = matrix_lane_cycles(program, CHIP)
    assert [(r["start"], r["last_read"], r["idle"]) for r in records] == [(2, 56, 2), (57, 94, 0)]
    assert records[0]["held"] == 56 - (2 + 1 + MM_PLAN_CYCLES) + 1 - 16
    assert counts["in order"] == 2 and counts["held"] == records[0]["held"] + records[1]["held"]


@pytest.mark.parametrize("config", [Config(mode="decoupled"),
                                    chip("fast").config.replace(sp_banks=32, row_b=0, rq_lanes=1, sm_lanes=1),
                                    chip("fast").config.replace(sp_banks=32, rq_lanes=1, sm_lanes=1)],
                         ids=["word port", "fastest 4-byte chip", "with tiles a row (sa)"])
def test_every_cycle_of_the_decode_steps_told_once(config):
    """On the decode steps: the categories add up to the cycle model's count, the slices to the K of the
    program's MMs and the issue cycles to 1 + MM_PLAN_CYCLES each (counted here from the programs), and every
    MM's record is its final schedule in a run of the whole program (the held and idle cycles between them)."""
    for p, row in zip(decode_table_programs(config), lane_rows(config)):
        mms = [i for i in p.program if i.op == Op.MM]
        lane = row["matrix_lane"]
        assert sum(lane.values()) == row["cycles"] == cycle_counts(p.program, config)[0].cycles
        assert lane["slices"] == sum(i.K for i in mms) and lane["issue"] == (1 + MM_PLAN_CYCLES) * len(mms)
        assert all(v >= 0 for v in lane.values()) and row["mms"] == len(mms)
        timer = DecoupledTimer(config)
        for instr in p.program[:-1]:
            timer.issue(instr)
        final = [(n, timer.schedules[n].last_read) for n, (i, _, _) in enumerate(timer.starts) if i.op == Op.MM]
        assert [(r["index"], r["last_read"]) for r in row["mm_records"]] == final


def test_the_command(tmp_path, capsys):
    """The table, the JSON (every row's categories add up to its cycles) and the plot."""
    out, png = tmp_path / "lane.json", tmp_path / "lane.png"
    assert main(["matrix-lane", "--bus-bytes", "4", "--sp-banks", "32", "--json", str(out), "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    assert "the B = 4 step:" in text and "x its 736 beats" in text
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 5 and all(sum(r["matrix_lane"].values()) == r["cycles"] for r in rows)
    assert png.stat().st_size > 10_000


def test_the_command_refuses_an_inorder_chip(capsys):
    """Only the decoupled chip has lanes: --mode is not an option; a bad option or field is one line each, exit
    status 2."""
    assert main(["matrix-lane", "--mode", "inorder"]) == 2
    assert main(["matrix-lane", "--bus-bytes", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "--mode inorder" in err[0] and "'bus_bytes'" in err[1], err
