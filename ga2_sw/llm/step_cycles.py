"""What SmolLM2's attention blocks alone cost on GA-2, per generated token, against batch and context: the cycle
model's count of the programs the chip runs for one block, times the model's blocks (``whole_step`` counts the
whole decode step, every product and the LM head).

Per block and decode step of ``B`` sequences at ``L`` tokens, two programs run back to back on a chip with the
online unit (no overlap between them is counted, so the figures are an upper bound of the overlapped step):

* the projections (:func:`projection_program`): the B new tokens' inputs, two int8 digit rows each (the GA-2
  path's 15-bit input, ``ga2_path.INPUT_RADIX``), then the q, k and v weights of every head (``(heads + 2
  kv_heads) d`` rows of ``d_model``) streamed through two tile buffers, ``cols`` rows a tile, MMs of up to
  ``rows`` input rows per tile (each weight loaded once for the batch); the int32 sums stored for the host
  (RoPE, the caches' int8);
* the attention (``ga2_sw.online_program.grouped_program``): each sequence's key/value heads, each streamed once
  for the query heads that share it, in chunks of 64 tokens; each output normalised twice (the coarse and the
  fine int8 reading, ``ga2_path.read_outputs``).

The rest of the block (the output projection, the MLP, the norms) and the LM head stay on the host in the GA-2
path, and are not counted. The terms beside the measured cycles: weights = the block's q, k, v weights (one word
each), KV = the B sequences' caches read by the attention (``2 L d`` words per key/value head and sequence)."""

from ..banking import operand_start, operand_stride
from ..config import Config
from ..cycles import cycle_counts
from ..decode import traffic
from ..isa import halt, mm, rows_moved, rq, st
from ..online_program import Group, GroupedLayout, grouped_program

__all__ = ["SMOLLM2", "chip_banks", "projection_program", "block_programs",
           "block_cycles", "StepCycles", "table"]

# SmolLM2-135M's attention shape (docs/LLM.md): 30 blocks, d_model 576, 9 query heads over 3 key/value heads of 64.
SMOLLM2 = {"blocks": 30, "d_model": 576, "heads": 9, "kv_heads": 3, "d": 64}

def chip_banks(size):
    """Scratchpad banks of the table's size x size chip: up to the 4 x 4, a bank per operand port (2 x size: the
    4 x 4's 8; with 16 its crossbar did not route on an 85F, docs/SYNTH.md);
    larger, four per column (the 8 x 8's 32: its grouped attention takes 10% more cycles on 16, and it has not
    been placed)."""
    return 2 * size if size <= 4 else 4 * size


def _chip(size):
    """The chip of the table: size x size, decoupled, the online unit, ``chip_banks(size)`` banks."""
    return Config(rows=size, cols=size, mode="decoupled", online_unit=1, sp_banks=chip_banks(size),
                  d=64).with_largest_memories()


def projection_program(config, batch, d_model, q_rows, kv_rows, v_mn=(1, 0), digits=2, qk_mn=None):
    """The block's q, k, v projections for ``batch`` tokens of ``digits`` int8 input rows each: ``q_rows`` + 2
    ``kv_rows`` weight rows of ``d_model`` (W transposed, row-major in external memory from 0), the tokens' rows
    after them, the outputs after those. Each weight tile meets every input row (MMs of up to ``rows`` input
    rows); with one digit, v is requantised on the chip (RQ, ``v_mn``), and with ``qk_mn`` q and k too, each
    tile's outputs once the next tile's MMs have issued, so that the vector lane works beside the stream (every
    output an int8, as a packed port stores it: ``ga2_cli.analyses.weight_stream``), stored tile by tile (tile
    ``r0``'s ``n`` outputs of token b from ``r0 batch + b n`` on); with two digits every sum goes to the host."""
    C, R = config.cols, config.rows
    inputs = batch * digits
    rows = q_rows + 2 * kv_rows
    # Decoupled, the operands' rows are placed as prefill's (``banking.operand_stride``): rows an odd multiple of
    # 2 Nb apart, the inputs (A) on even ``a >> b``, the weights (B) on odd, so a slice reads its operands on
    # distinct banks (d_model = 576 words apart, every row of both would sit on one of 8 banks).
    lx = operand_stride(d_model, config)
    X = 0
    W = operand_start(X + inputs * lx, "B", config)
    OUT = W + 2 * C * lx
    ex_w, ex_x = 0, rows * d_model
    ex_out = ex_x + inputs * d_model
    starts = range(0, rows, C)

    def buffer(k):      # tile k's weight rows live in buffer k % 2
        return W + (k % 2) * C * lx

    def load(k):
        r0 = starts[k]
        return rows_moved("LD", buffer(k), lx, ex_w + r0 * d_model, d_model, min(C, rows - r0), d_model)
    if qk_mn is not None and digits != 1:
        raise ValueError("projection_program: qk_mn requantises the sums of one input digit row (digits = 1)")

    # The outputs: token-major (token b's output r at OUT + b rows + r), or with qk_mn tile-major (tile k's
    # outputs together, token b's output r0 + c at OUT + r0 batch + b n + c, n the tile's width), so that a
    # tile's RQs and the next tile's MM touch disjoint ranges and run side by side.
    def out_at(r0, b):
        return OUT + (r0 * inputs + b * min(C, rows - r0) if qk_mn is not None else b * rows + r0)

    def requantise(k):
        """With ``qk_mn``, tile k's outputs to int8: one RQ, or a token row at a time where the tile holds q or k
        outputs and v outputs both."""
        if qk_mn is None:
            return []
        r0, r1, split = starts[k], min(starts[k] + C, rows), q_rows + kv_rows
        if r1 <= split or r0 >= split:
            mn = qk_mn if r1 <= split else v_mn
            return [rq(dst=out_at(r0, 0), src=out_at(r0, 0), len=batch * (r1 - r0), m=mn[0], s=mn[1])]
        return [rq(dst=out_at(r0, b) + lo - r0, src=out_at(r0, b) + lo - r0, len=hi - lo, m=mn[0], s=mn[1])
                for lo, hi, mn in ((r0, split, qk_mn), (split, r1, v_mn)) for b in range(batch)]
    prog = [*rows_moved("LD", X, lx, ex_x, d_model, inputs, d_model), *load(0)]
    behind = []          # the RQs of the tile before: they wait for its MMs' writes, which the next MMs overlap
    for k, r0 in enumerate(starts):
        # The next tile's load before this tile's MMs, so the DMA lane never waits on them; of a load of a row
        # at a time only the first row, the rest after the MMs: the MMs issue once the first row does (when
        # this tile's last row is in), and so finish reading this buffer before the tile after next loads it.
        ahead = load(k + 1) if k + 1 < len(starts) else []
        prog += ahead[:1]
        prog += [mm(dst=out_at(r0, i0), A=X + i0 * lx, B=buffer(k), M=min(R, inputs - i0), K=d_model,
                    N=min(C, rows - r0), tb=1, lda=lx, ldb=lx, ldc=min(C, rows - r0) if qk_mn is not None else rows)
                 for i0 in range(0, inputs, R)]
        prog += ahead[1:]
        prog += behind
        behind = requantise(k)
    prog += behind
    if digits == 1 and qk_mn is None:     # v to the value cache's int8 (one RQ per token row)
        prog += [rq(dst=OUT + b * rows + q_rows + kv_rows, src=OUT + b * rows + q_rows + kv_rows, len=kv_rows,
                    m=v_mn[0], s=v_mn[1]) for b in range(batch)]
    prog += [st(src=OUT, dst=ex_out, len=inputs * rows), halt()]
    return prog


def _projection(config, batch, shape):
    d = shape["d"]
    return projection_program(config, batch, shape["d_model"], shape["heads"] * d, shape["kv_heads"] * d)


def _attention(config, contexts, shape, key_digits=1):
    G = shape["heads"] // shape["kv_heads"]
    # every output read twice, coarse and fine, as the GA-2 path reads it (ga2_path.FINE_RATIO)
    groups = tuple(Group(L, ((1, 0),) * G, ((1, 0),) * G, ((1, 0),) * G) for L in contexts
                   for _ in range(shape["kv_heads"]))
    return grouped_program(GroupedLayout(config, groups, shape["d"], 64, key_digits))


def block_programs(size, contexts, shape=SMOLLM2, key_digits=1):
    """(config, projection program, attention program) of one block's decode step of ``len(contexts)`` sequences,
    sequence ``n`` attending over ``contexts[n]`` tokens (ragged), on the size x size chip; keys of
    ``key_digits`` int8 digits (2: wide keys, docs/LONG_CONTEXT.md)."""
    config = _chip(size)
    return config, _projection(config, len(contexts), shape), _attention(config, contexts, shape, key_digits)


def _kv_words(contexts, shape, key_digits=1):
    """The caches' words: ``key_digits`` planes of keys and one of values, ``L d`` words each per kv head."""
    return sum(shape["kv_heads"] * (key_digits + 1) * L * shape["d"] for L in contexts)


def _weight_words(shape):
    return (shape["heads"] + 2 * shape["kv_heads"]) * shape["d"] * shape["d_model"]


def block_cycles(size, batch, context, shape=SMOLLM2, key_digits=1):
    """``{"projection", "attention", "cycles", "weights", "kv"}`` of one block's decode step on the size x size
    chip: the two programs' cycle-model counts and their traffic terms."""
    config, proj, attn = block_programs(size, [context] * batch, shape, key_digits)
    p, a = cycle_counts(proj, config)[0].cycles, cycle_counts(attn, config)[0].cycles
    return {"projection": p, "attention": a, "cycles": p + a, "weights": _weight_words(shape),
            "kv": _kv_words([context] * batch, shape, key_digits)}


class StepCycles:
    """The cycles of the model's decode steps on the size x size chip, batch and contexts as they come
    (continuous batching, ``ga2_sw.llm.serving``): per step, every block runs the projection program of the
    step's batch and the attention program of its sequences' contexts; the blocks are alike, so a step costs
    ``blocks`` times one block. Counts are remembered per batch (projection) and per contexts (attention)."""

    def __init__(self, size, shape=SMOLLM2):
        self.size, self.shape, self.config = size, shape, _chip(size)
        self._projection, self._attention = {}, {}

    def step(self, contexts):
        """``{"cycles", "projection", "attention", "words", "weights", "kv"}`` of a step whose sequences attend
        over ``contexts[n]`` tokens each: the cycles and the words moved of all blocks' programs; ``weights``
        and ``kv`` split the words the step must move at least (the q, k, v weights once per step, each
        sequence's caches once)."""
        contexts = tuple(contexts)
        if not 1 <= len(contexts) <= self.size:
            raise ValueError(f"a step of the {self.size}x{self.size} chip takes 1..{self.size} sequences, "
                             f"not {len(contexts)}")
        config = self.config
        if len(contexts) not in self._projection:
            proj = _projection(config, len(contexts), self.shape)
            self._projection[len(contexts)] = (cycle_counts(proj, config)[0].cycles, traffic(proj)[1])
        if contexts not in self._attention:
            attn = _attention(config, contexts, self.shape)
            self._attention[contexts] = (cycle_counts(attn, config)[0].cycles, traffic(attn)[1])
        (p, pw), (a, aw) = self._projection[len(contexts)], self._attention[contexts]
        blocks = self.shape["blocks"]
        return {"cycles": blocks * (p + a), "projection": blocks * p, "attention": blocks * a,
                "words": blocks * (pw + aw), "weights": blocks * _weight_words(self.shape),
                "kv": blocks * _kv_words(contexts, self.shape)}



def table(sizes=(4, 8), batches=(1, 2, 4, 8), contexts=(64, 256, 1024), shape=SMOLLM2, progress=None, key_digits=1):
    """Rows ``{"chip", "batch", "context", "cycles_per_token", ...}``: the blocks' cycles per generated token
    (``blocks x block cycles / batch``), batches up to the array's rows; keys of ``key_digits`` int8 digits.
    The table's chips hold any SmolLM2 step in their memories, more block RAM than an ECP5 has, so none is
    placed: tokens/s are at a stated clock (``ga2 llm throughput`` has the whole step on the placed ``llm``
    chip)."""
    rows = []
    for size in sizes:
        for B in (b for b in batches if b <= size):
            for L in contexts:
                r = block_cycles(size, B, L, shape, key_digits)
                per_token = round(shape["blocks"] * r["cycles"] / B)
                rows.append({"chip": f"{size}x{size}", "batch": B, "context": L, "key_digits": key_digits, **r,
                             "cycles_per_token": per_token})
                if progress:
                    progress()
    return rows
