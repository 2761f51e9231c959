# amaranth: UnusedElaboratable=no
"""The matrix unit (MM) against an independent numpy reference, its exact busy time and its schedule."""

import random

import numpy as np
import pytest

from ga2_sw.config import Config
from ga2_hdl.matrix_unit import MatrixUnit
from sim.testing import UnitBench, run_bench, start_and_wait, unit_verilog, verilog_ports

SP_WORDS = 512
KMAX = 20
EXTREME_BYTES = [0x80, 0x7F, 0x80, 0x7F, 0x00, 0x01, 0xFF]     # mostly -128 and 127


def encode_mm(*, dst, A, B, M, K, N, tb, lda, ldb, ldc, **_):
    """The 128-bit MM word, field positions straight from the encoding table of docs/ISA.md."""
    return (3 | tb << 4 | dst << 8 | A << 24 | B << 40 | K << 56 | M << 72 | N << 80
            | lda << 88 | ldb << 100 | ldc << 112)


def busy_time(M, K, N):
    return (K + 1) * (M + N) + M * N


def footprints(c):
    """Extent (first word, word count) of A, B and the destination."""
    M, K, N = c["M"], c["K"], c["N"]
    fb = (N - 1) * c["ldb"] + K if c["tb"] else (K - 1) * c["ldb"] + N
    return {"A": (c["A"], (M - 1) * c["lda"] + K), "B": (c["B"], fb),
            "dst": (c["dst"], (M - 1) * c["ldc"] + N)}


def reference(image, c):
    """The memory after MM: operands gathered with numpy indexing, int64 matmul, int32 words written."""
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
    assert np.abs(C).max() < 2 ** 31
    out = words.copy()
    dst = c["dst"] + i * c["ldc"] + j
    assert len(np.unique(dst)) == dst.size, "the tests keep ldc >= N: every result has its own word"
    out[dst] = C & 0xFFFFFFFF
    return [int(w) for w in out]


def _place(rng, sizes):
    """Non-overlapping start addresses for regions of the given sizes, in random order and spacing."""
    gap = (SP_WORDS - sum(sizes.values())) // (len(sizes) + 1)
    assert gap >= 0
    starts, pos = {}, 0
    for name in rng.permutation(sorted(sizes)):
        pos += int(rng.integers(0, gap + 1))
        starts[str(name)] = pos
        pos += sizes[name]
    assert pos <= SP_WORDS
    return starts


def random_case(rng, config, kind):
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
        starts = _place(rng, {"A": max(sizes["A"], sizes["dst"])})
        c["A"] = c["B"] = c["dst"] = starts["A"]
    elif kind == "dst_on_A":
        # The destination starts inside A: all reads happen before the first write.
        starts = _place(rng, {"A": sizes["A"] + sizes["dst"], "B": sizes["B"]})
        c["A"], c["B"] = starts["A"], starts["B"]
        c["dst"] = c["A"] + int(rng.integers(0, sizes["A"]))
    else:
        starts = _place(rng, sizes)
        c.update(starts)

    # Garbage everywhere, including the upper 24 bits of every operand word.
    image = [int(w) for w in rng.integers(0, 1 << 32, SP_WORDS, dtype=np.uint64)]
    if kind in ("extreme", "all_min", "big"):
        for name in ("A", "B"):
            start, size = footprints(c)[name]
            for w in range(start, start + size):
                low = 0x80 if kind == "all_min" else int(rng.choice(EXTREME_BYTES))
                image[w] = (image[w] & ~0xFF) | low
    return c, image


KINDS = ["plain", "plain", "extreme", "stride_overlap", "dst_on_A", "shared_operand", "plain", "all_min",
         "big"]


def run_cases(config, cases):
    """Run MM cases back to back on one unit and scratchpad; check memory and busy time of every case.

    A second testbench puts garbage on ``instr`` whenever ``start`` is low, so the unit must latch."""
    unit = MatrixUnit(config)
    bench = UnitBench(unit, config, cases[0][1])
    garbage = random.Random(1234)
    running = [True]
    busy_seen = []

    async def main(ctx):
        try:
            for n, (c, image) in enumerate(cases):
                if n:
                    for addr, word in enumerate(image):
                        ctx.set(bench.sp.mem.data[addr], word)
                busy = await start_and_wait(ctx, unit, encode_mm(**c))
                busy_seen.append(busy)
                assert busy == busy_time(c["M"], c["K"], c["N"]), (c, busy)
                got = [ctx.get(bench.sp.mem.data[addr]) for addr in range(SP_WORDS)]
                want = reference(image, c)
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

    run_bench(bench, main, scramble_instr, vcd_name=f"mm_{config.rows}x{config.cols}")
    return busy_seen


@pytest.mark.parametrize("rows, cols, count", [(4, 4, 150), (2, 3, 120), (1, 1, 90)])
def test_mm_random(rows, cols, count):
    config = Config(rows=rows, cols=cols, sp_words=SP_WORDS)
    rng = np.random.default_rng(rows * 10 + cols)
    cases = [random_case(rng, config, KINDS[n % len(KINDS)]) for n in range(count)]
    run_cases(config, cases)


def test_mm_all_minus_128():
    config = Config(rows=2, cols=3, sp_words=SP_WORDS)
    M, K, N = 2, 20, 3
    c = {"M": M, "K": K, "N": N, "tb": 0, "lda": K, "ldb": N, "ldc": N, "A": 0, "B": 100, "dst": 200}
    image = [0xABCDEF80] * SP_WORDS
    run_cases(config, [(c, image)])
    assert reference(image, c)[200:206] == [K * 16384] * 6


def test_mm_long_k_1x1():
    # K beyond the random range, on the cheap 1x1 array: X = (K+1)*2 + 1.
    config = Config(rows=1, cols=1, sp_words=SP_WORDS)
    rng = np.random.default_rng(5)
    cases = []
    for K, tb in ((200, 0), (131, 1)):
        image = [int(w) for w in rng.integers(0, 1 << 32, SP_WORDS, dtype=np.uint64)]
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
    """Cycle by cycle: which word is read and written when, and busy/done, as docs/ISA.md's timing
    explanation and the unit's docstring describe."""
    config = Config(rows=rows, cols=cols, sp_words=SP_WORDS)
    c = dict(shape)
    M, K, N = c["M"], c["K"], c["N"]
    X = busy_time(M, K, N)
    reads, writes = {}, {}
    for k in range(K):
        for e in range(M + N):
            if e < M:
                addr = c["A"] + e * c["lda"] + k
            else:
                j = e - M
                addr = c["B"] + (j * c["ldb"] + k if c["tb"] else k * c["ldb"] + j)
            reads[1 + k * (M + N) + e] = addr
    for i in range(M):
        for j in range(N):
            writes[(K + 1) * (M + N) + 1 + i * N + j] = c["dst"] + i * c["ldc"] + j
    assert max(writes) == X

    rng = np.random.default_rng(9)
    image = [int(w) for w in rng.integers(0, 1 << 32, SP_WORDS, dtype=np.uint64)]
    unit = MatrixUnit(config)
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
            assert busy == (cycle <= X), cycle
            assert done == (cycle == X), cycle
            if ctx.get(unit.sp_rd.en):
                got_reads[cycle] = ctx.get(unit.sp_rd.addr)
            if ctx.get(unit.sp_wr.en):
                got_writes[cycle] = ctx.get(unit.sp_wr.addr)
            await ctx.tick()
        assert got_reads == reads
        assert got_writes == writes
        got = [ctx.get(bench.sp.mem.data[a]) for a in range(SP_WORDS)]
        assert got == reference(image, c)

    run_bench(bench, tb, vcd_name="mm_schedule")


def test_mm_verilog():
    """Module `mm` with the unit ports, address widths from the scratchpad size, deterministic, lint clean."""
    for config, addr_bits in ((Config(), 12), (Config(rows=2, cols=3, sp_words=SP_WORDS), 9)):
        ports, _ = verilog_ports(unit_verilog(lambda: MatrixUnit(config), "mm"), "mm")
        assert ports["sp_rd__addr"] == ports["sp_wr__addr"] == ("output", addr_bits)


def test_mm_wrong_config():
    with pytest.raises(TypeError, match=r"^Config must be a ga2_sw.config.Config, not "):
        MatrixUnit({"rows": 4})
