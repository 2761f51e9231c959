# amaranth: UnusedElaboratable=no
"""The processing element and the systolic array against plain Python/numpy models."""

import numpy as np
import pytest

from ga2_hdl.matrix.pe import ProcessingElement
from ga2_hdl.matrix.systolic import SystolicArray
from sim.testing import run_bench


def _wrap32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


# -- processing element -------------------------------------------------------------------------------

def test_pe_step_clear_hold():
    pe = ProcessingElement()

    async def tb(ctx):
        def outputs():
            return ctx.get(pe.a_o), ctx.get(pe.b_o), ctx.get(pe.acc)

        ctx.set(pe.a_i, -128)
        ctx.set(pe.b_i, 127)
        await ctx.tick().repeat(2)
        assert outputs() == (0, 0, 0), "neither step nor clear: nothing may change"

        ctx.set(pe.step, 1)
        await ctx.tick()
        # Operands pass through; the product is registered, so acc does not see it yet.
        assert outputs() == (-128, 127, 0)

        ctx.set(pe.a_i, 5)
        ctx.set(pe.b_i, -3)
        await ctx.tick()
        assert outputs() == (5, -3, -16256)

        ctx.set(pe.step, 0)
        ctx.set(pe.a_i, 99)
        ctx.set(pe.b_i, 99)
        await ctx.tick().repeat(3)
        assert outputs() == (5, -3, -16256), "hold: nothing changes without step"

        ctx.set(pe.step, 1)
        ctx.set(pe.a_i, 0)
        ctx.set(pe.b_i, 0)
        await ctx.tick()
        assert outputs() == (0, 0, -16256 - 15)

        # clear has priority over step and also zeroes the registered product.
        ctx.set(pe.a_i, 7)
        ctx.set(pe.b_i, 7)
        await ctx.tick()            # prod = 49
        ctx.set(pe.clear, 1)
        await ctx.tick()
        assert outputs() == (0, 0, 0)
        ctx.set(pe.clear, 0)
        ctx.set(pe.step, 0)
        await ctx.tick()
        assert outputs() == (0, 0, 0)
        ctx.set(pe.step, 1)
        await ctx.tick()            # accumulates the cleared product (0), registers 49
        assert outputs() == (7, 7, 0)
        await ctx.tick()
        assert outputs() == (7, 7, 49)

    run_bench(pe, tb, vcd_name="pe_basic")


@pytest.mark.parametrize("a_mul_port", [False, True])
def test_pe_random_against_model(a_mul_port):
    """With ``a_mul_port`` the multiplier's operand is junk wherever b is 0 (all the port's contract allows)
    and the sums must not change; ``a_mul_o`` is a of the latest step, never cleared."""
    pe = ProcessingElement(a_mul_port=a_mul_port)
    rng = np.random.default_rng(7)

    async def tb(ctx):
        a_o = b_o = prod = acc = a_mul_o = 0
        for _ in range(300):
            a, b = (int(x) for x in rng.choice([-128, -127, -1, 0, 1, 126, 127, *range(-5, 6)], 2))
            if rng.random() < 0.5:
                a, b = (int(x) for x in rng.integers(-128, 128, 2))
            step, clear = int(rng.random() < 0.7), int(rng.random() < 0.05)
            if a_mul_port and rng.random() < 0.3:
                b = 0
            ctx.set(pe.a_i, a)
            ctx.set(pe.b_i, b)
            ctx.set(pe.step, step)
            ctx.set(pe.clear, clear)
            if a_mul_port:
                ctx.set(pe.a_mul_i, int(rng.integers(-128, 128)) if b == 0 else a)
            await ctx.tick()
            if step:
                a_mul_o = a
            if clear:
                a_o = b_o = prod = acc = 0
            elif step:
                a_o, b_o, prod, acc = a, b, a * b, _wrap32(acc + prod)
            assert (ctx.get(pe.a_o), ctx.get(pe.b_o), ctx.get(pe.acc)) == (a_o, b_o, acc)
            assert ctx.get(pe.a_mul_o) == a_mul_o

    run_bench(pe, tb, vcd_name=f"pe_random_{int(a_mul_port)}")


# -- systolic array -----------------------------------------------------------------------------------

def _partial(A, B, r, c, steps_done):
    """What PE(r, c) holds after steps 0 .. steps_done-1: products k with k + r + c + 1 <= steps_done - 1."""
    K = A.shape[1]
    ks = [k for k in range(K) if k + r + c + 1 <= steps_done - 1]
    return int(sum(int(A[r, k]) * int(B[k, c]) for k in ks))


def _array_cases(rng, rows, cols, count):
    cases = []
    for n in range(count):
        M = int(rng.integers(1, rows + 1))
        N = int(rng.integers(1, cols + 1))
        K = int(rng.integers(1, 9))
        if n == 0:
            M, N = rows, cols                       # the full array
        kind = n % 3
        if kind == 1:                               # the extremes only
            A = rng.choice([-128, 127], (M, K))
            B = rng.choice([-128, 127], (K, N))
        elif kind == 2 and n < 3:                   # all -128: every product is +16384
            A = np.full((M, K), -128)
            B = np.full((K, N), -128)
        else:
            A = rng.integers(-128, 128, (M, K))
            B = rng.integers(-128, 128, (K, N))
        cases.append((A.astype(np.int64), B.astype(np.int64), bool(rng.random() < 0.5)))
    return cases


@pytest.mark.parametrize("rows, cols", [(1, 1), (2, 3), (3, 2), (4, 4)])
def test_array_matmul(rows, cols):
    dut = SystolicArray(rows=rows, cols=cols)
    rng = np.random.default_rng(100 * rows + cols)
    cases = _array_cases(rng, rows, cols, 8)

    async def tb(ctx):
        for A, B, gaps in cases:
            M, K = A.shape
            N = B.shape[1]
            ctx.set(dut.clear, 1)
            await ctx.tick()
            ctx.set(dut.clear, 0)
            C = A @ B
            steps = K + M + N - 1
            for t in range(steps):
                # Unskewed slice t; rows >= M, columns >= N and t >= K get zeros.
                a = [int(A[r, t]) if r < M and t < K else 0 for r in range(rows)]
                b = [int(B[t, c]) if c < N and t < K else 0 for c in range(cols)]
                if gaps and rng.random() < 0.3:
                    # An idle cycle with garbage on the inputs: the array must hold.
                    ctx.set(dut.a, [int(x) for x in rng.integers(-128, 128, rows)])
                    ctx.set(dut.b, [int(x) for x in rng.integers(-128, 128, cols)])
                    ctx.set(dut.step, 0)
                    await ctx.tick()
                ctx.set(dut.a, a)
                ctx.set(dut.b, b)
                ctx.set(dut.step, 1)
                await ctx.tick()
                # After every step each PE holds exactly the products that have reached it by then.
                acc = list(ctx.get(dut.acc))
                for r in range(rows):
                    for c in range(cols):
                        want = _partial(A, B, r, c, t + 1) if r < M and c < N else 0
                        assert acc[r * cols + c] == want, (r, c, t)
            ctx.set(dut.step, 0)
            await ctx.tick()
            acc = np.array(list(ctx.get(dut.acc))).reshape(rows, cols)
            assert np.array_equal(acc[:M, :N], C), f"{M}x{K}x{N}"
            # The step count is tight: after one step fewer (checked above against _partial), PE(M-1, N-1)
            # was still one product short.
            short = C[M - 1, N - 1] - A[M - 1, K - 1] * B[K - 1, N - 1]
            assert _partial(A, B, M - 1, N - 1, steps - 1) == short

    run_bench(dut, tb, vcd_name=f"systolic_{rows}x{cols}")


def test_array_all_minus_128():
    rows, cols, K = 2, 2, 20
    dut = SystolicArray(rows=rows, cols=cols)

    async def tb(ctx):
        for t in range(K + rows + cols - 1):
            ctx.set(dut.a, [-128 if t < K else 0] * rows)
            ctx.set(dut.b, [-128 if t < K else 0] * cols)
            ctx.set(dut.step, 1)
            await ctx.tick()
        assert list(ctx.get(dut.acc)) == [K * 16384] * (rows * cols)

    run_bench(dut, tb)


@pytest.mark.parametrize("rows, cols", [(0, 1), (1, 0), (-1, 2), (2.0, 2), (True, 2)])
def test_array_wrong_size(rows, cols):
    with pytest.raises(TypeError, match=r"^(Row|Column) count must be a positive integer, not "):
        SystolicArray(rows=rows, cols=cols)


# -- the decoupled chip's array: tiles one after another, no clear -----------------------------------------

@pytest.mark.parametrize("rows, cols", [(4, 4), (2, 3), (1, 1)])
def test_tiled_array_runs_tiles_back_to_back(rows, cols):
    """Random tiles (K from 1 to 9, int8 operands with -128 and 127 frequent) presented slice by slice with random
    bubbles between slices, and often none between one tile's last slice and the next one's first: every cell's
    ``out`` holds numpy's product of its tile exactly from cycle ``t_last + r + c + 2`` (``t_last``: the cycle of
    the tile's last slice) until the same cycle of the next tile, whatever the other cells and the bubbles
    carry (the bubbles present garbage operands, which must count as zero)."""
    from ga2_hdl.matrix.tiled_array import TiledSystolicArray
    rng = np.random.default_rng(rows * 10 + cols)
    dut = TiledSystolicArray(rows=rows, cols=cols)
    tiles, cycle, schedule = [], 0, {}          # schedule: cycle -> (a, b, first, last)
    for _ in range(25):
        K = int(rng.integers(1, 10))
        values = np.array([-128, 127, -1, 0, 1, 5, -77], dtype=np.int64)
        A = rng.choice(values, (rows, K)) if rng.random() < 0.3 else rng.integers(-128, 128, (rows, K))
        B = rng.choice(values, (K, cols)) if rng.random() < 0.3 else rng.integers(-128, 128, (K, cols))
        for k in range(K):
            cycle += int(rng.choice([0, 0, 0, 1, 3]))       # bubbles before the slice
            schedule[cycle] = (A[:, k], B[k, :], k == K - 1)
            cycle += 1
        tiles.append((cycle - 1, A @ B))
        cycle += int(rng.choice([0, 0, 2]))
    end = cycle + rows + cols + 4

    def holder(r, c, now):
        """The tile whose product cell (r, c) holds in cycle ``now`` (None before the first)."""
        held = None
        for t_last, product in tiles:
            if t_last + r + c + 2 <= now:
                held = product
        return held

    async def tb(ctx):
        for now in range(end):
            a, b, last = schedule.get(now, (rng.integers(-128, 128, rows), rng.integers(-128, 128, cols), False))
            ctx.set(dut.valid, now in schedule)
            ctx.set(dut.last, last)
            for r in range(rows):
                ctx.set(dut.a[r], int(a[r]))
            for c in range(cols):
                ctx.set(dut.b[c], int(b[c]))
            for r in range(rows):
                for c in range(cols):
                    product = holder(r, c, now)
                    if product is not None:
                        assert ctx.get(dut.out[r * cols + c]) == _wrap32(int(product[r, c])), (now, r, c)
            await ctx.tick()

    run_bench(dut, tb)
