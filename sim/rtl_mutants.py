"""Mutation testing of the RTL (``ga2 mutants --rtl``): how many plausible bugs in ``ga2_hdl`` the project's
own tests catch.

Each mutant is one text substitution ``(label, unit, file, old, new)`` in a COPY of the repository (``.git``
and caches left out); ``old`` must occur exactly once in ``file`` (a mutant whose anchor does not is
reported as a *bad anchor*, never applied somewhere else). The copy then runs a fixed selection of the
project's tests in a subprocess (``python -m pytest -x -q -p no:cacheprovider``) with a timeout. A mutant is
*caught* when a test fails (the first failing test id is the verdict's detail), *timeout* when the run does
not finish in time (also a kill: a hang is an observable difference, but it is reported separately), and
*survived* when every test passes, *broken* (counted apart, never a kill) when pytest stops without a
failing test (the mutated tree cannot be collected). Mutants that no program can tell from the original
carry the reason in ``why_survives`` (their verdict is *equivalent*). Copying, applying, running and judging
are the project's one mutation framework's (``ga2_sw.mutation``, its ``PytestFiles`` oracle, which also
serves ``ga2 mutants``); this module holds the RTL's mutants, the test selection and the report.

The selection (``SELECTION``) is the same for every mutant; only its order changes: the mutated unit's own
pysim test file runs first, because it fails fastest, then the other unit tests, the kill tests written for
this tool (``tests/test_rtl_mutant_kills.py``, ~15 s, with cycle limits that turn hangs into failures), the
whole chip in pysim, the fault tests and last the
Verilator differential fuzz (the costly part: two Verilator builds of the mutated Verilog, ~15-50 s each on
two cores). The formal checks (``tests/test_formal.py``, ~2 min) are left out: everything they target is
also reached by simulation here, at a fraction of the cost.

Each copy gets its own Verilator cache (``GA2_CACHE`` inside the copy): a mutant's Verilog differs from the
original's, so a shared cache could not hit anyway, and the user's cache is not filled with mutant builds."""

import glob
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

from ga2_sw import mutation
from ga2_sw.mutation import Outcome, PytestFiles

__all__ = ["RtlMutant", "Outcome", "RTL_MUTANTS", "SELECTION", "UNIT_TESTS", "mutate", "check_anchors", "main_rtl",
           "run_mutant", "run_mutants", "summarise", "snapshot", "REPO_DIR"]

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The unit tests of each unit (pysim); they run first for a mutant of that unit.
UNIT_TESTS = {
    "pe": "tests/test_hdl_systolic.py",
    "systolic": "tests/test_hdl_systolic.py",
    "matrix_unit": "tests/test_hdl_matrix_unit.py",
    "requantiser": "tests/test_hdl_requantiser.py",
    "overlapped_requantiser": "tests/test_rq_overlap.py",
    "wide_requantiser": "tests/test_rq_lanes.py",
    "overlapped_loads": "tests/test_ld_overlap.py",
    "softmax": "tests/test_hdl_softmax.py",
    "divider": "tests/test_hdl_divider.py",
    "scoreboard": "tests/test_hdl_scoreboard.py",
    "scratchpad": "tests/test_banking.py",
    "online_unit": "tests/test_online_unit.py",
    "packed_dma": "tests/test_packed.py",
    "axi_dma": "tests/test_axi.py",
}

# The fixed test selection, in its default order (see the module docstring).
SELECTION = (
    "tests/test_hdl_systolic.py",
    "tests/test_hdl_matrix_unit.py",
    "tests/test_hdl_scoreboard.py",
    "tests/test_hdl_requantiser.py",
    "tests/test_rq_overlap.py",
    "tests/test_rq_lanes.py",
    "tests/test_sm_lanes.py",
    "tests/test_ld_overlap.py",
    "tests/test_hdl_softmax.py",
    "tests/test_hdl_divider.py",
    "tests/test_banking.py",
    "tests/test_rtl_mutant_kills.py",
    "tests/test_online_unit.py",
    "tests/test_chip_pysim.py",
    "tests/test_fault.py",
    "tests/test_packed.py",
    "tests/test_axi.py",
    "tests/test_dram.py",
    "tests/test_differential.py",
)


@dataclass(frozen=True)
class RtlMutant(mutation.Mutant):
    """A mutant of the RTL: ``file`` relative to the repository, e.g. "ga2_hdl/matrix/pe.py"; ``why_survives`` for an
    equivalent mutant: why no program can tell the difference."""
    unit: str = ""              # pe, systolic, matrix_unit, dma, requantiser, softmax, divider, sequencer, checker


def _unit_file(unit):
    """The file of ``ga2_hdl``'s module ``unit``, in whichever subsystem's folder it is."""
    (path,) = sorted(os.path.relpath(p, REPO_DIR) for p in glob.glob(os.path.join(REPO_DIR, "ga2_hdl", "**",
                                                                                  f"{unit}.py"), recursive=True))
    return path


def _m(label, unit, old, new, why_survives="", file=None):
    return RtlMutant(label, file or _unit_file(unit), old, new, why_survives, unit)


_SKEW_CLEAR = ("            with m.If(self.clear):\n                m.d.sync += reg.eq(0)\n"
               "            with m.Elif(self.step):\n                m.d.sync += reg.eq(value)\n")

RTL_MUTANTS = (
    # -- processing element ----------------------------------------------------------------------------
    _m("pe: accumulates the current product instead of the registered one", "pe",
       "self.acc.eq(self.acc + prod),", "self.acc.eq(self.acc + self.a_i * self.b_i),"),
    _m("pe: clear does not clear the registered product", "pe",
       "m.d.sync += [self.a_o.eq(0), self.b_o.eq(0), prod.eq(0), self.acc.eq(0)]",
       "m.d.sync += [self.a_o.eq(0), self.b_o.eq(0), self.acc.eq(0)]"),
    _m("pe: a operand zero-extended (unsigned 8-bit) in the multiply", "pe",
       "prod.eq(a_mul * self.b_i),", "prod.eq(a_mul.as_unsigned() * self.b_i),"),
    _m("pe: the east cell's copy of a lags a step (a_mul_o <= a_o)", "pe",
       "m.d.sync += self.a_mul_o.eq(self.a_i)", "m.d.sync += self.a_mul_o.eq(self.a_o)"),
    _m("pe: the copy of a for the east cell is taken on every cycle, not on steps", "pe",
       "        with m.If(self.step):\n            m.d.sync += self.a_mul_o.eq(self.a_i)",
       "        m.d.sync += self.a_mul_o.eq(self.a_i)"),
    _m("pe: step does not pass b on to the south", "pe",
       "self.b_o.eq(self.b_i),\n", ""),
    # -- systolic array ----------------------------------------------------------------------------------
    _m("systolic: row r delayed r+1 steps (skew off by one)", "systolic",
       'west = self._skew(m, self.a[r], r, f"skew_a{r}")', 'west = self._skew(m, self.a[r], r + 1, f"skew_a{r}")'),
    _m("systolic: column c delayed c-1 steps (skew off by one)", "systolic",
       'north = self._skew(m, self.b[c], c, f"skew_b{c}")',
       'north = self._skew(m, self.b[c], max(c - 1, 0), f"skew_b{c}")'),
    _m("systolic: skew registers ignore clear", "systolic", _SKEW_CLEAR,
       "            with m.If(self.step):\n                m.d.sync += reg.eq(value)\n"),
    _m("systolic: a cell multiplies its own copy of a, not the west cell's", "systolic",
       "pe[r][c].a_mul_i.eq(pe[r][c - 1].a_mul_o)", "pe[r][c].a_mul_i.eq(pe[r][c].a_mul_o)"),
    _m("systolic: b of column c fed to every row at once (no southward pipeline)", "systolic",
       "                north = pe[r][c].b_o\n", ""),
    # -- matrix unit -------------------------------------------------------------------------------------
    _m("mm: tb handling swapped (b_estride / b_kstride)", "matrix_unit",
       "return Mux(instr.tb, instr.ldb, 1), Mux(instr.tb, 1, instr.ldb)",
       "return Mux(instr.tb, 1, instr.ldb), Mux(instr.tb, instr.ldb, 1)", file="ga2_hdl/matrix/feeder.py"),
    _m("mm: lda used for ldb", "matrix_unit",
       "Mux(instr.tb, 1, instr.ldb)", "Mux(instr.tb, 1, instr.lda)", file="ga2_hdl/matrix/feeder.py"),
    _m("mm: K - 1 latched as K (one slice too many; in order)", "matrix_unit",
       "fields.k_last.eq(instr.K - 1),", "fields.k_last.eq(instr.K),", file="ga2_hdl/matrix/feeder.py"),
    _m("mm: array not cleared at start (in order)", "matrix_unit",
       "feeder.ctl.clear.eq(clearing), array.clear.eq(clearing),", "feeder.ctl.clear.eq(clearing), array.clear.eq(0),"),
    _m("mm: ldc ignored (result rows packed with stride N; both feeders)", "matrix_unit",
       "row_stride = fields.ldc", "row_stride = fields.n_last + 1",
       file="ga2_hdl/matrix/result_writer.py"),
    _m("mm: A column walked with stride 1 instead of lda", "matrix_unit",
       "m.d.sync += [addr.eq(addr + lda), idx.eq(idx + 1)]", "m.d.sync += [addr.eq(addr + 1), idx.eq(idx + 1)]",
       file="ga2_hdl/matrix/staged_feeder.py"),
    _m("mm: flush one step short", "matrix_unit",
       "with m.If(flush_cnt == mn_last):", "with m.If(flush_cnt == mn_last - 1):", file="ga2_hdl/matrix/staged_feeder.py"),
    _m("mm: array does not step in the write cycles (in order the first is the last flush step)", "matrix_unit",
       "array.step.eq(feeder.ctl.step | writing),", "array.step.eq(feeder.ctl.step),"),
    _m("mm: M = N = 1 writes acc instead of acc + prod", "matrix_unit",
       "ctl.pe00_late.eq(single)", "ctl.pe00_late.eq(0)", file="ga2_hdl/matrix/staged_feeder.py"),
    _m("mm: A hold registers not zeroed after the last slice", "matrix_unit",
       'hold = Signal(signed(8), name=f"hold_a{r}")\n            with m.If(ctl.clear | last_slice_held):',
       'hold = Signal(signed(8), name=f"hold_a{r}")\n            with m.If(ctl.clear):',
       why_survives="equivalent: the flush steps then feed the last A slice again, but the B holds are still "
                    "zeroed, and an A operand meets in every PE exactly the B operand injected in the same step "
                    "(both skews and both pipelines are r + c steps long), so every flush product is A * 0 = 0; "
                    "the next MM clears the holds in its first cycle. (Zeroing neither hold is caught: next mutant)",
       file="ga2_hdl/matrix/staged_feeder.py"),
    _m("mm: hold registers never zeroed after the last slice (last_slice_held stuck at 0)", "matrix_unit",
       "last_slice_held.eq(last_slice_arrives)]", "last_slice_held.eq(0)]", file="ga2_hdl/matrix/staged_feeder.py"),
    _m("mm: result rows selected with stride cols - 1 (both feeders)", "matrix_unit",
       "sel_row.eq(sel_row + cols),\n                         sel.eq(sel_row + cols)]",
       "sel_row.eq(sel_row + cols - 1),\n                         sel.eq(sel_row + cols - 1)]",
       file="ga2_hdl/matrix/result_writer.py"),
    _m("mm: the result walk does not go back to (0, 0) of dst between MMs (both feeders)", "matrix_unit",
       "with m.If(~en):\n            m.d.sync += [row.eq(dst), *next_row_is(dst + row_stride), addr.eq(dst),",
       "with m.If(0):\n            m.d.sync += [row.eq(dst), *next_row_is(dst + row_stride), addr.eq(dst),", file="ga2_hdl/matrix/result_writer.py"),
    _m("mm: write address not advanced along a result row (both feeders)", "matrix_unit",
       "m.d.sync += [j.eq(j + 1), addr.eq(addr + 1), sel.eq(sel + 1)]",
       "m.d.sync += [j.eq(j + 1), sel.eq(sel + 1)]", file="ga2_hdl/matrix/result_writer.py"),
    # -- DMA -----------------------------------------------------------------------------------------------
    _m("dma: LD writes on re instead of rvalid", "dma",
       "writing.eq(self.ctl.busy & self.ext.rvalid),", "writing.eq(self.ctl.busy & self.ext.re),"),
    _m("dma: write address not incremented", "dma",
       "m.d.sync += [s.write_addr.eq(s.write_addr + 1), s.write_left.eq(s.write_left - 1)]",
       "m.d.sync += [s.write_left.eq(s.write_left - 1)]"),
    _m("dma: write address incremented twice", "dma",
       "m.d.sync += [s.write_addr.eq(s.write_addr + 1), s.write_left.eq(s.write_left - 1)]",
       "m.d.sync += [s.write_addr.eq(s.write_addr + 2), s.write_left.eq(s.write_left - 1)]"),
    _m("dma: ST writes one word early (in the read cycle)", "dma",
       "writing.eq(st_data_valid),", "writing.eq(issuing),"),
    _m("dma: one read too few issued (len - 1)", "dma",
       "issue_left.eq(instr.len),", "issue_left.eq(instr.len - 1),"),
    _m("dma: LD's external address drops its high half (xhi)", "dma",
       "issue_addr.eq(Mux(ld, ext_address(instr, Op.LD), instr.src)),", "issue_addr.eq(instr.src),"),
    _m("dma: ST's external address drops its high half (xhi)", "dma",
       "write_addr.eq(Mux(ld, instr.dst, ext_address(instr, Op.ST))),", "write_addr.eq(instr.dst),"),
    _m("dma: one read too many issued (the issue flag drops a word late)", "dma",
       "s.issue_more.eq(s.issue_left != 1)", "s.issue_more.eq(s.issue_left != 0)"),
    _m("dma: done one word early", "dma",
       "self.ctl.done.eq(writing & (s.write_left == 1))", "self.ctl.done.eq(writing & (s.write_left == 2))"),
    # -- requantiser -----------------------------------------------------------------------------------
    _m("rq: rounding dropped (truncates instead of rounding half up)", "requantiser",
       "low = (t[:width + 2].as_signed() + 1) >> 1", "low = t[:width + 2].as_signed() >> 1", file="ga2_hdl/vector/requant_pipeline.py"),
    _m("rq: upper saturation 127 -> 126", "requantiser",
       "Mux(over, top,", "Mux(over, top - 1,", file="ga2_hdl/vector/requant_pipeline.py"),
    _m("rq: lower saturation -128 -> -127", "requantiser",
       "Mux(under, -top - 1, low)", "Mux(under, -top, low)", file="ga2_hdl/vector/requant_pipeline.py"),
    _m("rq: upper saturation threshold off by one (product > hi)", "requantiser",
       "over.eq(product >= over_at)", "over.eq(product > over_at)", file="ga2_hdl/vector/requant_pipeline.py"),
    _m("rq: half_shift shifts by s instead of s - 1", "requantiser",
       "return (x << 1) >> s", "return x >> s", file="ga2_hdl/vector/requant_pipeline.py"),
    _m("rq: multiplier m unsigned (no sign extension)", "requantiser",
       "    mult: In(signed(16))", "    mult: In(16)", file="ga2_hdl/vector/requant_pipeline.py"),
    _m("rq: shift field truncated to 5 bits", "requantiser",
       "shift.eq(s.instr.s),", "shift.eq(s.instr.s[:5]),"),
    _m("rq: reads one element too few", "requantiser",
       "s.reading.eq(s.rd_left != 1)", "s.reading.eq(s.rd_left != 2)"),
    _m("rq: busy ends a cycle early (last step len + depth - 1)", "requantiser",
       "last_step.eq(s.instr.len + s.latency),", "last_step.eq(s.instr.len + s.latency - 1),"),
    _m("rq: the fields are loaded at reset only, not in every idle cycle", "requantiser",
       "        with m.If(~busy):\n"
       "            m.d.sync += [dst.eq(s.instr.dst),",
       "        with m.If(0):\n"
       "            m.d.sync += [dst.eq(s.instr.dst),"),
    # -- the overlapped requantiser (Config.rq_overlap) and what waits for it ------------------------------
    _m("rqo: a following RQ never waits (its reads may meet the writes before it)", "overlapped_requantiser",
       "return Mux(~collide[0], 0, Mux(~collide[1], 1, 2))", "return 0"),
    _m("rqo: the follow wait decided from the track a cycle stale", "overlapped_requantiser",
       "else track + 1 + w))[:16]", "else track + w))[:16]"),
    _m("rqo: the write track keeps the skew (not taken off after the first read)", "overlapped_requantiser",
       "m.d.sync += track.eq(track + s.lanes - s.times_lanes(skew))", "m.d.sync += track.eq(track + s.lanes)"),
    _m("rqo: the write track stands still", "overlapped_requantiser",
       "            m.d.sync += track.eq(track + s.lanes)", "            m.d.sync += track.eq(track)"),
    _m("rqo: the words selected with the valid bits' skew (no copy for the word path)", "overlapped_requantiser",
       "pipeline.word.eq(Array(words)[word_skew])", "pipeline.word.eq(Array(words)[skew])"),
    _m("rqo: the multiplier of the RQ being read, not of the word's", "overlapped_requantiser",
       "lane_pipeline.mult.eq(word_mult)", "lane_pipeline.mult.eq(mult)"),
    _m("rqo: a start beside a draining RQ takes the write side at once (no queue)", "overlapped_requantiser",
       "            with m.If(s.draining):\n"
       "                m.d.sync += [s.next_dst.eq(s.instr.dst)",
       "            with m.If(0):\n"
       "                m.d.sync += [s.next_dst.eq(s.instr.dst)"),
    _m("rqo: busy forgets the queued RQ (a third may start)", "overlapped_requantiser",
       "self.ctl.busy.eq(deciding_or_decided | waiting | reading | queued)",
       "self.ctl.busy.eq(deciding_or_decided | waiting | reading)"),
    _m("rqo: older never set (the RQ before the last is not in flight)", "overlapped_requantiser",
       "self.older.eq(queued)", "self.older.eq(0)"),
    # -- the wide requantiser (Config.rq_lanes): its lanes and their bank rule --------------------------------
    _m("rqw: the last cycle's lanes past the RQ's length read (and write) too", "wide_requantiser",
       "[s.reading & (s.rd_left > j) for j in range(1, s.lanes)]", "[s.reading for j in range(1, s.lanes)]",
       file="ga2_hdl/vector/overlapped_requantiser.py"),
    _m("rqw: the lanes' read addresses loaded without their offsets", "wide_requantiser",
       "[addr.eq(s.instr.src + j) for j, addr in enumerate(rd_addrs) if j]",
       "[addr.eq(s.instr.src) for j, addr in enumerate(rd_addrs) if j]", file="ga2_hdl/vector/overlapped_requantiser.py"),
    _m("rqw: the lanes' write addresses all the first lane's", "wide_requantiser",
       "[addr.eq(addr_next + j) for j, addr in enumerate(s.wr_addrs) if j]",
       "[addr.eq(addr_next) for j, addr in enumerate(s.wr_addrs) if j]", file="ga2_hdl/vector/overlapped_requantiser.py"),
    _m("rqw: a partial last cycle counted as a full one (the writes left skip zero)", "wide_requantiser",
       "written = writing if s.lanes == 1 else sum(p.o.valid for p in s.pipelines)",
       "written = writing if s.lanes == 1 else times_lanes(writing)", file="ga2_hdl/vector/overlapped_requantiser.py"),
    _m("rqw: the write track one word a cycle, not a cycle's lanes", "wide_requantiser",
       "            m.d.sync += track.eq(track + s.lanes)", "            m.d.sync += track.eq(track + 1)",
       file="ga2_hdl/vector/overlapped_requantiser.py"),
    _m("rqw: the follow wait steps one word a cycle, not a cycle's lanes", "wide_requantiser",
       "(track + lanes * (ahead + w) if lanes > 1", "(track + ahead + w if lanes > 1",
       file="ga2_hdl/vector/overlapped_requantiser.py"),
    _m("rqw: the wait decided over the lanes' window used at once, not registered (reads a cycle early)",
       "wide_requantiser", "m.d.sync += [s.deciding.eq(0), s.decided.eq(1), wait_q.eq(wait_now)]",
       "m.d.sync += [s.deciding.eq(0), wait_left.eq(wait_now), waiting.eq(wait_now != 0), reading.eq(wait_now == 0), first_read.eq(wait_now == 0)]", file="ga2_hdl/vector/overlapped_requantiser.py"),
    _m("rqw: the bank rule checks only each lane against its own (not the other lanes of the cycle)",
       "wide_requantiser", "for d in range(1 - w, w)]", "for d in range(0, 1)]", file="ga2_hdl/vector/requantiser.py"),
    _m("rqw: the write skew steps one word, not a cycle's lanes", "wide_requantiser",
       "window_may_collide(e + w * skew, banks=banks, lanes=lanes)", "window_may_collide(e + skew, banks=banks, lanes=lanes)",
       file="ga2_hdl/vector/requantiser.py"),
    # -- the softmax of two lanes (Config.sm_lanes) and the lanes' port-B groups ------------------------------
    _m("smw: the second lane reads past the end of a vector of odd length", "softmax",
       "read_has1 = reading & ~(rd_last & ~self.last_index[0])", "read_has1 = reading",
       file="ga2_hdl/vector/softmax_front.py"),
    _m("smw: the second lane's addresses start where the first's do", "softmax",
       "m.d.sync += [src_base1.eq(self.src + 1), rd_addr1.eq(self.src + 1)]",
       "m.d.sync += [src_base1.eq(self.src), rd_addr1.eq(self.src)]", file="ga2_hdl/vector/softmax_front.py"),
    _m("smw: a pair's maximum ignores its second score", "softmax",
       "above1 = exp_has1 & (score1 > score_max)", "above1 = 0", file="ga2_hdl/vector/softmax_front.py"),
    _m("smw: of a pair both above the maximum, the first is taken", "softmax",
       "second = exp_has1 & (score1 > score)", "second = 0", file="ga2_hdl/vector/softmax_front.py"),
    _m("smw: the sum takes the second exp of an odd vector's last pair", "softmax",
       "exps = s.payload.exp + Mux(s.payload.has1, s.payload.exp1, 0)", "exps = s.payload.exp + s.payload.exp1",
       file="ga2_hdl/vector/softmax_back.py"),
    _m("smw: the divide pass selects the buffer by the parity of the element after", "softmax",
       "m.d.sync += odd.eq(s.buffer_index[0])", "m.d.comb += odd.eq(s.buffer_index[0])",
       file="ga2_hdl/vector/softmax_back.py"),
    _m("top: a lane-wide unit's port n > 0 takes its group from the other units' (one unit per vector<n>)",
       "softmax", "groups.setdefault(f\"{lane}{n or ''}\", []).append(port)",
       "groups[f\"{lane}{n or ''}\"] = [port] if n else groups.get(lane, []) + [port]", file="ga2_hdl/top.py"),
    _m("seq: an SM or online instruction starts beside a draining RQ", "sequencer",
       "starts = [start & ~rq_draining if", "starts = [start if"),
    _m("seq: HALT does not wait for the requantiser's last write", "sequencer",
       "                idle &= ~self._unit(\"rq\").draining\n", ""),
    _m("sb: a lane holding two: its candidate not compared with its own entries still in flight", "scoreboard",
       'own[n] = [conflicts[n], conflicts[names.index(f"{lane}_before")]]', "own[n] = []"),
    _m("sb: a lane holding two: its second entry never takes the instruction before", "scoreboard",
       "_copy_kinds(entries[second], entries[n],", "_copy_kinds(entries[second], entries[second],"),
    _m("sb: a lane holding two: its entry in flight only while the lane is busy", "scoreboard",
       "in_flight[n] = self.busy[n] | draining", "in_flight[n] = self.busy[n]"),
    # -- overlapped loads (Config.ld_overlap): the packed DMA's two LDs and what waits for them ---------------
    _m("ldo: a start beside a draining LD takes the write side at once (no queue)", "overlapped_loads",
       "with m.If(pending & (~draining | last_beat)):", "with m.If(pending):", file="ga2_hdl/dma/packed_dma.py"),
    _m("ldo: the queued LD's context follows the instruction while it waits", "overlapped_loads",
       "with m.If(~s.active & ~pending):", "with m.If(~s.active):", file="ga2_hdl/dma/packed_dma.py"),
    _m("ldo: busy forgets the older LD (a third may start)", "overlapped_loads",
       "self.ctl.busy.eq(s.active | older)", "self.ctl.busy.eq(s.active)", file="ga2_hdl/dma/packed_dma.py"),
    _m("ldo: older never set (the LD before the last is not in flight)", "overlapped_loads",
       "self.older.eq(older)", "self.older.eq(0)", file="ga2_hdl/dma/packed_dma.py"),
    _m("ldo: the issue side ends a request early", "overlapped_loads",
       "last_request = s.issuing & s.is_ld & (s.issue_left == 1)", "last_request = s.issuing & s.is_ld & (s.issue_left == 2)",
       file="ga2_hdl/dma/packed_dma.py"),
    _m("ldo: the handed-over LD's first beat not marked first (its lanes below lo written)", "overlapped_loads",
       "ld_first.eq(1), ld_lo.eq(queued_lo)", "ld_first.eq(0), ld_lo.eq(queued_lo)", file="ga2_hdl/dma/packed_dma.py"),
    _m("ldo: the write side's lanes from the issue side's first and last lanes", "overlapped_loads",
       "lanes(ld_first, ld_left == 1, ld_lo, ld_hi)", "lanes(ld_first, ld_left == 1)", file="ga2_hdl/dma/packed_dma.py"),
    _m("ldo: seq: an ST starts beside a draining LD", "overlapped_loads",
       "starts[dma] = starts[dma] & ~(self._store & self._unit(\"dma\").draining)", "starts[dma] = starts[dma]",
       file="ga2_hdl/control/sequencer.py"),
    _m("ldo: seq: the store flag from the word's second range", "overlapped_loads",
       "self._next_word.ranges.a.rd)", "self._next_word.ranges.b.rd)", file="ga2_hdl/control/sequencer.py"),
    _m("ldo: seq: the scoreboard never sees an LD drain", "overlapped_loads",
       'scoreboard.dma_draining.eq(self._unit("dma").draining)', "scoreboard.dma_draining.eq(0)",
       file="ga2_hdl/control/sequencer.py"),
    _m("ldo: seq: HALT does not wait for the LDs' last write", "overlapped_loads",
       "                idle &= ~self._unit(\"dma\").draining\n", "", file="ga2_hdl/control/sequencer.py"),
    # -- softmax -------------------------------------------------------------------------------------------
    _m("sm: the exp pass starts one score late", "softmax",
       "rd_addr.eq(Mux(rd_last, src_base, rd_addr + s.lanes))", "rd_addr.eq(Mux(rd_last, src_base + 1, rd_addr + s.lanes))",
       file="ga2_hdl/vector/softmax_front.py"),
    _m("sm: max pass uses >= instead of >", "softmax",
       "with m.If(max_valid & (score > score_max)):", "with m.If(max_valid & (score >= score_max)):",
       file="ga2_hdl/vector/softmax_front.py",
       why_survives="equivalent: on a tie the running maximum is replaced by an equal value, so it holds the "
                    "same number after every element; the maximum is the only thing the max pass produces"),
    _m("sm: running max initialised to 0 instead of -128", "softmax",
       "score_max.eq(-128)", "score_max.eq(0)", file="ga2_hdl/vector/softmax_front.py"),
    _m("sm: exp ROM address computed as x - max", "softmax",
       "return (mx - x)[:8]", "return (x - mx)[:8]", file="ga2_hdl/vector/softmax_front.py"),
    _m("sm: rounding numerator without S/2", "softmax",
       "return (e << 16) + (total >> 1)", "return (e << 16)", file="ga2_hdl/vector/softmax_back.py"),
    _m("sm: score register unsigned (no sign extension)", "softmax",
       'score = Signal(signed(8), name="score")', 'score = Signal(8, name="score")', file="ga2_hdl/vector/softmax_front.py"),
    _m("sm: sum not cleared while idle", "softmax",
       "total.eq(0), ", "", file="ga2_hdl/vector/softmax_back.py"),
    # -- divider -------------------------------------------------------------------------------------------
    _m("div: trial subtraction when trial > den (not >=)", "divider",
       "fits = trial >= den", "fits = trial > den"),
    _m("div: last stage drops the numerator's low bit", "divider",
       "divide_step(remainder, low_bits[bit], den)", "divide_step(remainder, low_bits[bit] if bit else 0, den)"),
    _m("div: remainder kept one bit narrower", "divider",
       "return fits, Mux(fits, trial - den, trial)[:len(den)]",
       "return fits, Mux(fits, trial - den, trial)[:len(den) - 1]"),
    # -- sequencer -----------------------------------------------------------------------------------------
    _m("seq: cycles counter also counts while HALTED", "sequencer",
       "with m.If(counting):\n            m.d.sync += host.cycles.eq(host.cycles + 1)",
       "with m.If(counting | host.done):\n            m.d.sync += host.cycles.eq(host.cycles + 1)"),
    _m("seq: HALT not counted as an instruction", "sequencer",
       "self._halt(m, host.instructions.eq(host.instructions + 1))", "self._halt(m)"),
    _m("seq: decoupled, a faulting word is counted as an instruction", "sequencer",
       "with m.If(self._first_check & (err == Err.NONE)):", "with m.If(self._first_check):"),
    _m("seq: decoupled, a word is counted in every CHECK cycle, not its first", "sequencer",
       "            m.d.sync += self._first_check.eq(0)\n", ""),
    _m("seq: a counter or lane sees only its first unit's busy (the vector counter ignores SM)", "sequencer",
       "if getattr(OPS[unit_ops(name)[0]], key) == value)).any()", "if getattr(OPS[unit_ops(name)[0]], key) == value))[0]"),
    _m("seq: busy counters also count the dispatch cycle", "sequencer",
       'with m.If(self._busy_of("counter", counter, draining=True)):',
       'with m.If(self._busy_of("counter", counter, draining=True) | Cat(*(p.start for p in self.units)).any()):'),
    _m("seq: the busy counters leave out the result writer's cycles", "sequencer",
       'with m.If(self._busy_of("counter", counter, draining=True)):',
       'with m.If(self._busy_of("counter", counter)):'),
    _m("seq: HALT does not wait for the result writer", "sequencer",
       "idle = ~lane_busy.any() & ~scoreboard.draining", "idle = ~lane_busy.any()"),
    _m("seq: PC overflow not detected", "sequencer",
       "pc_overflow.eq(past_end)", "pc_overflow.eq(0)"),
    _m("seq: fetches pc instead of pc + 1 during EXEC", "sequencer",
       "fetch_addr.eq(pc + 1)]\n            with m.If(Cat(*(port.done", "fetch_addr.eq(pc)]\n            with m.If(Cat(*(port.done"),
    _m("seq: error not cleared by start", "sequencer",
       "m.d.sync += [pc.eq(0), host.error.eq(0),", "m.d.sync += [pc.eq(0),"),
    _m("seq: word error outranks PC overflow", "sequencer",
       "Mux(pc_overflow, Err.PC_OVERFLOW, word_err)", "Mux(word_err != 0, word_err, Mux(pc_overflow, Err.PC_OVERFLOW, 0))",
       why_survives="equivalent for every program in both simulators: pc reaches imem_words only after every word "
                    "0 .. imem_words-1 ran without a fault, and the code read at address imem_words is then word "
                    "0's (the address wraps when imem_words is a power of two), which is NONE, or an out-of-range "
                    "read that pysim and Verilator both return as 0 (non-power-of-two memories, checked by "
                    "test_differential's PC-overflow programs on the 24-word chip). Only real RAM with junk past "
                    "its depth could tell: the original's ranking is the safe one"),
    # -- instruction checker ---------------------------------------------------------------------------------
    _m("chk: SM len > sm_max_len not flagged", "checker",
       "Cat(*(op == o for o in LEN_LIMITED)).any() & (w.len > self._sm_max_len)", "0",
       file="ga2_hdl/control/check_operands.py"),
    _m("chk: RQ shift > MAX_SHIFT not flagged", "checker",
       "Cat(*((op == o) & (w.s > limit) for o, limit in MAX_SHIFTS.items())).any()", "0",
       file="ga2_hdl/control/check_operands.py"),
    _m("chk: external range not checked", "checker",
       "ext_out = ends.ext_over", "ext_out = 0"),
    _m("chk: LD's external range ignores the address's high half (xhi)", "checker",
       "s.operands.ext_base.eq(ext_address(s.w, Op.LD))", "s.operands.ext_base.eq(s.w.src)",
       file="ga2_hdl/control/check_operands.py"),
    _m("chk: ST's external range ignores the address's high half (xhi)", "checker",
       "s.operands.ext_base.eq(ext_address(s.w, Op.ST))", "s.operands.ext_base.eq(s.w.dst)",
       file="ga2_hdl/control/check_operands.py"),
    _m("chk: external range off by one (> ext_words)", "checker",
       "ends.ext_over.eq(sums.ext_end >= ext_words)", "ends.ext_over.eq(sums.ext_end > ext_words)",
       file="ga2_hdl/control/check_ranges.py"),
    _m("chk: stray bits not checked", "checker",
       "stray.eq((word & Const(((1 << INSTR_BITS) - 1) ^ used_bits(o, s.features), INSTR_BITS)) != 0)", "stray.eq(0)",
       file="ga2_hdl/control/check_operands.py"),
    _m("chk: M = rows + 1 allowed", "checker",
       "(w.M > self._rows)", "(w.M > self._rows + 1)", file="ga2_hdl/control/check_operands.py"),
    _m("chk: K = 0 allowed", "checker",
       "(w.N > self._cols) | (w.K == 0)", "(w.N > self._cols)", file="ga2_hdl/control/check_operands.py"),
    _m("chk: external range error outranks scratchpad range error", "checker",
       "Mux(sp_out, Err.SP_RANGE, Mux(ext_out, Err.EXT_RANGE, Err.NONE))",
       "Mux(ext_out, Err.EXT_RANGE, Mux(sp_out, Err.SP_RANGE, Err.NONE))"),
    _m("chk: B footprint ignores tb", "checker",
       "load(b, s.w.B, Mux(s.w.tb, k1, n1), Mux(s.w.tb, n1, k1), s.w.ldb)", "load(b, s.w.B, n1, k1, s.w.ldb)",
       file="ga2_hdl/control/check_operands.py"),
    _m("chk: scratchpad range off by one (> sp_words)", "checker",
       "y.over.eq(end_over >= 0)", "y.over.eq(end_over > 0)",
       file="ga2_hdl/control/check_ranges.py"),
    _m("chk: pipeline registers reset (not reset-less)", "checker",
       "RESET_LESS = True", "RESET_LESS = False", file="ga2_hdl/control/check_payloads.py"),
    _m("chk: an RQ over its own source (OVERLAP) not flagged", "checker",
       "sums.overlap.moves.eq(ops.is_rq & (ops.dst_ahead != 0))", "sums.overlap.moves.eq(0)",
       file="ga2_hdl/control/check_ranges.py"),
    _m("chk: an RQ in place flagged as OVERLAP", "checker",
       "sums.overlap.moves.eq(ops.is_rq & (ops.dst_ahead != 0))", "sums.overlap.moves.eq(ops.is_rq)",
       file="ga2_hdl/control/check_ranges.py"),
    _m("chk: an RQ right after its source flagged as OVERLAP (distance <= len)", "checker",
       "sums.overlap.dst_within.eq(ops.dst_ahead <= ops.a.tail)",
       "sums.overlap.dst_within.eq(ops.dst_ahead <= ops.a.tail + 1)",
       file="ga2_hdl/control/check_ranges.py"),
    _m("chk: OVERLAP outranked by SP_RANGE", "checker",
       "Mux(ends.tag.overlap, Err.OVERLAP,\n                       Mux(sp_out, Err.SP_RANGE,",
       "Mux(sp_out, Err.SP_RANGE,\n                       Mux(ends.tag.overlap, Err.OVERLAP,"),
    _m("chk: a faulting word's unit is ready (decoupled, started while the fault waits for idle lanes)",
       "checker", "self.units.eq(Mux(err == Err.NONE, ends.tag.units, 0))", "self.units.eq(ends.tag.units)"),
    _m("chk: an RQ/SM destination is not marked as written (decoupled)", "checker",
       "b.wr.eq(s.op.matches(Op.RQ, Op.SM, *online))", "b.wr.eq(0)", file="ga2_hdl/control/check_operands.py"),
    # -- decoupled mode: scoreboard, issue, streaming matrix unit --------------------------------------------
    _m("sb: write-after-read not detected", "scoreboard",
       "kinds = (xp.wr & (yq.rd | yq.wr)) | (xp.rd & yq.wr)", "kinds = (xp.wr & yq.wr) | (xp.rd & yq.wr)"),
    _m("sb: ranges that share only their last word do not overlap", "scoreboard",
       "kinds & _at_most(xp.lo, yq.hi) &", "kinds & (xp.lo < yq.hi) &"),
    _m("sb: a DMA entry keeps no ranges (the lane's kinds not copied)", "scoreboard",
       "m.d.sync += _copy_kinds(entries[n], cand, lane_kinds(lane, self.features))",
       "m.d.sync += _copy_kinds(entries[n], cand, lane_kinds(lane, self.features) if n else dict.fromkeys(RANGES, ()))"),
    _m("sb: the vector lane's entry is never in flight", "scoreboard",
       "conflicts = [flying & meet for flying, meet in zip(in_flight, meets)]",
       "conflicts = [flying & meet & (n != 2) for n, (flying, meet) in enumerate(zip(in_flight, meets))]"),
    _m("sb: the matrix lane's entry is never in flight", "scoreboard",
       "conflicts = [flying & meet for flying, meet in zip(in_flight, meets)]",
       "conflicts = [flying & meet & (n != 1) for n, (flying, meet) in enumerate(zip(in_flight, meets))]"),
    _m("sb: the MM before the last is never in flight (its writes beside the next MM's reads)", "scoreboard",
       "conflicts = [flying & meet for flying, meet in zip(in_flight, meets)]",
       "conflicts = [flying & meet & (n != 3) for n, (flying, meet) in enumerate(zip(in_flight, meets))]"),
    _m("sb: the second matrix entry never takes the last MM's ranges", "scoreboard",
       "m.d.sync += entries[-1].eq(entries[matrix])", "m.d.sync += entries[-1].eq(entries[-1])"),
    _m("sb: the last MM is not in flight while it drains", "scoreboard",
       "in_flight[matrix] = self.busy[matrix] | self.draining", "in_flight[matrix] = self.busy[matrix]"),
    _m("sb: the MM before the last is in flight whenever the unit drains", "scoreboard",
       "in_flight = [*self.busy, self.busy[matrix] & self.draining]", "in_flight = [*self.busy, self.draining]"),
    _m("sb: a candidate is blocked by its own lane's entries only", "scoreboard",
       "if lane != n or lane == matrix]", "if lane == n]"),
    _m("sb: an MM is never blocked by the matrix lane's entries", "scoreboard",
       "if lane != n or lane == matrix]", "if lane != n]"),
    _m("sb: the overlaps are registered from the previous candidate, not the word being decoded", "scoreboard",
       "*(meet.eq(_conflict(self.ranges, entry))", "*(meet.eq(_conflict(cand, entry))"),
    _m("sb: the ranges are read a word late in DECODE (the previous word's, when it issued at once)", "sequencer",
       "m.d.comb += [scoreboard.load.eq(1), self._acc_addr.eq(pc + 1)]",
       "m.d.comb += [scoreboard.load.eq(1), self._acc_addr.eq(pc)]"),
    _m("sb: the ranges are read a word late in CHECK (the waiting word's own)", "sequencer",
       "fetch_addr.eq(pc + 1), self._acc_addr.eq(pc + 1)]", "fetch_addr.eq(pc + 1), self._acc_addr.eq(pc)]"),
    _m("seq: decoupled issue ignores a busy DMA lane", "sequencer",
       "& ~lane_busy[lane] &", "& ~(lane_busy[lane] & (lane != 0)) &"),
    _m("seq: decoupled issue ignores a busy vector lane", "sequencer",
       "& ~lane_busy[lane] &", "& ~(lane_busy[lane] & (lane != 2)) &"),
    _m("seq: decoupled issue ignores the scoreboard", "sequencer",
       "& ~scoreboard.blocked[lane] for n", " for n"),
    _m("seq: decoupled, the word past the program's end is ready (PC_OVERFLOW ignored by the issue)",
       "sequencer", "self._ready.eq(Mux(past_end, 0, self._next_word.units))",
       "self._ready.eq(self._next_word.units)"),
    _m("seq: decoupled HALT does not wait for the lanes", "sequencer",
       "            with m.Elif(ir.op == Op.HALT):\n                with m.If(idle):",
       "            with m.Elif(ir.op == Op.HALT):\n                with m.If(1):"),
    _m("smm: B column ports step by 1 even when tb = 0", "matrix_unit",
       "[1] * s.rows + [s.ctl.fields.b_kstride] * (s.n_ops - s.rows)", "[1] * s.rows + [1] * (s.n_ops - s.rows)",
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("smm: writes start one cycle early", "matrix_unit",
       'ready = delayed(m, self.go, MM_DRAIN_CYCLES, "result_ready")',
       'ready = delayed(m, self.go, MM_DRAIN_CYCLES - 1, "result_ready")', file="ga2_hdl/matrix/result_writer.py"),
    _m("smm: one slice too many", "matrix_unit",
       "next_is_last = left == 1", "next_is_last = left == 0", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("smm: the writer's destination and fields follow the next MM while it drains", "matrix_unit",
       "with m.If(~busy):\n            m.d.sync += [dst.eq(self.dst), fields.eq(self.fields)]",
       "with m.If(1):\n            m.d.sync += [dst.eq(self.dst), fields.eq(self.fields)]",
       file="ga2_hdl/matrix/result_writer.py"),
    _m("smm: a held bank's operands count as read (the slice ends before they are)", "matrix_unit",
       "code.eq(Mux(s.held[b], code, s.codes.less_one(code)))", "code.eq(s.codes.less_one(code))",
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("smm: a new slice is planned on the banks of the slice after it", "matrix_unit",
       "ahead_counts = s.counts(s.ahead_bank, \"ahead\")",
       "ahead_counts = s.counts(next_banks, \"ahead\")", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("smm: the slice's end counts one operand per bank (two on a bank read in one cycle)", "matrix_unit",
       "s.codes.several(code) | (s.codes.some(code) & held[b])", "s.codes.some(code) & held[b]",
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("smm: many operands: a read takes none off a bank's binary count", "matrix_unit",
       "return Mux(code.any(), code - 1, 0)", "return code", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("smm: many operands: two on a bank count as one (the slice ends early)", "matrix_unit",
       "return code[1:].any()", "return code[2:].any()", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("smm: many operands: two operands share a bank where their indices but the top bit agree", "matrix_unit",
       "[indices[q] == indices[p] for q, p in s.pairs]", "[indices[q][:-1] == indices[p][:-1] for q, p in s.pairs]",
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("smm: many operands: the counts miss a group of four's fourth bit", "matrix_unit",
       "(s1 & s2) ^ c1 ^ c2, c1 & c2)", "(s1 & s2) ^ c1 ^ c2, c1 | c2)", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("tiles: the feeder reads on the bank the result writer writes", "matrix_unit",
       "held = vector_banks | self.writer_banks", "held = vector_banks", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("tiles: the last slice does not wait for the result writer", "matrix_unit",
       "with m.If(s.on_last & self.writer_busy):\n"
       "                    m.next = \"WAIT\"",
       "with m.If(0):\n"
       "                    m.next = \"WAIT\"", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("tiles: the last slice waits for the result writer only when it is the first", "matrix_unit",
       "with m.Elif(s.slice_done & s.next_is_last & self.writer_busy):", "with m.Elif(0):",
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("tiles: the feeder's READ register stays set in WAIT (reads on while the writer is busy)", "matrix_unit",
       'm.next = "WAIT"\n                    m.d.sync += reading.eq(0)', 'm.next = "WAIT"',
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("tiles: the feeder's PLAN register stays set (every slice planned from the first's addresses)",
       "matrix_unit", "*(h.eq(n) for h, n in zip(s.ahead_bank, s.next_banks)), planning.eq(0)]",
       "*(h.eq(n) for h, n in zip(s.ahead_bank, s.next_banks))]", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("tiles: the wait for the result writer lasts one cycle", "matrix_unit",
       "with m.If(~self.writer_busy):\n                    m.next = \"READ\"",
       "with m.If(1):\n                    m.next = \"READ\"", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("tiles: the sum does not start again after a tile's last product", "matrix_unit",
       "m.d.sync += [self.out.eq(total), acc.eq(0)]", "m.d.sync += [self.out.eq(total), acc.eq(total)]",
       file="ga2_hdl/matrix/tiled_pe.py"),
    _m("tiles: the result kept without the last product", "matrix_unit",
       "m.d.sync += [self.out.eq(total), acc.eq(0)]", "m.d.sync += [self.out.eq(acc), acc.eq(0)]",
       file="ga2_hdl/matrix/tiled_pe.py"),
    _m("tiles: a bubble's row operands are not zeroed (the hold registers multiply again)", "matrix_unit",
       "skew(Mux(self.valid, self.a[r], 0), r,", "skew(self.a[r], r,", file="ga2_hdl/matrix/tiled_array.py"),
    _m("tiles: the mark reaches every row in the same cycle", "matrix_unit",
       'last = skew(last, 1, f"last_r{r + 1}")', "last = last", file="ga2_hdl/matrix/tiled_array.py"),
    _m("smm: the ports of rows >= M read too", "matrix_unit",
       "[instr.M > i for i in range(rows)]", "[1 for i in range(rows)]",
       file="ga2_hdl/matrix/stream_feeder.py"),
    # -- decoupled mode: the banked scratchpad and the units that keep off each other's banks -----------------
    _m("bank: conflict detection ignores the operands' banks (all read at once)", "matrix_unit",
       "pending[p] & free[p] & ~Cat(*(pending[q] & s.same[q, p] for q in range(p))).any()",
       "pending[p] & free[p]",
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("bank: the next slice's bank pairs come from the current addresses", "matrix_unit",
       "*s.plan(s.ahead_bank, s.ahead_index)", "*s.plan(s.on_bank, s.ahead_index)",
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("bank: the bank map drops its skew (plain address mod banks)", "scratchpad",
       "return (wide + (wide >> b))[:b]", "return wide[:b]", file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: a lane set's bank takes the even row where its lane's is odd", "scratchpad",
       "return hit, Mux(low, odd, even)", "return hit, Mux(low, even, odd)", file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: a lane set's even row merges every lane's row", "scratchpad",
       "even.eq(and_or([(o & ~row[0], row)", "even.eq(and_or([(o, row)", file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: a write set's words rotated the wrong way round the banks", "scratchpad",
       "opened[(k - step) % nb], opened[k])", "opened[(k + step) % nb], opened[k])",
       file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: a write set rotated where the rows are not a multiple of the banks (a run wrapping past the top)",
       "scratchpad", "self._rotates = addr_width >= 2 * exact_log2(banks)", "self._rotates = True",
       file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: a write set's gap opened a lane early", "scratchpad",
       "Mux(low < nb - k, words[k], words[k - 1])", "Mux(low < nb - k - 1, words[k], words[k - 1])",
       file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: read data comes from the bank addressed this cycle, not the last", "scratchpad",
       "m.d.comb += [r.data.eq(Array(bank_data)[bank_q]) for r in requesters]",
       "m.d.comb += [r.data.eq(Array(bank_data)[bank]) for r in requesters]", file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: the requantiser never skews its writes", "requantiser",
       "m.d.comb += skew_now.eq(write_skew(s.rd_addr, s.dst, banks=self._banks, lanes=1))", "m.d.comb += skew_now.eq(0)"),
    _m("bank: debug reads run during programs", "scratchpad", "self._debug_rd.en.eq(seq.stopped)",
       "self._debug_rd.en.eq(1)", file="ga2_hdl/top.py"),
    _m("seq: stopped is never set again after a HALT or a fault (the host reads nothing)", "sequencer",
       "m.d.sync += [*also, self.stopped.eq(1)]", "m.d.sync += [*also]"),
    _m("bank: port B's reads skip the bank's data register (data before the units expect it)", "scratchpad",
       "reads = {g: self._read_request(m, g, registered if self._data_registered(g) else outputs)",
       "reads = {g: self._read_request(m, g, outputs)", file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: port A's reads skip the bank's data register on a decoupled AXI chip (each ST beat a beat early)",
       "axi_dma", "return self._registered(group) or self._port_a_data_registered",
       "return self._registered(group)", file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: a port-A read registered at the bank is selected with the bank of the read a cycle later",
       "axi_dma", "m.d.comb += [r.data.eq(Array(bank_data)[bank_read]) for r in requesters]",
       "m.d.comb += [r.data.eq(Array(bank_data)[bank_q]) for r in requesters]", file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: a read request's bank bits ignore its enable (an idle group reads, and its row wins the bank)",
       "scratchpad", "m.d.comb += hits.eq(Mux(en_q, on_bank, 0))", "m.d.comb += hits.eq(on_bank)",
       file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: a registered read's data is selected with the bank of the request a cycle later", "scratchpad",
       "selected.eq(Array(bank_data)[bank_read])", "selected.eq(Array(bank_data)[bank_q])",
       file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: read requests are not registered (every read's data a cycle early)", "scratchpad",
       "m.d.sync += [bank.eq(index), on_bank.eq(", "m.d.comb += [bank.eq(index), on_bank.eq(",
       file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: port B's reads skip the select register (the units see the word a cycle early)", "scratchpad",
       "m.d.comb += [r.data.eq(selected) for r in requesters]",
       "m.d.comb += [r.data.eq(Array(bank_data)[bank_q]) for r in requesters]", file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("bank: a write's or announced request's bank hits ignore its enable", "scratchpad",
       "return Mux(en, Const(1, self._banks) << bank, 0)",
       "return Const(1, self._banks) << bank", file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("smm: the hold registers take their operands a cycle early", "matrix_unit",
       "arrived = [delayed(m, port.en, READ_LATENCY, f\"op{p}_arrived\")",
       "arrived = [delayed(m, port.en, READ_LATENCY - 1, f\"op{p}_arrived\")", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("bank: the requantiser's skew is not added to its busy time", "requantiser",
       "s.last_step.eq(s.last_step + skew)", "s.last_step.eq(s.last_step)"),
    _m("bank: the requantiser's first read uses the previous RQ's skew", "requantiser",
       "with m.If(s.busy & (s.step == 1)):", "with m.If(s.busy & (s.step == 2)):"),
    _m("bank: the requantiser's read valid bits are tapped a cycle early", "requantiser",
       "pipeline.read.eq(Array(reads_late)[skew])", "pipeline.read.eq(Array([reading, *reads_late[:-1]])[skew])"),
    # -- decoupled mode: the matrix and vector lanes on port B, the vector lane first ------------------------
    _m("lanes: the streaming feeder reads on banks the vector lane asks for", "matrix_unit",
       "held = vector_banks | self.writer_banks", "held = self.writer_banks",
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("lanes: the feeder's copy of the vector lane's banks is the next cycle's (not registered)", "matrix_unit",
       "m.d.sync += vector_banks.eq(self.vector_banks_next)\n        held", "m.d.comb += vector_banks.eq(self.vector_banks_next)\n        held",
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("lanes: the result writer's copy of the vector lane's banks is the next cycle's (not registered)", "matrix_unit",
       "            m.d.sync += vector_banks.eq(self.vector_banks_next)\n", "            m.d.comb += vector_banks.eq(self.vector_banks_next)\n",
       file="ga2_hdl/matrix/result_writer.py"),
    _m("lanes: the result writer writes on banks the vector lane asks for", "matrix_unit",
       "write.eq(en & ~(vector_banks & on_bank).any())",
       "write.eq(en)", file="ga2_hdl/matrix/result_writer.py"),
    _m("lanes: the result writer's bank bits stay at the destination's bank", "matrix_unit",
       "            bank_moves_to(addr + 1)\n", "", file="ga2_hdl/matrix/result_writer.py"),
    # -- decoupled mode, Config.row_b: MM's rb, a B operand per array cell ------------------------------------
    _m("rb: rows 1.. read row 0's B (no row offset)", "matrix_unit",
       "[first + off for off in row_offsets[1:] for first in column_firsts]",
       "[first for off in row_offsets[1:] for first in column_firsts]", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("rb: without rb, rows 1.. keep stale B operands", "matrix_unit",
       "                    with m.If(shared[j]):", "                    with m.If(0):",
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("rb: rows 1.. read past M (ports of rows the MM does not have)", "matrix_unit",
       "optional_field(instr, \"rb\") & (instr.M > i) & (instr.N > j)", "optional_field(instr, \"rb\") & (instr.N > j)", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("rb: a cell's own B operand skewed by its row alone", "systolic",
       "skew(self.b[(r + 1) * cols + c], r + 1 + c,", "skew(self.b[(r + 1) * cols + c], r + 1,",
       file="ga2_hdl/matrix/tiled_array.py"),
    _m("chk: rb's B range ends at row 0's B", "checker",
       "rows_b = Mux(sums.rb, sums.a.prod, 0)", "rows_b = Mux(sums.rb, 0, 0)", file="ga2_hdl/control/check_ranges.py"),
    _m("sa: rows 1.. keep stale A operands (row 0's not shared)", "matrix_unit",
       "            with m.If(a_shared):", "            with m.If(0):", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("sa: rows 1.. still read A's rows (ports used)", "matrix_unit",
       "rows_a[1:] = [used & ~optional_field(instr, \"sa\") for used in rows_a[1:]]", "pass",
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("sa: row 0's A shared only while rb", "matrix_unit",
       "delayed(m, self.a_rd[0].en & s.sa,", "delayed(m, self.a_rd[0].en & s.sa & rb,", file="ga2_hdl/matrix/stream_feeder.py"),
    _m("chk: sa's A range spans every row", "checker",
       "prod = Mux(sums.sa, 0, x.prod)", "prod = x.prod", file="ga2_hdl/control/check_ranges.py"),
    _m("chk: sa is legal on a chip built without row_b", "checker",
       "^ used_bits(o, s.features), INSTR_BITS", "^ (used_bits(o, s.features) | 64 * (o == Op.MM)), INSTR_BITS", file="ga2_hdl/control/check_operands.py"),
    _m("chk: rb is legal on a chip built without row_b", "checker",
       "^ used_bits(o, s.features), INSTR_BITS", "^ (used_bits(o, s.features) | 32 * (o == Op.MM)), INSTR_BITS", file="ga2_hdl/control/check_operands.py"),
    # -- decoupled mode, Config.row_writes: the result writer a row a cycle -----------------------------------
    _m("rows: the first row goes when PE(0,0) is done, not PE(0, N-1)", "matrix_unit",
       "first = (ready & (fields.n_last == 0)) | (lag == 1)", "first = ready", file="ga2_hdl/matrix/result_writer.py"),
    _m("rows: a row is written on banks the vector lane asks for", "matrix_unit",
       "write.eq(en & ~(vector_banks & on_banks).any())", "write.eq(en)", file="ga2_hdl/matrix/result_writer.py"),
    _m("rows: every column's port writes, past the tile's N", "matrix_unit",
       "port.en.eq(write & used[j])", "port.en.eq(write)", file="ga2_hdl/matrix/result_writer.py"),
    _m("rows: the writer never claims its row's banks from the next tile's reads", "matrix_unit",
       "self.claim.eq(Mux(en_next, next_banks, 0))", "self.claim.eq(0)", file="ga2_hdl/matrix/result_writer.py"),
    _m("rows: the walk does not step the next row's address", "matrix_unit",
       "m.d.sync += [row.eq(row_next), row_next.eq(row_next + fields.ldc), i.eq(i + 1)]",
       "m.d.sync += [row.eq(row_next), i.eq(i + 1)]", file="ga2_hdl/matrix/result_writer.py"),
    _m("lanes: an operand's bank bit is the next bank's", "matrix_unit",
       "return Const(1, s.banks) << bank_index(address, s.banks)",
       "return Const(1, s.banks) << (bank_index(address, s.banks) + 1)[:len(bank_index(address, s.banks))]",
       file="ga2_hdl/matrix/stream_feeder.py"),
    _m("lanes: the vector lane's writes are left out of the banks it announces", "scratchpad",
       "self._announced.append(hits)",
       "self._announced.append(hits if data is None else Const(0, self._banks))",
       file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("lanes: the vector lane's reads are left out of the banks it announces", "scratchpad",
       "self._announced.append(hits)",
       "self._announced.append(hits if data is not None else Const(0, self._banks))",
       file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("lanes: the vector lane's reads skip the announce register", "scratchpad",
       "            en, addr, _ = self._announce(m, group, en, addr)\n",
       "            self._announce(m, group, en, addr)\n", file="ga2_hdl/memory/banked_scratchpad.py"),
    _m("lanes: the matrix unit is never told the banks the vector lane announces", "scratchpad",
       "m.d.comb += self.first_banks_next.eq(or_all(self._announced))",
       "m.d.comb += self.first_banks_next.eq(0 if True else or_all(self._announced))", file="ga2_hdl/memory/banked_scratchpad.py"),
    # -- the online unit (SMC, RSA, NRM; chips with online_unit = 1) -----------------------------------------
    _m("online: SMC's score wraps to 16 bits instead of clamping", "online_unit",
       "score.eq(round_half_saturate(shifted, 16))",
       "score.eq(((shifted + 1) >> 1)[:16].as_signed())"),
    _m("online: SMC's running sum not rescaled by alpha", "online_unit",
       "m.d.sync += scaled_sum.eq((s.product + (1 << 15)) >> 16)", "m.d.sync += scaled_sum.eq(state_sum)"),
    _m("online: SMC's weights rounded down", "online_unit",
       "init=WEIGHT64_TABLE)", "init=[e * 4095 >> 16 for e in EXP64_TABLE])"),
    _m("online: SMC reads the weights' table past its end", "online_unit",
       "weight.eq(Mux(far_d, 0, s.weight_rd.data))", "weight.eq(s.weight_rd.data)"),
    _m("online: SMC reads the exp table past its end", "online_unit",
       "exp = Mux(far_d, 0, s.rom_rd.data)", "exp = s.rom_rd.data"),
    _m("online: SMC's low digits written a cycle late", "online_unit",
       "lows_at.eq(later(2 * length + first_pass + 2))", "lows_at.eq(later(2 * length + first_pass + 3))"),
    _m("online: RSA's digit rows swapped", "online_unit",
       "digits = delayed(m, (s.high << DIGIT_BITS) + s.low, 3, \"rsa_digits\")",
       "digits = delayed(m, (s.low << DIGIT_BITS) + s.high, 3, \"rsa_digits\")"),
    _m("online: RSA's rescaling truncates", "online_unit",
       "rescaled.eq(((s.product + (1 << 15)) >> 16) + s.digits)", "rescaled.eq((s.product >> 16) + s.digits)"),
    _m("online: RSA reads the high row where the low one is", "online_unit",
       "m.d.sync += [rd_addr.eq(lo_ptr), phase.eq(1)]", "m.d.sync += [rd_addr.eq(hi_ptr), phase.eq(1)]"),
    _m("online: NRM saturates high at 126", "online_unit",
       "Mux(flags[0], 127, Mux(flags[1], -128, quotient - 128))", "Mux(flags[0], 126, Mux(flags[1], -128, quotient - 128))"),
    _m("online: NRM divides by a sum that is not positive", "online_unit",
       "out8.eq(Mux(flags[2], 0, ", "out8.eq(Mux(0, 0, "),
    _m("online: NRM's quotient one restoring step short", "online_unit",
       "for k in reversed(range(QUOTIENT_BITS)):", "for k in reversed(range(1, QUOTIENT_BITS)):"),
    # -- wide scores (wide_scores = 1: SMC's ws, each score 128 x a high plane's word + a low plane's) ----------
    _m("wide: SMC weighs the high plane's score 256", "online_unit",
       "(s.score_high << DIGIT_BITS) + s.data.as_signed()", "(s.score_high << (DIGIT_BITS + 1)) + s.data.as_signed()"),
    _m("wide: SMC reads the low plane's word from the high plane", "online_unit",
       "m.d.sync += [rd_addr.eq(lo_ptr), phase.eq(0), hi_ptr.eq(hi_ptr + 1), lo_ptr.eq(lo_ptr + 1)]",
       "m.d.sync += [rd_addr.eq(hi_ptr), phase.eq(0), hi_ptr.eq(hi_ptr + 1), lo_ptr.eq(lo_ptr + 1)]"),
    _m("wide: a wide SMC's events come as a narrow one's", "online_unit",
       "later = lambda at: at + Mux(wide_smc, length, 0)", "later = lambda at: at + Mux(wide_smc, 0, 0)"),
    _m("wide: the checker takes a wide SMC's scores as one plane", "online_unit",
       "scores = load(a, s.w.src, ln1, optional_field(s.w, \"ws\"), s.w.ld) \\", "scores = load(a, s.w.src, ln1) \\",
       file="ga2_hdl/control/check_operands.py"),
    # -- the packed DMA (bus_bytes > 1: a beat of bytes, a scratchpad port per byte lane) -------------------------
    _m("packed: the first beat leaves out its first lane", "packed_dma", "(lo <= j)", "(lo < j)"),
    _m("packed: the last beat leaves out its last lane", "packed_dma", "(j <= hi)", "(j < hi)"),
    _m("packed: LD zero-extends its bytes", "packed_dma", "byte[7].replicate(WORD - 8)", "Const(0, WORD - 8)"),
    _m("packed: ST writes whole beats (no strobes)", "packed_dma", "self.ext.wstrb.eq(s.st_lanes)",
       "self.ext.wstrb.eq(Mux(writing, (1 << w) - 1, 0))"),
    _m("packed: the beat count rounds down", "packed_dma", "+ length + s.w - 1) >> s.lane_bits",
       "+ length) >> s.lane_bits"),
    _m("packed: every beat's reads are masked as the first's", "packed_dma",
       "issue_more.eq(issue_left != 1), issue_first.eq(0)]", "issue_more.eq(issue_left != 1)]"),
    _m("packed: LD swaps neighbouring lanes' words", "packed_dma", "port.addr.eq(write_sp + j)",
       "port.addr.eq(write_sp + (j ^ 1))"),
    _m("packed: ST writes each beat to the next beat's address", "packed_dma", "write_beat.eq(beat)",
       "write_beat.eq(beat + 1)"),
    # -- ST of whole words (st_words = 1: wd, four bytes a word through either packed DMA) ----------------------
    _m("words: an ST of whole words stores each word's low byte", "packed_dma",
       "    return Mux(is_wide, Cat(*(port.data for port in ports[:len(ports) // WORD_BYTES])), bytes_)",
       "    return bytes_", file="ga2_hdl/dma/word_stores.py"),
    _m("words: a beat of words moves on W scratchpad words", "packed_dma",
       "return Mux(is_wide, w // WORD_BYTES, w) if st_words else w", "return w",
       file="ga2_hdl/dma/word_stores.py"),
    _m("words: the first word counts the lanes before it as words", "packed_dma",
       "return sp_addr - Mux(is_wide, first_lane >> WORD_BITS, first_lane)", "return sp_addr - first_lane",
       file="ga2_hdl/dma/word_stores.py"),
    _m("words: the packed DMA counts an ST of words as len bytes", "packed_dma",
       "length = word_stores.ext_length(instr, st_words=st_words)", "length = instr.len"),
    _m("words: the checker takes an ST of words as len bytes", "packed_dma",
       "ext_tail = word_stores.ext_length(s.w, st_words=True) - 1 if words else ln1", "ext_tail = ln1",
       file="ga2_hdl/control/check_operands.py"),
    _m("words: the checker lets an unaligned ST of words through", "packed_dma",
       "bad_shape = bad_shape | word_stores.misaligned(op == Op.ST, w, st_words=True)", "pass",
       file="ga2_hdl/control/check_operands.py"),
    # -- the AXI4 DMA (axi = 1: bursts, valid/ready, the write fence) ------------------------------------------
    _m("axi: an LD reads around unanswered writes (no fence)", "axi_dma",
       "requesting = self.ctl.busy & req_more & ~(s.is_ld & fenced)", "requesting = self.ctl.busy & req_more"),
    _m("axi: HALT does not wait for the last write's answer", "axi_dma",
       "self.quiet.eq((b_pending == 0) | ((b_pending == 1) & answered & ~aw_taken))", "self.quiet.eq(1)"),
    _m("axi: bursts cross 4 KiB", "axi_dma", "n = Mux(left < to_page, left, to_page)", "n = left",
       file="ga2_hdl/dma/burst_plan.py"),
    _m("axi: a burst after a page's end is sized as if mid-page", "axi_dma",
       "left_first = Mux(ends_page, next_left[exact_log2(page):] == 0, left < to_page)", "left_first = left < to_page"),
    _m("axi: a later burst of 257 to 511 beats is not cut at 256", "axi_dma",
       "at_most = Mux(left_first, next_left[exact_log2(AXI_MAX_BURST):] != 0,",
       "at_most = Mux(left_first, next_left[exact_log2(AXI_MAX_BURST) + 1:] != 0,"),
    _m("axi: the checker's first burst ignores the page's end", "axi_dma",
       "ends.dma.first_burst.eq(shortest(sums.beats, sums.to_page))",
       "ends.dma.first_burst.eq(shortest(sums.beats, self._page_beats))", file="ga2_hdl/control/check_ranges.py"),
    _m("axi: the checker's last beat one short (the write fence's range)", "axi_dma",
       "ends.dma.last_beat.eq(sums.ext_end[lb:lb + bw])", "ends.dma.last_beat.eq(sums.ext_end[lb:lb + bw] - 1)",
       file="ga2_hdl/control/check_ranges.py"),
    _m("axi: WLAST a beat early on an ST's last burst", "axi_dma", "w_final.eq(s.w_left == 2)", "w_final.eq(s.w_left == 3)"),
    _m("axi: W's bursts not cut at 256 beats", "axi_dma", "ext.wlast.eq(w_full | w_page_end | w_final)",
       "ext.wlast.eq(w_page_end | w_final)"),
    _m("axi: W's bursts end a beat before a page's end", "axi_dma", "w_page_end.eq(page_end(w_beat, 1))",
       "w_page_end.eq(page_end(w_beat, 2))"),
    _m("axi: the fence's pending flag drops with the first answer", "axi_dma",
       "pending.eq(aw_taken | (pending & ~(answered & (b_pending == 1))))", "pending.eq(aw_taken | (pending & ~answered))"),
    _m("axi: a beat that goes straight to W is queued too", "axi_dma",
       "queue.w_en.eq(arriving & ~(sending & ~queue.r_rdy))", "queue.w_en.eq(arriving)"),
    _m("axi: ST's words bypass their register (each beat sends the next beat's words)", "axi_dma",
       'm.d["comb" if at_banks else "sync"] += read_words.eq(words)', "m.d.comb += read_words.eq(words)"),
    _m("axi: ST reads on while the W queue is full", "axi_dma",
       "(in_flight + queue.level < ST_QUEUE_DEPTH)", "(in_flight < ST_QUEUE_DEPTH)"),
    _m("axi: ST finishes before its last burst is on AW", "axi_dma",
       "(last_sent | s.w_finished) & all_requested", "(last_sent | s.w_finished)"),
    _m("axi: the fence forgets the earlier stores", "axi_dma", "fresh = b_pending == 0", "fresh = 1"),
    _m("axi: LD zero-extends its bytes", "axi_dma", "word = Cat(byte, byte[7].replicate(WORD - 8))",
       "word = Cat(byte, Const(0, WORD - 8))"),
    _m("axi: the stall count has no grace cycles", "axi_dma", "self.stalled.eq(idle_beat & (grace == 0))",
       "self.stalled.eq(idle_beat)"),
    _m("axi: an LD's grace is an ST's", "axi_dma", "grace.eq(Mux(s.ld, self._ext_latency, s.latency))",
       "grace.eq(s.latency)"),
    _m("axi: a cycle that takes an R beat counts as a stall", "axi_dma",
       "idle_beat = self.ctl.busy & ~s.receiving & ~s.sending", "idle_beat = self.ctl.busy & ~s.sending"),
)


def mutate(mutant, repo=REPO_DIR):
    """The mutated text of the mutant's file; ValueError when its anchor does not occur exactly once."""
    return mutation.mutate(mutant, repo)


def check_anchors(mutants=RTL_MUTANTS, repo=REPO_DIR):
    """``(label, problem)`` for every mutant whose anchor does not occur exactly once, or whose
    substitution does nothing; also duplicate labels."""
    return mutation.check_anchors(mutants, repo)


def selection_for(mutant, selection=SELECTION):
    """The fixed selection, the mutated unit's own test file first."""
    first = UNIT_TESTS.get(mutant.unit) if mutant else None
    files = [first] if first in selection else []
    return files + [f for f in selection if f != first]


def oracle(repo=REPO_DIR, selection=SELECTION, timeout=900, extra_args=()):
    """The RTL's oracle: ``selection`` (the mutated unit's tests first) run by pytest in a copy of ``repo``."""
    return PytestFiles(repo, lambda m: selection_for(m, selection), timeout, extra_args)


def run_mutant(mutant, repo=REPO_DIR, selection=SELECTION, timeout=900, extra_args=()):
    """Apply one mutant (None: the unmutated tree, the baseline) to a copy of the repository and run the
    selection there; the Outcome."""
    return mutation.check(mutant, oracle(repo, selection, timeout, extra_args))


def run_mutants(mutants=RTL_MUTANTS, jobs=2, report=None, baseline=True, timeout=900, repo=REPO_DIR,
                selection=SELECTION, progress=False):
    """Every mutant in parallel (``jobs`` at a time): a list of (mutant, Outcome), the baseline first as
    (None, Outcome) when asked for (every verdict means something only when the baseline passes).
    ``report(mutant, outcome)`` may return a line to print as each finishes (``mutation.run``)."""
    tasks = ([None] if baseline else []) + list(mutants)
    judge = oracle(repo, selection, timeout)
    outcomes = mutation.run([(m, judge) for m in tasks], jobs, progress=progress,
                            report=report and (lambda m, _, o: report(m, o)))
    return list(zip(tasks, outcomes))


def summarise(rows):
    """Counts and verdicts of a run, ready for JSON. Broken mutants (bad anchors, trees that cannot be
    built) are counted apart: ``valid`` and the fractions leave them out."""
    base = None
    if rows and rows[0][0] is None:
        base, rows = rows[0][1], rows[1:]
    problems = []
    if base is not None and base.status != "survived":
        problems.append(f"the UNMUTATED tree fails the selection ({base.status}: {base.detail}): no verdict "
                        f"below means anything")
    valid = [(m, o) for m, o in rows if not o.broken]
    caught = sum(o.caught for _, o in valid)
    equivalent = [m.label for m, o in valid if mutation.verdict(m, o) == mutation.EQUIVALENT]
    holes = [m.label for m, o in valid if not o.caught and not m.why_survives]
    for m, o in rows:
        if o.broken:
            problems.append(f"{m.label}: {o.detail}" if o.status == mutation.BAD_ANCHOR else
                            f"{m.label}: broken: {o.detail}")
        if o.caught and m.why_survives:
            problems.append(f"{m.label}: explained as equivalent but caught ({o.detail})")
    for label in holes:
        problems.append(f"NOT CAUGHT and not explained: {label}")
    return {
        "baseline": None if base is None else ("passes" if base.status == "survived" else base.status),
        "baseline_seconds": None if base is None else round(base.seconds, 1),
        "total": len(rows), "valid": len(valid), "caught": caught,
        "timeouts": sum(o.status == "timeout" for _, o in valid),
        "survived": len(valid) - caught, "equivalent": equivalent, "unexplained_survivors": holes,
        "bad_anchors": [m.label for m, o in rows if o.status == mutation.BAD_ANCHOR],
        "broken": [m.label for m, o in rows if o.broken],
        "caught_fraction": round(caught / len(valid), 3) if valid else None,
        "mutants": [{"label": m.label, "unit": m.unit, "file": m.file, "status": o.status,
                     "caught": o.caught, "detail": o.detail, "seconds": round(o.seconds, 1),
                     "why_survives": m.why_survives, "log_tail": o.log_tail} for m, o in rows],
        "problems": problems,
    }


def verdict_text(o):
    return {"caught": o.detail, "timeout": f"TIMEOUT ({o.detail})", "survived": "NOT CAUGHT",
            "bad anchor": "BAD ANCHOR", "broken": f"broken: {o.detail}"}.get(o.status, o.status)


def snapshot(repo=REPO_DIR, dest=None, head=False):
    """A frozen copy of the tree that every mutant of one run is made from (others may be editing the
    working tree while a run takes its 20-40 minutes: copying the live tree per mutant once mixed a
    half-finished edit into the later mutants, which then "failed" for the wrong reason). With ``head`` the
    committed tree (``git archive HEAD``) plus this tool's own untracked files; else the working tree."""
    dest = dest or tempfile.mkdtemp(prefix="ga2_rtl_snapshot_")
    if not head:
        shutil.copytree(repo, dest, ignore=PytestFiles.ignore, dirs_exist_ok=True)
        return dest
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=repo, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", dest], input=archive.stdout, check=True)
    untracked = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=repo, capture_output=True,
                               text=True, check=True).stdout.split()
    for rel in untracked:
        if rel in ("ga2_sw/mutation.py", "sim/rtl_mutants.py", "tests/test_rtl_mutants.py",
                   "tests/test_rtl_mutant_kills.py"):
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copy2(os.path.join(repo, rel), os.path.join(dest, rel))
    return dest


def _table(headers, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def main_rtl(args):
    """``ga2 mutants --rtl``: run, print the table and totals, write JSON; exit 1 on any problem (a broken
    mutant or bad anchor, a failing baseline, an unexplained survivor)."""
    import json
    jobs = 2 if args.jobs is None else args.jobs
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, not {jobs}")
    chosen = RTL_MUTANTS
    if args.only:
        chosen = tuple(m for m in RTL_MUTANTS if any(t in m.label for t in args.only))
        if not chosen:
            raise ValueError(f"no RTL mutant label contains any of {args.only}")
    print(f"{len(chosen)} RTL mutants, {jobs} at a time; selection: {' '.join(SELECTION)}", flush=True)
    start = time.perf_counter()
    done = [0]

    def report(m, o):
        done[0] += 1
        if not args.no_progress:
            name = "(baseline: unmutated)" if m is None else m.label
            text = ("passes" if o.status == "survived" else "FAILS: " + verdict_text(o)) if m is None else verdict_text(o)
            return f"[{done[0]}/{len(chosen) + (not args.no_baseline)}] {o.seconds:6.1f} s  {name}: {text}"

    source = getattr(args, "source", "worktree") or "worktree"
    if source in ("worktree", "head"):
        tree = snapshot(head=source == "head")
        print(f"mutants are made from a snapshot of the {'committed tree (HEAD)' if source == 'head' else 'working tree'}: "
              f"{tree}", flush=True)
    else:
        tree = source
    try:
        rows = run_mutants(chosen, jobs=jobs, report=report, baseline=not args.no_baseline, timeout=args.timeout,
                           repo=tree, progress=not args.no_progress)
    finally:
        if tree != source:
            shutil.rmtree(tree, ignore_errors=True)
    elapsed = time.perf_counter() - start
    s = summarise(rows)
    if rows and rows[0][0] is None:
        print(f"unmutated tree: {'passes the selection' if rows[0][1].status == 'survived' else 'FAILS'} "
              f"({rows[0][1].seconds:.0f} s)")
        rows = rows[1:]
    print(_table(["mutant", "unit", "caught by", "s"],
                 [(m.label, m.unit, verdict_text(o) + (" (equivalent)" if mutation.verdict(m, o) == mutation.EQUIVALENT else ""),
                   f"{o.seconds:.0f}") for m, o in rows]))
    print()
    print(f"{s['caught']} of {s['valid']} caught ({100 * (s['caught_fraction'] or 0):.1f}%), {s['timeouts']} of "
          f"them by a timeout; {s['survived']} survived ({len(s['equivalent'])} explained as equivalent); "
          f"{len(s['broken'])} broken ({len(s['bad_anchors'])} bad anchors); {elapsed:.0f} s wall with {jobs} jobs")
    for m, o in rows:
        if not o.caught and not o.broken:
            print(f"- survivor '{m.label}': " + (m.why_survives or "NOT EXPLAINED"))
    for p in s["problems"]:
        print(f"PROBLEM: {p}")
    if args.json:
        from ga2_sw.options import atomic_write
        with atomic_write(args.json) as f:
            f.write(json.dumps({"seconds": round(elapsed, 1), "jobs": jobs, "selection": list(SELECTION), **s},
                               indent=1) + "\n")
    return 1 if s["problems"] else 0
