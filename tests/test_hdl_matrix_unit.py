# amaranth: UnusedElaboratable=no
"""The matrix unit (MM) against an independent numpy reference: its exact busy time and its schedule, cycle by
cycle, with either operand feeder. In order (``test_mm_*``) the staged feeder reads one operand word per cycle;
decoupled (``test_smm_*``) the streaming feeder reads a whole k-slice per cycle through a port per array row and
column."""

import random

import numpy as np
import pytest

from ga2_sw import isa
from ga2_sw.banking import bank_of, mm_extra_cycles
from ga2_sw.config import Config
from ga2_sw.timing import STREAM_MM_OVERHEAD
from ga2_hdl.matrix.matrix_unit import MatrixUnit
from ga2_hdl.top import build_unit, unit_parameters
from sim.testing import arbitrated_rounds, UnitBench, run_bench, start_and_wait, unit_verilog, verilog_ports

STAGED = dict(mode="inorder", sp_words=512)
STREAM = dict(mode="decoupled", sp_words=256)
KMAX = 20
EXTREME_BYTES = [0x80, 0x7F, 0x80, 0x7F, 0x00, 0x01, 0xFF]     # mostly -128 and 127


# -- shared: the instruction, the reference, the harness ------------------------------------------------------

def encode_mm(*, dst, A, B, M, K, N, tb, lda, ldb, ldc, rb=0, sa=0, **_):
    """The 128-bit MM word, field positions straight from the encoding table of docs/ISA.md."""
    return (3 | tb << 4 | rb << 5 | sa << 6 | dst << 8 | A << 24 | B << 40 | K << 56 | M << 72 | N << 80
            | lda << 88 | ldb << 100 | ldc << 112)


def busy_time(config, c):
    """docs/ISA.md: staged ``(K + 1)(M + N) + MN``; streaming ``K + extra + 8 + MN``, ``extra`` the cycles the
    slices lose to operands on one bank (``ga2_sw.banking``, checked on its own in tests/test_banking.py)."""
    M, K, N = c["M"], c["K"], c["N"]
    if not config.decoupled:
        return (K + 1) * (M + N) + M * N
    instr = isa.mm(c["dst"], c["A"], c["B"], M, K, N, c["tb"], c["lda"], c["ldb"], c["ldc"])
    return K + mm_extra_cycles(instr, config) + STREAM_MM_OVERHEAD + M * N


def footprints(c):
    """Extent (first word, word count) of A, B and the destination."""
    M, K, N = c["M"], c["K"], c["N"]
    fb = (N - 1) * c["ldb"] + K if c["tb"] else (K - 1) * c["ldb"] + N
    fb += (M - 1) * c["lda"] * c.get("rb", 0)             # rb: row i's B, i*lda words on (docs/ISA.md)
    fa = (M - 1) * c["lda"] * (1 - c.get("sa", 0)) + K    # sa: every row reads row 0's A
    return {"A": (c["A"], fa), "B": (c["B"], fb),
            "dst": (c["dst"], (M - 1) * c["ldc"] + N)}


def reference(image, c):
    """The memory after MM, from the OLD image: operands gathered with numpy indexing, int64 matmul, int32
    words written."""
    words = np.array(image, dtype=np.int64)
    s8 = ((words & 0xFF) ^ 0x80) - 0x80
    i = np.arange(c["M"])[:, None]
    k = np.arange(c["K"])
    A = s8[c["A"] + i * c["lda"] * (1 - c.get("sa", 0)) + k[None, :]]    # M x K (sa: row 0's, M times)
    j = np.arange(c["N"])[None, :]
    if c["tb"]:
        Bop = s8[c["B"] + j * c["ldb"] + k[:, None]]                # K x N, stored transposed
    else:
        Bop = s8[c["B"] + k[:, None] * c["ldb"] + j]                # K x N
    if c.get("rb"):                     # row i's own B, i*lda words on: an M x K x N stack, one product a row
        Bops = s8[c["B"] + np.arange(c["M"])[:, None, None] * c["lda"] +
                  ((j * c["ldb"] + k[:, None]) if c["tb"] else (k[:, None] * c["ldb"] + j))[None, :, :]]
        C = np.einsum("ik,ikj->ij", A, Bops)
    else:
        C = A @ Bop
    assert np.abs(C).max() < 2 ** 31
    out = words.copy()
    dst = c["dst"] + i * c["ldc"] + j
    assert len(np.unique(dst)) == dst.size, "the tests keep ldc >= N: every result has its own word"
    out[dst] = C & 0xFFFFFFFF
    return [int(w) for w in out]


def random_image(rng, config):
    """Garbage everywhere, including the upper 24 bits of every operand word."""
    return [int(w) for w in rng.integers(0, 1 << 32, config.sp_words, dtype=np.uint64)]


def run_cases(config, cases, *, back_to_back=False):
    """Run MM cases on one unit and scratchpad; check the whole memory and the busy time of every case, and
    return the busy times.

    Without ``back_to_back`` the memory is reloaded with each case's image before it starts. With it, each case
    starts in the cycle after the previous one's ``done`` and runs on the memory the previous one left (its
    reference image is computed from that). A second testbench puts garbage on ``instr`` whenever ``start`` is
    low, so the unit must latch."""
    unit = build_unit("mm", config)
    bench = UnitBench(unit, config, cases[0][1])
    garbage = random.Random(1234)
    running = [True]
    busy_seen = []

    async def main(ctx):
        try:
            image = cases[0][1]
            for n, (c, case_image) in enumerate(cases):
                if n and not back_to_back:
                    image = case_image
                    for addr, word in enumerate(image):
                        ctx.set(bench.sp.cell(addr), word)
                want = reference(image, c)
                if back_to_back and n + 1 < len(cases):
                    # start_and_wait's trailing tick would put a cycle between done and the next start.
                    busy = await start_until_done(ctx, unit, encode_mm(**c))
                else:
                    busy = await start_and_wait(ctx, unit, encode_mm(**c))
                busy_seen.append(busy)
                assert busy == busy_time(config, c), (n, c, busy)
                if back_to_back and n + 1 < len(cases):
                    image = want          # checked after the last case (writes land one cycle late)
                    continue
                got = [ctx.get(bench.sp.cell(addr)) for addr in range(config.sp_words)]
                if got != want:
                    bad = [(a, got[a], want[a]) for a in range(config.sp_words) if got[a] != want[a]]
                    raise AssertionError(f"case {n} {c}: {len(bad)} wrong words, first {bad[:4]}")
        finally:
            running[0] = False

    async def scramble_instr(ctx):
        while running[0]:
            if not ctx.get(unit.ctl.start):
                ctx.set(unit.ctl.instr.as_value(), garbage.getrandbits(128))
            await ctx.tick()

    run_bench(bench, main, scramble_instr, vcd_name=f"mm_{config.mode.value}_{config.rows}x{config.cols}")
    return busy_seen


async def start_until_done(ctx, unit, instr_value, limit=10000):
    """Like ``start_and_wait`` but returns right after the ``done`` cycle, so that the caller's next ``start``
    falls in the cycle after ``done``."""
    ctx.set(unit.ctl.instr.as_value(), instr_value)
    ctx.set(unit.ctl.start, 1)
    await ctx.tick()
    ctx.set(unit.ctl.start, 0)
    for busy_cycles in range(1, limit):
        assert ctx.get(unit.ctl.busy), busy_cycles
        done = ctx.get(unit.ctl.done)
        await ctx.tick()
        if done:
            return busy_cycles
    raise AssertionError(f"unit still busy after {limit} cycles")


def check_schedule(config, c, reads, writes):
    """Cycle by cycle, with ``start`` in cycle 0: ``busy`` in cycles 1 .. L only and ``done`` in cycle L only,
    where L is X in order and the last read decoupled (the result writer then drains, ``draining`` in cycles
    L + 1 .. X only); the reads ``{(cycle, port): address}``, where ``port`` indexes ``unit.read_ports``; the
    writes ``{cycle: address}``; and the memory afterwards."""
    X = busy_time(config, c)
    L = max(cycle for cycle, _ in reads) if config.decoupled else X
    assert max(writes) == X
    image = random_image(np.random.default_rng(9), config)
    unit = build_unit("mm", config)
    bench = UnitBench(unit, config, image)

    async def tb(ctx):
        ctx.set(unit.ctl.instr.as_value(), encode_mm(**c))
        ctx.set(unit.ctl.start, 1)
        await ctx.tick()
        ctx.set(unit.ctl.start, 0)
        ctx.set(unit.ctl.instr.as_value(), 0)
        got_reads, got_writes = {}, {}
        for cycle in range(1, X + 3):
            busy, done = ctx.get(unit.ctl.busy), ctx.get(unit.ctl.done)
            assert busy == (cycle <= L), cycle
            assert done == (cycle == L), cycle
            assert ctx.get(unit.ctl.draining) == (L < cycle <= X), cycle
            for n, port in enumerate(unit.read_ports):
                if ctx.get(port.en):
                    got_reads[(cycle, n)] = ctx.get(port.addr)
            if ctx.get(unit.sp_wr.en):
                got_writes[cycle] = ctx.get(unit.sp_wr.addr)
            await ctx.tick()
        assert got_reads == reads
        assert got_writes == writes
        got = [ctx.get(bench.sp.cell(a)) for a in range(config.sp_words)]
        assert got == reference(image, c)

    run_bench(bench, tb, vcd_name=f"mm_{config.mode.value}_schedule")


def a_address(c, i, k):
    return c["A"] + i * c["lda"] + k


def b_address(c, k, j):
    return c["B"] + (j * c["ldb"] + k if c["tb"] else k * c["ldb"] + j)


def write_schedule(c, first):
    """Result (i, j) is written in cycle ``first + i*N + j``."""
    return {first + i * c["N"] + j: c["dst"] + i * c["ldc"] + j for i in range(c["M"]) for j in range(c["N"])}


def test_read_ports():
    """One read port in order; decoupled one per array row (``a_rd``), then one per array column (``b_rd``)."""
    staged = MatrixUnit(**unit_parameters("mm", Config(rows=2, cols=3, mode="inorder")))
    assert staged.read_ports == [staged.sp_rd]
    stream = MatrixUnit(**unit_parameters("mm", Config(rows=2, cols=3, mode="decoupled")))
    assert stream.read_ports == [*stream.a_rd, *stream.b_rd] and len(stream.read_ports) == 5


def test_mm_wrong_config():
    with pytest.raises(TypeError, match=r"^Config must be a ga2_sw.config.Config, not "):
        build_unit("mm", {"rows": 4})


# -- in order: the staged feeder ----------------------------------------------------------------------------

def _place(rng, sizes, sp_words):
    """Non-overlapping start addresses for regions of the given sizes, in random order and spacing."""
    gap = (sp_words - sum(sizes.values())) // (len(sizes) + 1)
    assert gap >= 0
    starts, pos = {}, 0
    for name in rng.permutation(sorted(sizes)):
        pos += int(rng.integers(0, gap + 1))
        starts[str(name)] = pos
        pos += sizes[name]
    assert pos <= sp_words
    return starts


def random_staged_case(rng, config, kind):
    M = int(rng.integers(1, config.rows + 1))
    N = int(rng.integers(1, config.cols + 1))
    K = int(rng.integers(1, KMAX + 1))
    tb = int(rng.integers(0, 2))
    if kind == "big":
        M, K, N = config.rows, KMAX, config.cols
    lda = K + int(rng.integers(0, 4))
    ldb = (K if tb else N) + int(rng.integers(0, 4))
    ldc = N + int(rng.integers(0, 4))
    if kind == "stride_overlap":
        # Rows of A (and of Bop) that share words: still well defined, MM only reads them.
        lda = int(rng.integers(0, K + 1))
        ldb = int(rng.integers(0, (K if tb else N) + 1))
    c = {"M": M, "K": K, "N": N, "tb": tb, "lda": lda, "ldb": ldb, "ldc": ldc, "A": 0, "B": 0, "dst": 0}
    sizes = {name: size for name, (_, size) in footprints(c).items()}
    if kind == "shared_operand":
        # B is A itself (tb = 1: C = A . A^T) and the destination overwrites the start of A.
        c.update(tb=1, ldb=lda, N=min(N, M))
        sizes = {name: size for name, (_, size) in footprints(c).items()}
        starts = _place(rng, {"A": max(sizes["A"], sizes["dst"])}, config.sp_words)
        c["A"] = c["B"] = c["dst"] = starts["A"]
    elif kind == "dst_on_A":
        # The destination starts inside A: all reads happen before the first write.
        starts = _place(rng, {"A": sizes["A"] + sizes["dst"], "B": sizes["B"]}, config.sp_words)
        c["A"], c["B"] = starts["A"], starts["B"]
        c["dst"] = c["A"] + int(rng.integers(0, sizes["A"]))
    else:
        starts = _place(rng, sizes, config.sp_words)
        c.update(starts)

    image = random_image(rng, config)
    if kind in ("extreme", "all_min", "big"):
        for name in ("A", "B"):
            start, size = footprints(c)[name]
            for w in range(start, start + size):
                low = 0x80 if kind == "all_min" else int(rng.choice(EXTREME_BYTES))
                image[w] = (image[w] & ~0xFF) | low
    return c, image


STAGED_KINDS = ["plain", "plain", "extreme", "stride_overlap", "dst_on_A", "shared_operand", "plain", "all_min",
                "big"]


@pytest.mark.parametrize("rows, cols, count", [(4, 4, 150), (2, 3, 120), (1, 1, 90)])
def test_mm_random(rows, cols, count):
    config = Config(rows=rows, cols=cols, **STAGED)
    rng = np.random.default_rng(rows * 10 + cols)
    cases = [random_staged_case(rng, config, STAGED_KINDS[n % len(STAGED_KINDS)]) for n in range(count)]
    run_cases(config, cases)


def test_mm_all_minus_128():
    config = Config(rows=2, cols=3, **STAGED)
    M, K, N = 2, 20, 3
    c = {"M": M, "K": K, "N": N, "tb": 0, "lda": K, "ldb": N, "ldc": N, "A": 0, "B": 100, "dst": 200}
    image = [0xABCDEF80] * config.sp_words
    run_cases(config, [(c, image)])
    assert reference(image, c)[200:206] == [K * 16384] * 6


def test_mm_long_k_1x1():
    # K beyond the random range, on the cheap 1x1 array: X = (K+1)*2 + 1.
    config = Config(rows=1, cols=1, **STAGED)
    rng = np.random.default_rng(5)
    cases = []
    for K, tb in ((200, 0), (131, 1)):
        image = random_image(rng, config)
        cases.append(({"M": 1, "K": K, "N": 1, "tb": tb, "lda": K, "ldb": 1 if not tb else 7,
                       "ldc": 1, "A": 0, "B": 250, "dst": 500}, image))
    assert run_cases(config, cases) == [403, 265]


@pytest.mark.parametrize("rows, cols, shape", [
    (4, 4, dict(M=4, K=3, N=4, tb=0, lda=5, ldb=6, ldc=7, A=10, B=60, dst=200)),
    (4, 4, dict(M=3, K=2, N=2, tb=1, lda=2, ldb=3, ldc=2, A=10, B=60, dst=200)),
    (2, 3, dict(M=1, K=4, N=3, tb=0, lda=4, ldb=3, ldc=3, A=0, B=20, dst=40)),
    (1, 1, dict(M=1, K=3, N=1, tb=1, lda=3, ldb=3, ldc=1, A=5, B=9, dst=5)),
])
def test_mm_schedule(rows, cols, shape):
    """As docs/ISA.md's timing explanation and StagedFeeder's docstring describe: element ``e`` of slice ``k``
    (A's column k, then Bop's row k) read on the one port in cycle ``1 + k*(M+N) + e``, the results written
    from cycle ``(K+1)*(M+N) + 1`` on."""
    c = dict(shape)
    M, K, N = c["M"], c["K"], c["N"]
    reads = {}
    for k in range(K):
        for e in range(M + N):
            addr = a_address(c, e, k) if e < M else b_address(c, k, e - M)
            reads[(1 + k * (M + N) + e, 0)] = addr
    check_schedule(Config(rows=rows, cols=cols, **STAGED), c, reads, write_schedule(c, (K + 1) * (M + N) + 1))


def test_mm_verilog():
    """Module `mm` with the unit ports, address widths from the scratchpad size, deterministic, lint clean."""
    for config in (Config(), Config(rows=2, cols=3, **STAGED)):
        ports, _ = verilog_ports(unit_verilog(lambda: build_unit("mm", config), "mm"), "mm")
        addr_bits = (config.sp_words - 1).bit_length()
        assert ports["sp_rd__addr"] == ports["sp_wr__addr"] == ("output", addr_bits)


# -- decoupled: the streaming feeder ------------------------------------------------------------------------

def random_stream_case(rng, config, kind):
    """A random MM and memory image. ``kind``: "plain" (disjoint regions), "extreme" (operands mostly
    -128/127), "dst_on_A" / "dst_on_B" (the destination starts inside that operand)."""
    sp_words = config.sp_words
    M = int(rng.integers(1, config.rows + 1))
    N = int(rng.integers(1, config.cols + 1))
    K = int(rng.integers(1, KMAX + 1))
    tb = int(rng.integers(0, 2))
    c = {"M": M, "K": K, "N": N, "tb": tb, "rb": int(rng.integers(0, 2)) if config.row_b else 0,
         "lda": K + int(rng.integers(0, 4)),
         "ldb": (K if tb else N) + int(rng.integers(0, 4)),
         "ldc": N + int(rng.integers(0, 4))}
    if config.row_b:
        c["sa"] = int(rng.integers(0, 2))
    c.update(A=0, B=0, dst=0)
    size = {name: n for name, (_, n) in footprints(c).items()}
    if kind in ("dst_on_A", "dst_on_B"):
        op, other = ("A", "B") if kind == "dst_on_A" else ("B", "A")
        region = size[op] + size["dst"]
        slack = sp_words - region - size[other]
        assert slack >= 0
        gap = int(rng.integers(0, slack + 1))
        if rng.integers(0, 2):                        # the overlapped operand first, then the other
            c[op], c[other] = gap, gap + region
        else:
            c[other], c[op] = gap, gap + size[other]
        c["dst"] = c[op] + int(rng.integers(0, size[op]))
    else:
        names = [str(n) for n in rng.permutation(["A", "B", "dst"])]
        gap = (sp_words - sum(size.values())) // 4
        assert gap >= 0
        pos = 0
        for name in names:
            pos += int(rng.integers(0, gap + 1))
            c[name] = pos
            pos += size[name]
    for name, (start, n) in footprints(c).items():
        assert 0 <= start and start + n <= sp_words, (name, c)

    image = random_image(rng, config)
    if kind == "extreme":
        for name in ("A", "B"):
            start, n = footprints(c)[name]
            for w in range(start, start + n):
                image[w] = (image[w] & ~0xFF) | int(rng.choice(EXTREME_BYTES))
    return c, image


STREAM_KINDS = ["plain", "extreme", "dst_on_A", "plain", "dst_on_B"]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9])
def test_the_feeders_counts_are_the_number_of_bits_set(n):
    """Both codes the streaming feeder keeps per bank, on every combination of ``n`` bits: the thermometer code
    has bit ``k`` high when more than ``k`` are set, and the binary count is Python's count of ones."""
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator
    from ga2_hdl.matrix.stream_feeder import popcount, thermometer
    m = Module()
    bits = Signal(n)
    code, count = thermometer(m, list(bits), "t"), popcount(m, list(bits), "p")
    seen = []

    async def bench(ctx):
        for value in range(1 << n):
            ctx.set(bits, value)
            ones = bin(value).count("1")
            assert ctx.get(count) == ones, (n, value)
            assert ctx.get(code) == (1 << ones) - 1, (n, value)
            seen.append(ones)
    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert sorted(set(seen)) == list(range(n + 1))


# (4, 8): twelve operands a slice, past THERMOMETER_OPERANDS: binary counts and the banks' indices compared
@pytest.mark.parametrize("rows, cols, count", [(4, 4, 50), (2, 3, 50), (4, 8, 30)])
def test_smm_random(rows, cols, count):
    config = Config(rows=rows, cols=cols, **STREAM)
    rng = np.random.default_rng(100 + rows * 10 + cols)
    cases = [random_stream_case(rng, config, STREAM_KINDS[n % len(STREAM_KINDS)]) for n in range(count)]
    kinds = {STREAM_KINDS[n % len(STREAM_KINDS)] for n in range(count)}
    assert {"dst_on_A", "dst_on_B"} <= kinds
    run_cases(config, cases)


def test_smm_dst_overlaps_operands():
    """Destination on top of A, then on top of B (transposed), then A = B = dst: results from the OLD
    values."""
    config = Config(rows=4, cols=4, **STREAM)
    image = random_image(np.random.default_rng(7), config)
    shapes = [
        dict(M=4, K=5, N=4, tb=0, lda=5, ldb=4, ldc=4, A=10, B=60, dst=11),
        dict(M=3, K=6, N=4, tb=1, lda=6, ldb=6, ldc=4, A=10, B=60, dst=62),
        dict(M=4, K=4, N=4, tb=1, lda=4, ldb=4, ldc=4, A=30, B=30, dst=30),     # C = A . A^T in place
    ]
    for c in shapes:
        spans = {name: set(range(start, start + n)) for name, (start, n) in footprints(c).items()}
        assert spans["dst"] & (spans["A"] | spans["B"]), c
        run_cases(config, [(c, image)])


def as_instr(c):
    return isa.mm(c["dst"], c["A"], c["B"], c["M"], c["K"], c["N"], c["tb"], c["lda"], c["ldb"], c["ldc"],
                  c.get("rb", 0), c.get("sa", 0))


def run_chain(config, cases, image, taken=None, delays=None):
    """Decoupled: MMs back to back, each started in the first cycle the sequencer would start it (the cycle
    after the previous one's last read, or after its last write when the two conflict, ``cycles.conflict``),
    beside a vector lane holding the banks ``taken`` (``{cycle: banks}``). Cycle by cycle, counted from the
    first start (``delays[n]`` cycles later than that for case n, as if the scoreboard held it back):
    ``busy``, ``done`` and ``draining`` as ``cycles.mm_schedule`` says; no two requests of the
    unit on one bank in a cycle, none on a bank the vector lane holds; afterwards the memory of the MMs run one
    after the other on numpy. Returns how many MMs started before the previous one's last write."""
    from ga2_sw.cycles import conflict, mm_schedule
    taken = taken or {}
    instrs = [as_instr(c) for c, _ in cases]
    schedules, start, before, previous = [], 0, None, None
    for n, instr in enumerate(instrs):
        if previous is not None:
            start = before.last_read + 1
            if conflict(instr, previous):
                start = max(start, before.last_write + 1)
            start += (delays or [0] * len(instrs))[n]
        before = mm_schedule(instr, start, taken, config, before)
        schedules.append(before)
        previous = instr
    end = schedules[-1].last_write
    want = image
    for c, _ in cases:
        want = reference(want, c)
    unit = build_unit("mm", config)
    bench = UnitBench(unit, config, image)

    async def tb(ctx):
        for cycle in range(0, end + 3):
            starting = [n for n, sch in enumerate(schedules) if sch.start == cycle]
            ctx.set(unit.ctl.start, bool(starting))
            ctx.set(unit.ctl.instr.as_value(), encode_mm(**cases[starting[0]][0]) if starting else 0)
            # the banks of the next cycle: the unit registers them (the scratchpad's first_banks_next)
            ctx.set(unit.vector_banks_next, sum(1 << b for b in taken.get(cycle + 1, ())))
            if cycle:
                busy = any(sch.start < cycle <= sch.last_read for sch in schedules)
                draining = any(sch.last_read < cycle <= sch.last_write for sch in schedules)
                assert ctx.get(unit.ctl.busy) == busy, cycle
                assert ctx.get(unit.ctl.done) == any(sch.last_read == cycle for sch in schedules), cycle
                assert ctx.get(unit.ctl.draining) == draining, cycle
            banks = [bank_of(ctx.get(port.addr), config) for port in [*unit.read_ports, unit.sp_wr]
                     if ctx.get(port.en)]
            assert len(banks) == len(set(banks)), (cycle, banks)
            assert not set(banks) & taken.get(cycle, set()), cycle
            await ctx.tick()
        got = [ctx.get(bench.sp.cell(a)) for a in range(config.sp_words)]
        bad = [(a, got[a], want[a]) for a in range(config.sp_words) if got[a] != want[a]]
        assert not bad, f"{len(bad)} wrong words, first {bad[:4]}"

    run_bench(bench, tb, vcd_name="mm_chain")
    return sum(now.start <= last.last_write for last, now in zip(schedules, schedules[1:]))


def test_smm_back_to_back():
    """The later MMs read what the earlier ones wrote (so they wait for the writes), or not (so the next one's
    reads overlap the last one's writes); a 4 x 4 result followed by a one-slice MM, whose only slice waits for
    the writer."""
    config = Config(rows=2, cols=3, **STREAM)
    image = random_image(np.random.default_rng(3), config)
    cases = [
        (dict(M=2, K=7, N=3, tb=0, lda=7, ldb=3, ldc=3, A=0, B=20, dst=100), image),
        (dict(M=1, K=3, N=2, tb=1, lda=3, ldb=3, ldc=2, A=100, B=101, dst=150), None),   # reads the first
        (dict(M=2, K=1, N=1, tb=0, lda=1, ldb=1, ldc=1, A=150, B=151, dst=150), None),   # dst on A
        (dict(M=2, K=20, N=3, tb=1, lda=20, ldb=21, ldc=5, A=0, B=40, dst=200), None),
        (dict(M=2, K=5, N=3, tb=0, lda=5, ldb=3, ldc=3, A=0, B=40, dst=220), None),       # independent
    ]
    assert run_chain(config, cases, image) == 2
    config = Config(rows=4, cols=4, **STREAM)
    image = random_image(np.random.default_rng(4), config)
    cases = [(dict(M=4, K=2, N=4, tb=0, lda=2, ldb=4, ldc=4, A=0, B=10, dst=100), image),
             (dict(M=1, K=1, N=1, tb=0, lda=1, ldb=1, ldc=1, A=30, B=31, dst=140), None),
             (dict(M=4, K=1, N=4, tb=1, lda=1, ldb=1, ldc=4, A=40, B=50, dst=160), None),
             (dict(M=4, K=3, N=4, tb=0, lda=3, ldb=4, ldc=4, A=60, B=80, dst=180), None)]
    assert run_chain(config, cases, image) == 3


@pytest.mark.slow
def test_smm_last_slice_waits_for_the_writer_at_every_distance():
    """A one-slice MM (its only slice is its last) started 0 to 13 cycles after it could be, behind an MM whose
    result writer is busy until its plan cycle, or before it, or after: the wait (or none) at every distance
    between the writer's last write and the slice, as ``cycles.mm_schedule`` says."""
    config = Config(rows=4, cols=4, **STREAM)
    image = random_image(np.random.default_rng(11), config)
    cases = [(dict(M=2, K=2, N=3, tb=0, lda=2, ldb=3, ldc=3, A=0, B=10, dst=100), image),
             (dict(M=1, K=1, N=2, tb=0, lda=1, ldb=2, ldc=2, A=40, B=50, dst=140), None)]
    overlapped = [run_chain(config, cases, image, delays=[0, delay]) for delay in range(14)]
    assert overlapped[0] == 1 and overlapped[-1] == 0, overlapped


@pytest.mark.parametrize("rows, cols, count, density", [(4, 4, 30, 0.0), (4, 4, 30, 0.4), (2, 3, 30, 0.3),
                                                        (4, 8, 24, 0.4)])
def test_smm_random_chains(rows, cols, count, density):
    """Random MMs back to back beside random vector-lane banks: a third read the previous one's result, the
    rest are independent (their regions drawn apart), so the unit's reads, its writes and the vector lane's
    requests meet on the banks in every combination."""
    config = Config(rows=rows, cols=cols, **{**STREAM, "sp_words": 256 if cols <= 4 else 512})
    rng = np.random.default_rng(500 + rows + int(density * 10))
    image = random_image(rng, config)
    cases = []
    for n in range(count):
        c, _ = random_stream_case(rng, config, STREAM_KINDS[n % len(STREAM_KINDS)])
        if cases and rng.random() < 0.33:
            prev = cases[-1][0]
            c["A"] = prev["dst"]                     # reads the last result (if it fits)
            if footprints(c)["A"][0] + footprints(c)["A"][1] > config.sp_words:
                c["A"] = 0
        cases.append((c, None))
    taken = {cycle: {int(b) for b in rng.choice(config.sp_banks, rng.integers(1, 3))}
             for cycle in range(1, 4000) if rng.random() < density}
    assert run_chain(config, cases, image, taken) > count // 4, "the MMs hardly overlap: the test is too weak"


@pytest.mark.parametrize("rows, cols, banks, density", [pytest.param(4, 4, 32, 0.0, marks=pytest.mark.slow),
                                                        pytest.param(4, 4, 8, 0.3, marks=pytest.mark.slow),
                                                        (2, 3, 16, 0.5)])
def test_smm_a_b_per_row(rows, cols, banks, density):
    """A row_b chip (Config.row_b): random MMs with and without rb and sa back to back, beside random
    vector-lane banks, against numpy's per-row products (``reference``); with rb the B operands of rows 1.. are
    read through ports of their own, and without it every row's cells take the column's operand; with sa every
    row takes row 0's A operand."""
    config = Config(rows=rows, cols=cols, row_b=1, **{**STREAM, "sp_banks": banks, "sp_words": 512})
    rng = np.random.default_rng(900 + rows + banks)
    image = random_image(rng, config)
    cases = []
    for n in range(24):
        c, _ = random_stream_case(rng, config, STREAM_KINDS[n % len(STREAM_KINDS)])
        cases.append((c, None))
    assert {c["rb"] for c, _ in cases} == {0, 1} and any(c["rb"] and c["M"] > 1 for c, _ in cases)
    assert any(c["sa"] and c["rb"] and c["M"] > 1 for c, _ in cases)
    assert any(c["sa"] and not c["rb"] and c["M"] > 1 for c, _ in cases)
    taken = {cycle: {int(b) for b in rng.choice(config.sp_banks, rng.integers(1, 3))}
             for cycle in range(1, 4000) if rng.random() < density}
    run_chain(config, cases, image, taken)


@pytest.mark.parametrize("rows, cols, count, density", [pytest.param(4, 4, 24, 0.3, marks=pytest.mark.slow),
                                                        pytest.param(4, 4, 16, 0.8, marks=pytest.mark.slow),
                                                        (2, 3, 10, 0.5), (3, 8, 10, 0.5)])
def test_smm_gives_way_to_the_vector_lane(rows, cols, count, density):
    """The vector lane (RQ, SM) has port B first: with random banks asked for on ``vector_banks_next`` for each
    cycle (one to three banks in a ``density`` share of the cycles), no read or write of the MM ever goes to a
    bank the vector lane asks for in that cycle, the memory is the numpy reference's, and the busy time is the
    cycle model's (``ga2_sw.cycles.mm_schedule``: the last read and the last write) given the same banks."""
    from ga2_sw.cycles import mm_schedule
    config = Config(rows=rows, cols=cols, **STREAM)
    rng = np.random.default_rng(int(density * 100) + rows)
    lost = 0
    for n in range(count):
        c, image = random_stream_case(rng, config, STREAM_KINDS[n % len(STREAM_KINDS)])
        instr = isa.mm(c["dst"], c["A"], c["B"], c["M"], c["K"], c["N"], c["tb"], c["lda"], c["ldb"], c["ldc"])
        taken = {cycle: {int(b) for b in rng.choice(config.sp_banks, rng.integers(1, 4))}
                 for cycle in range(1, 400) if rng.random() < density}
        schedule = mm_schedule(instr, 0, taken, config)
        L, X = schedule.last_read, schedule.last_write
        lost += X - busy_time(config, c)
        unit = build_unit("mm", config)
        bench = UnitBench(unit, config, image)

        async def tb(ctx, c=c, image=image, taken=taken, L=L, X=X, unit=unit, bench=bench):
            ctx.set(unit.ctl.instr.as_value(), encode_mm(**c))
            ctx.set(unit.ctl.start, 1)
            ctx.set(unit.vector_banks_next, sum(1 << b for b in taken.get(1, ())))
            await ctx.tick()
            ctx.set(unit.ctl.start, 0)
            for cycle in range(1, X + 3):
                ctx.set(unit.vector_banks_next, sum(1 << b for b in taken.get(cycle + 1, ())))
                assert ctx.get(unit.ctl.busy) == (cycle <= L), (c, cycle)
                assert ctx.get(unit.ctl.done) == (cycle == L), (c, cycle)
                assert ctx.get(unit.ctl.draining) == (L < cycle <= X), (c, cycle)
                for port in [*unit.read_ports, unit.sp_wr]:
                    if ctx.get(port.en):
                        assert bank_of(ctx.get(port.addr), config) not in taken.get(cycle, ()), (c, cycle)
                await ctx.tick()
            got = [ctx.get(bench.sp.cell(a)) for a in range(config.sp_words)]
            assert got == reference(image, c), c

        run_bench(bench, tb)
    assert lost > count, "the vector lane's banks cost the MMs next to nothing: the test is too weak"


@pytest.mark.parametrize("rows, cols, shape", [
    (4, 4, dict(M=4, K=3, N=4, tb=0, lda=5, ldb=6, ldc=7, A=10, B=60, dst=200)),
    (4, 4, dict(M=3, K=2, N=2, tb=1, lda=2, ldb=3, ldc=2, A=10, B=60, dst=200)),
    (4, 4, dict(M=2, K=3, N=2, tb=0, lda=31, ldb=16, ldc=2, A=0, B=100, dst=200)),  # A rows 0, 31 on one bank (slice 0)
    (2, 3, dict(M=1, K=1, N=1, tb=0, lda=1, ldb=1, ldc=1, A=0, B=20, dst=40)),
    (2, 3, dict(M=2, K=4, N=2, tb=1, lda=4, ldb=5, ldc=3, A=0, B=20, dst=40)),
])
def test_smm_schedule(rows, cols, shape):
    """As StreamFeeder's docstring describes: from cycle 2 on (cycle 1 plans), slice after slice, ``A[i][k]`` on
    row port ``i`` (``i < M``) and ``Bop(k, j)`` on column port ``j`` (``j < N``), the other ports disabled; in each cycle every
    operand of the slice not yet read is read unless an earlier one not yet read is on its bank (worked out
    here from the bank map alone); the results written from the seventh cycle after the last read request on
    (the banked scratchpad's request register, the read, the bank's data and select registers, the hold
    register, the last slice's step, PE(0,0)'s last accumulate)."""
    config = Config(rows=rows, cols=cols, **STREAM)
    c = dict(shape)
    first_read = 3
    reads, cycle = {}, first_read
    for k in range(c["K"]):
        operands = ([(i, a_address(c, i, k)) for i in range(c["M"])] +
                    [(rows + j, b_address(c, k, j)) for j in range(c["N"])])
        rounds = arbitrated_rounds([addr for _, addr in operands], lambda a: bank_of(a, config))
        for (port, addr), r in zip(operands, rounds):
            reads[(cycle + r, port)] = addr
        cycle += max(rounds) + 1
    if shape["lda"] == 31:
        assert cycle - first_read > c["K"], "the case meant to put operands on one bank does not"
    check_schedule(config, c, reads, write_schedule(c, cycle + 6))


@pytest.mark.parametrize("config", [pytest.param(Config(mode="decoupled"), id="decoupled"),
                                    pytest.param(Config(rows=2, cols=3, **STREAM), id="2x3", marks=pytest.mark.slow)])
def test_smm_verilog(config):
    """Decoupled: module `mm` with one A read port per row and one B read port per column, deterministic,
    lint clean."""
    ports, _ = verilog_ports(unit_verilog(lambda: build_unit("mm", config), "mm"), "mm")
    read = {p.rsplit("__", 1)[0] for p in ports if p.endswith("__addr") and not p.startswith("sp_wr")}
    assert len(read) == config.rows + config.cols, sorted(read)
