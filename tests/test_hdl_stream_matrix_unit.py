# amaranth: UnusedElaboratable=no
"""The streaming matrix unit (decoupled-mode MM) against an independent numpy reference, its exact busy
time and its cycle-by-cycle schedule."""

import random

import numpy as np
import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import memory

from ga2_sw.config import Config
from ga2_hdl.ports import WORD
from ga2_hdl.scratchpad import SP_WRITE_DELAY
from ga2_hdl.stream_matrix_unit import StreamMatrixUnit
from sim.testing import run_bench, start_and_wait, unit_verilog, verilog_ports

SP_WORDS = 256
KMAX = 20
EXTREME_BYTES = [0x80, 0x7F, 0x80, 0x7F, 0x00, 0x01, 0xFF]     # mostly -128 and 127


class StreamBench(Elaboratable):
    """The unit on a word memory with one read port per unit read port and one write port. Writes are
    registered for ``SP_WRITE_DELAY`` = 1 cycle first, as in :class:`ga2_hdl.scratchpad.Scratchpad`, so that
    ``start_and_wait``'s extra tick lets the last write land."""

    def __init__(self, unit, config, init=()):
        assert SP_WRITE_DELAY == 1
        self.unit = unit
        self.mem = memory.Memory(shape=WORD, depth=config.sp_words, init=list(init))

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self.unit
        m.submodules.mem = mem = self.mem
        for port in [*unit.a_rd, *unit.b_rd]:
            rd = mem.read_port()
            m.d.comb += [rd.addr.eq(port.addr), rd.en.eq(port.en), port.data.eq(rd.data)]
        wr = mem.write_port()
        en, addr, data = Signal(), Signal.like(unit.sp_wr.addr), Signal.like(unit.sp_wr.data)
        m.d.sync += [en.eq(unit.sp_wr.en), addr.eq(unit.sp_wr.addr), data.eq(unit.sp_wr.data)]
        m.d.comb += [wr.en.eq(en), wr.addr.eq(addr), wr.data.eq(data)]
        return m


def encode_mm(*, dst, A, B, M, K, N, tb, lda, ldb, ldc, **_):
    """The 128-bit MM word, field positions straight from the encoding table of docs/ISA.md."""
    return (3 | tb << 4 | dst << 8 | A << 24 | B << 40 | K << 56 | M << 72 | N << 80
            | lda << 88 | ldb << 100 | ldc << 112)


def busy_time(M, K, N):
    return K + 3 + M * N


def footprints(c):
    """Extent (first word, word count) of A, B and the destination."""
    M, K, N = c["M"], c["K"], c["N"]
    fb = (N - 1) * c["ldb"] + K if c["tb"] else (K - 1) * c["ldb"] + N
    return {"A": (c["A"], (M - 1) * c["lda"] + K), "B": (c["B"], fb),
            "dst": (c["dst"], (M - 1) * c["ldc"] + N)}


def reference(image, c):
    """The memory after MM, from the OLD image: operands gathered with numpy indexing, int64 matmul,
    int32 words written."""
    words = np.array(image, dtype=np.int64)
    s8 = ((words & 0xFF) ^ 0x80) - 0x80
    i = np.arange(c["M"])[:, None]
    k = np.arange(c["K"])
    A = s8[c["A"] + i * c["lda"] + k[None, :]]                      # M x K
    j = np.arange(c["N"])[None, :]
    if c["tb"]:
        Bop = s8[c["B"] + j * c["ldb"] + k[:, None]]                # K x N, stored transposed
    else:
        Bop = s8[c["B"] + k[:, None] * c["ldb"] + j]                # K x N
    C = A @ Bop
    out = words.copy()
    dst = c["dst"] + i * c["ldc"] + j
    assert len(np.unique(dst)) == dst.size, "the tests keep ldc >= N: every result has its own word"
    out[dst] = C & 0xFFFFFFFF
    return [int(w) for w in out]


def random_case(rng, config, kind):
    """A random MM and memory image. ``kind``: "plain" (disjoint regions), "extreme" (operands mostly
    -128/127), "dst_on_A" / "dst_on_B" (the destination starts inside that operand)."""
    M = int(rng.integers(1, config.rows + 1))
    N = int(rng.integers(1, config.cols + 1))
    K = int(rng.integers(1, KMAX + 1))
    tb = int(rng.integers(0, 2))
    c = {"M": M, "K": K, "N": N, "tb": tb,
         "lda": K + int(rng.integers(0, 4)),
         "ldb": (K if tb else N) + int(rng.integers(0, 4)),
         "ldc": N + int(rng.integers(0, 4))}
    c.update(A=0, B=0, dst=0)
    size = {name: n for name, (_, n) in footprints(c).items()}
    if kind in ("dst_on_A", "dst_on_B"):
        op, other = ("A", "B") if kind == "dst_on_A" else ("B", "A")
        region = size[op] + size["dst"]
        slack = SP_WORDS - region - size[other]
        assert slack >= 0
        gap = int(rng.integers(0, slack + 1))
        if rng.integers(0, 2):                        # the overlapped operand first, then the other
            c[op], c[other] = gap, gap + region
        else:
            c[other], c[op] = gap, gap + size[other]
        c["dst"] = c[op] + int(rng.integers(0, size[op]))
    else:
        names = [str(n) for n in rng.permutation(["A", "B", "dst"])]
        gap = (SP_WORDS - sum(size.values())) // 4
        assert gap >= 0
        pos = 0
        for name in names:
            pos += int(rng.integers(0, gap + 1))
            c[name] = pos
            pos += size[name]
    for name, (start, n) in footprints(c).items():
        assert 0 <= start and start + n <= SP_WORDS, (name, c)

    # Garbage everywhere, including the upper 24 bits of every operand word.
    image = [int(w) for w in rng.integers(0, 1 << 32, SP_WORDS, dtype=np.uint64)]
    if kind == "extreme":
        for name in ("A", "B"):
            start, n = footprints(c)[name]
            for w in range(start, start + n):
                image[w] = (image[w] & ~0xFF) | int(rng.choice(EXTREME_BYTES))
    return c, image


KINDS = ["plain", "extreme", "dst_on_A", "plain", "dst_on_B"]


def run_cases(config, cases, *, back_to_back=False):
    """Run MM cases on one unit and memory; check the whole memory and the busy time of every case.

    Without ``back_to_back`` the memory is reloaded with each case's image before it starts. With it,
    each case starts in the cycle after the previous one's ``done`` and runs on the memory the previous
    one left (its reference image is computed from that). A second testbench puts garbage on ``instr``
    whenever ``start`` is low, so the unit must latch."""
    unit = StreamMatrixUnit(config)
    bench = StreamBench(unit, config, cases[0][1])
    garbage = random.Random(1234)
    running = [True]

    async def main(ctx):
        try:
            image = cases[0][1]
            for n, (c, case_image) in enumerate(cases):
                if n and not back_to_back:
                    image = case_image
                    for addr, word in enumerate(image):
                        ctx.set(bench.mem.data[addr], word)
                want = reference(image, c)
                if back_to_back and n + 1 < len(cases):
                    # start_and_wait's trailing tick would put a cycle between done and the next start.
                    busy = await start_until_done(ctx, unit, encode_mm(**c))
                else:
                    busy = await start_and_wait(ctx, unit, encode_mm(**c))
                assert busy == busy_time(c["M"], c["K"], c["N"]), (n, c, busy)
                if back_to_back and n + 1 < len(cases):
                    image = want          # checked after the last case (writes land one cycle late)
                    continue
                got = [ctx.get(bench.mem.data[addr]) for addr in range(SP_WORDS)]
                if got != want:
                    bad = [(a, got[a], want[a]) for a in range(SP_WORDS) if got[a] != want[a]]
                    raise AssertionError(f"case {n} {c}: {len(bad)} wrong words, first {bad[:4]}")
        finally:
            running[0] = False

    async def scramble_instr(ctx):
        while running[0]:
            if not ctx.get(unit.ctl.start):
                ctx.set(unit.ctl.instr.as_value(), garbage.getrandbits(128))
            await ctx.tick()

    run_bench(bench, main, scramble_instr, vcd_name=f"smm_{config.rows}x{config.cols}")


async def start_until_done(ctx, unit, instr_value, limit=10000):
    """Like ``start_and_wait`` but returns right after the ``done`` cycle, so that the caller's next
    ``start`` falls in the cycle after ``done``."""
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


@pytest.mark.parametrize("rows, cols, count", [(4, 4, 50), (2, 3, 50)])
def test_smm_random(rows, cols, count):
    config = Config(rows=rows, cols=cols, sp_words=SP_WORDS)
    rng = np.random.default_rng(100 + rows * 10 + cols)
    cases = [random_case(rng, config, KINDS[n % len(KINDS)]) for n in range(count)]
    kinds = {KINDS[n % len(KINDS)] for n in range(count)}
    assert {"dst_on_A", "dst_on_B"} <= kinds
    run_cases(config, cases)


def test_smm_dst_overlaps_operands():
    """Destination on top of A, then on top of B (transposed), then A = B = dst: results from the OLD
    values."""
    config = Config(rows=4, cols=4, sp_words=SP_WORDS)
    rng = np.random.default_rng(7)
    image = [int(w) for w in rng.integers(0, 1 << 32, SP_WORDS, dtype=np.uint64)]
    shapes = [
        dict(M=4, K=5, N=4, tb=0, lda=5, ldb=4, ldc=4, A=10, B=60, dst=11),
        dict(M=3, K=6, N=4, tb=1, lda=6, ldb=6, ldc=4, A=10, B=60, dst=62),
        dict(M=4, K=4, N=4, tb=1, lda=4, ldb=4, ldc=4, A=30, B=30, dst=30),     # C = A . A^T in place
    ]
    for c in shapes:
        spans = {name: set(range(start, start + n)) for name, (start, n) in footprints(c).items()}
        assert spans["dst"] & (spans["A"] | spans["B"]), c
        run_cases(config, [(c, image)])


def test_smm_back_to_back():
    """Each start in the cycle after the previous done; the later MMs read what the earlier ones wrote."""
    config = Config(rows=2, cols=3, sp_words=SP_WORDS)
    rng = np.random.default_rng(3)
    image = [int(w) for w in rng.integers(0, 1 << 32, SP_WORDS, dtype=np.uint64)]
    cases = [
        (dict(M=2, K=7, N=3, tb=0, lda=7, ldb=3, ldc=3, A=0, B=20, dst=100), image),
        (dict(M=1, K=3, N=2, tb=1, lda=3, ldb=3, ldc=2, A=100, B=101, dst=150), None),   # reads the first
        (dict(M=2, K=1, N=1, tb=0, lda=1, ldb=1, ldc=1, A=150, B=151, dst=150), None),   # dst on A
        (dict(M=2, K=20, N=3, tb=1, lda=20, ldb=21, ldc=5, A=0, B=40, dst=200), None),
    ]
    run_cases(config, cases, back_to_back=True)


@pytest.mark.parametrize("rows, cols, shape", [
    (4, 4, dict(M=4, K=3, N=4, tb=0, lda=5, ldb=6, ldc=7, A=10, B=60, dst=200)),
    (4, 4, dict(M=3, K=2, N=2, tb=1, lda=2, ldb=3, ldc=2, A=10, B=60, dst=200)),
    (2, 3, dict(M=1, K=1, N=1, tb=0, lda=1, ldb=1, ldc=1, A=0, B=20, dst=40)),
    (2, 3, dict(M=2, K=4, N=2, tb=1, lda=4, ldb=5, ldc=3, A=0, B=20, dst=40)),
])
def test_smm_schedule(rows, cols, shape):
    """Cycle by cycle: which ports read which word when, which word is written when, and busy/done, as
    the unit's docstring describes."""
    config = Config(rows=rows, cols=cols, sp_words=SP_WORDS)
    c = dict(shape)
    M, K, N = c["M"], c["K"], c["N"]
    X = busy_time(M, K, N)
    reads, writes = {}, {}
    for k in range(K):
        for i in range(M):
            reads[(1 + k, "a", i)] = c["A"] + i * c["lda"] + k
        for j in range(N):
            reads[(1 + k, "b", j)] = c["B"] + (j * c["ldb"] + k if c["tb"] else k * c["ldb"] + j)
    for i in range(M):
        for j in range(N):
            writes[K + 4 + i * N + j] = c["dst"] + i * c["ldc"] + j
    assert max(writes) == X

    rng = np.random.default_rng(9)
    image = [int(w) for w in rng.integers(0, 1 << 32, SP_WORDS, dtype=np.uint64)]
    unit = StreamMatrixUnit(config)
    bench = StreamBench(unit, config, image)

    async def tb(ctx):
        ctx.set(unit.ctl.instr.as_value(), encode_mm(**c))
        ctx.set(unit.ctl.start, 1)
        await ctx.tick()
        ctx.set(unit.ctl.start, 0)
        ctx.set(unit.ctl.instr.as_value(), 0)
        got_reads, got_writes = {}, {}
        for cycle in range(1, X + 3):
            busy, done = ctx.get(unit.ctl.busy), ctx.get(unit.ctl.done)
            assert busy == (cycle <= X), cycle
            assert done == (cycle == X), cycle
            for name, ports in (("a", unit.a_rd), ("b", unit.b_rd)):
                for n, port in enumerate(ports):
                    if ctx.get(port.en):
                        got_reads[(cycle, name, n)] = ctx.get(port.addr)
            if ctx.get(unit.sp_wr.en):
                got_writes[cycle] = ctx.get(unit.sp_wr.addr)
            await ctx.tick()
        assert got_reads == reads
        assert got_writes == writes
        got = [ctx.get(bench.mem.data[a]) for a in range(SP_WORDS)]
        assert got == reference(image, c)

    run_bench(bench, tb, vcd_name="smm_schedule")


def test_smm_verilog():
    """Module `smm` with one A read port per row and one B read port per column, deterministic, lint clean."""
    for config in (Config(), Config(rows=2, cols=3, sp_words=SP_WORDS)):
        ports, _ = verilog_ports(unit_verilog(lambda: StreamMatrixUnit(config), "smm"), "smm")
        assert {p.split("__")[1] for p in ports if p.startswith("a_rd__")} == {str(r) for r in range(config.rows)}
        assert {p.split("__")[1] for p in ports if p.startswith("b_rd__")} == {str(c) for c in range(config.cols)}


def test_smm_wrong_config():
    with pytest.raises(TypeError, match=r"^Config must be a ga2_sw.config.Config, not "):
        StreamMatrixUnit({"rows": 4})
