"""Prefill: the T tokens of a prompt through one attention head in ONE program, with a causal mask (docs/PREFILL.md).

Decode moves a weight matrix to compute one row of products with it; prefill computes ``T`` rows with each
weight it loads, and every key and value it produces is used by the ``T - t`` queries after it. So prefill is
the compute-bound phase the chapter leaves out, and the program here measures it with the chip's own units and
instructions: no new opcode.

* **Projections.** ``X`` (``T x d_model``) is loaded once; the three weight matrices stream through two
  scratchpad buffers (matrix ``n + 1`` loads while matrix ``n``'s products run), each stored transposed
  (column ``c`` of ``W`` is row ``c`` of the buffer, read with ``tb = 1``). Every ``rows x cols`` tile of
  ``Q``, ``K``, ``V`` is one MM with ``K = d_model``; each row block of a projection is requantised in place
  (``RQ dst = src``) to the int8 the chapter's decode step stores.
* **Causal attention.** Query block ``r`` (``rows`` tokens, the last of them ``t_last``) computes its scores
  against keys ``0 .. t_last`` (``cols`` keys per MM), then, row by row, the chapter's softmax path over the
  row's own ``t + 1`` keys: RQ to 1/16-logit int8 scores, SM to Q16 probabilities (both in place), RQ to 7-bit
  weights. That each row stops at its own length IS the causal mask: the weights past it are never written.
  The ``P V`` products of a block (``K = t_last + 1``) see zeros where a row's future keys would be: an
  ``RQ`` with ``m = 0`` (the chip's memset: it writes 0 whatever it reads) zeroes those words of each row
  (with a buffer per block) or each buffer once (with two alternating, whose rows only ever grow).
* **Outputs and caches.** Each block's output rows are requantised to int8 and stored; after the loop, the
  int8 K and V caches are stored for the decode steps that follow.
* **The decoupled order.** A block's scores and softmax rows need only Q and K, so with a buffer per query
  block (``PrefillLayout.buffers``) the program puts them between the V projection's tiles: the vector lane
  works through the softmax rows while the matrix lane computes V, and the ``P V`` products follow V. Packed
  projections are requantised a block of rows per RQ, so an MM waits only for the rows it reads.

The numerics are the decode step's (``ga2_sw.decode``): prefill's output at token ``t`` is exactly the decode
step's at ``t`` (``decode.int_reference``), which the tests check, and the reference here (:func:`reference`,
numpy on integers) is written from docs/ISA.md's formulas, not from this builder.

Decoupled, the operand streams of every MM must sit on distinct banks for a slice to be read in one cycle
(``ga2_sw.banking``): the scratchpad rows of ``X``, the weight tiles, ``Q``, ``K``, V transposed and the weights
are placed by a rule (``PrefillLayout``: strides an odd multiple of ``2 Nb``, A and B operands on the two
parities of ``a >> b``), and the external memory keeps plain rows (an LD or ST per padded row)."""

from dataclasses import dataclass

import numpy as np

from . import isa
from .banking import mm_extra_cycles, operand_start, operand_stride
from .layout import LayoutBase, LayoutError
from .numerics import EXP_TABLE, Q16_ONE, quantize, s8, u32

__all__ = ["PrefillLayout", "PrefillError", "ext_image", "program", "reference", "results", "needed_config",
           "useful_macs", "bank_conflict_cycles"]


class PrefillError(LayoutError):
    """The prefill does not fit the configuration (the message names the field and what it needs)."""


@dataclass(frozen=True)
class PrefillLayout(LayoutBase):
    """Where everything of a ``tokens``-token prefill lives, in the scratchpad and in external memory.

    Every matrix product of the prefill reads both operands as rows stepped one word per k-slice (the weights
    and the V cache are stored transposed for it, ``tb = 1``). In order the rows are packed. Decoupled,
    the operands are placed for the banks (``ga2_sw.banking``: word ``a`` is in bank ``(a + (a >> b)) mod
    Nb``): two rows whose starts are congruent modulo ``Nb`` cross a bank row together, so their banks differ
    by ``(a >> b) - (a' >> b)`` at every slice; so every operand row starts at a multiple of ``Nb``, every
    operand's row stride is an odd multiple of ``2 Nb`` (the ``Nb / 2`` rows of one operand land on distinct
    banks of one parity of ``a >> b``), and the A operands (X, Q, the weights) sit on even ``a >> b``, the B
    operands (the weight buffers, K, V transposed) on odd. With ``rows`` and ``cols`` at most ``Nb / 2``
    every slice of every MM then reads in one cycle (``bank_conflict_cycles`` = 0, tested); larger arrays
    share banks anyway.

    ``buffers``: how many query blocks have their own weight, score and output buffers. Two (block ``b + 2``
    reuses block ``b``'s) suffice in order, where nothing overlaps. Decoupled, every block has its own where
    the scratchpad holds them (``buffers=None`` chooses): then a block's softmax need not wait for the P V
    products of the block two before it, which wait for the whole V projection, and so the softmax rows
    run on the vector lane while the matrix lane computes V (``program``)."""
    config: object
    tokens: int
    buffers: int = None

    def __post_init__(self):
        c, T = self.config, self.tokens
        if self.buffers is None:
            object.__setattr__(self, "buffers", self._buffers_that_fit())
        if self.buffers < 2:
            raise PrefillError(f"A prefill layout needs at least 2 query-block buffers, not {self.buffers}")
        if not 1 <= T <= c.sm_max_len:
            raise PrefillError(f"A prefill of {T} tokens needs 1 <= tokens <= sm_max_len ({c.sm_max_len}): each "
                               f"row's softmax is one SM over its t + 1 scores")
        for field, needed in (("sp_words", self.sp_needed), ("ext_words", self.ext_needed)):
            most = type(c).field_range(field)[1]
            if needed > most:
                raise PrefillError(f"A prefill of {T} tokens with d_model={c.d_model}, d={c.d} on {c.rows}x{c.cols} "
                                   f"needs {needed:,} words of '{field}', more than any chip has ({most:,})")
        for name in ("lx", "lw", "lq", "lk", "lvt", "lwt"):
            if getattr(self, name) > isa.field_range(isa.Op.MM, "lda")[1]:
                raise PrefillError(f"A prefill row stride ({name} = {getattr(self, name)}) exceeds the MM "
                                   f"strides' 12 bits (4095): d_model, d or tokens must be smaller")

    def _buffers_that_fit(self):
        """One buffer per query block decoupled, where the scratchpad holds them; else two."""
        blocks = len(_blocks(self.tokens, self.config.rows))
        if self.config.decoupled and blocks > 2:
            try:
                if PrefillLayout(self.config, self.tokens, blocks).sp_needed <= self.config.sp_words:
                    return blocks
            except PrefillError:        # more than any scratchpad holds
                pass
        return 2

    @property
    def block_buffers(self):
        """Every query block has its own buffers (the decoupled program's order, ``_body``)."""
        return self.buffers >= len(_blocks(self.tokens, self.config.rows))

    def _stride(self, words):
        """The row stride of an operand of ``words`` words a row: packed in order; decoupled,
        ``banking.operand_stride``."""
        return operand_stride(words, self.config)

    def _start(self, addr, side):
        """Where an operand of ``side`` ("A" or "B") may start at or after ``addr``: ``banking.operand_start``."""
        return operand_start(addr, side, self.config)

    # strides (words between rows) ----------------------------------------------------------------------
    @property
    def lx(self):                       # X: T rows of d_model
        return self._stride(self.config.d_model)

    @property
    def lw(self):                       # a weight buffer: d rows (W's columns) of d_model
        return self._stride(self.config.d_model)

    @property
    def lq(self):                       # Q: T rows of d
        return self._stride(self.config.d)

    @property
    def lk(self):                       # K: T rows of d
        return self._stride(self.config.d)

    @property
    def lvt(self):                      # V transposed: d rows of T
        return self._stride(self.tokens)

    @property
    def lwt(self):                      # a weight row: T weights, zeros past the row's own token
        return self._stride(self.tokens)

    @property
    def ls(self):                       # a score row: up to T scores (int32, then int8, then Q16 in place)
        return self.tokens

    # scratchpad regions --------------------------------------------------------------------------------
    @property
    def X(self):
        return 0

    def tile_rows(self, n):
        """Rows (output channels) of projection n's weight tiles: an array's columns for Q and K, its rows for
        V (whose projection is computed transposed, the weights as the A operand)."""
        return self.config.rows if n == 2 else self.config.cols

    def W(self, k):                     # weight tile buffer k % 2: up to max(rows, cols) rows of lw
        first = self._start(self.X + self.tokens * self.lx, "B")
        return first + (k % 2) * max(self.config.rows, self.config.cols) * self.lw

    def tiles(self):
        """(projection n, first channel, channels, buffer) of every weight tile, in load order."""
        out = []
        for n in range(3):
            h = self.tile_rows(n)
            out += [(n, c0, min(h, self.config.d - c0)) for c0 in range(0, self.config.d, h)]
        return [(n, c0, h, self.W(k)) for k, (n, c0, h) in enumerate(out)]

    @property
    def Q(self):
        return self._start(self.W(1) + max(self.config.rows, self.config.cols) * self.lw, "A")

    @property
    def K(self):
        return self._start(self.Q + self.tokens * self.lq, "B")

    @property
    def VT(self):
        return self._start(self.K + self.tokens * self.lk, "B")

    def WT(self, block):                # weight buffer of a query block: rows x lwt
        first = self._start(self.VT + self.config.d * self.lvt, "A")
        return first + (block % self.buffers) * self.config.rows * self.lwt

    def S(self, block):                 # score buffer of a query block: rows x ls
        first = self.WT(self.buffers - 1) + self.config.rows * self.lwt
        return first + (block % self.buffers) * self.config.rows * self.ls

    def O(self, block):                 # output buffer of a query block: rows x d, int32 then int8
        first = self.S(self.buffers - 1) + self.config.rows * self.ls
        return first + (block % self.buffers) * self.config.rows * self.config.d

    @property
    def sp_needed(self):
        return self.O(self.buffers - 1) + self.config.rows * self.config.d

    # external memory (plain rows) ----------------------------------------------------------------------
    @property
    def ex_w(self):                     # three matrices, each transposed: d rows (W's columns) of d_model
        return 0

    @property
    def ex_x(self):                     # T rows of d_model
        return self.ex_w + 3 * self.config.d_model * self.config.d

    @property
    def ex_k(self):                     # the K cache, T rows of d
        return self.ex_x + self.tokens * self.config.d_model

    @property
    def ex_vt(self):                    # the V cache transposed, d rows of T
        return self.ex_k + self.tokens * self.config.d

    @property
    def ex_out(self):                   # T rows of d
        return self.ex_vt + self.tokens * self.config.d

    @property
    def ext_needed(self):
        return self.ex_out + self.tokens * self.config.d


def _blocks(T, R):
    """(block number, first token, rows) of the query blocks."""
    return [(n, r0, min(R, T - r0)) for n, r0 in enumerate(range(0, T, R))]


def _projection_mms(lay, n, c0, h, tile):
    """The MMs of projection ``n`` (Q, K, V) with the weight tile of channels ``c0 .. c0 + h`` (in buffer
    ``tile``), over every token: Q and K as token rows (A = X, one MM per block of ``rows`` tokens), V
    transposed, as channel rows (A = the weight tile, B = X: one MM per ``cols`` tokens)."""
    c, T = lay.config, lay.tokens
    if n < 2:
        dst, ldc = (lay.Q, lay.lq) if n == 0 else (lay.K, lay.lk)
        return [isa.mm(dst=dst + r0 * ldc + c0, A=lay.X + r0 * lay.lx, B=tile, M=rows, K=c.d_model, N=h, tb=1,
                       lda=lay.lx, ldb=lay.lw, ldc=ldc)
                for _, r0, rows in _blocks(T, c.rows)]
    return [isa.mm(dst=lay.VT + c0 * lay.lvt + t0, A=tile, B=lay.X + t0 * lay.lx, M=h, K=c.d_model,
                   N=min(c.cols, T - t0), tb=1, lda=lay.lw, ldb=lay.lx, ldc=lay.lvt)
            for t0 in range(0, T, c.cols)]


def _score_mms(lay, block, r0, rows):
    """Query block ``block``'s scores against keys ``0 .. r0 + rows``, ``cols`` keys per MM."""
    c = lay.config
    keys = r0 + rows
    return [isa.mm(dst=lay.S(block) + k0, A=lay.Q + r0 * lay.lq, B=lay.K + k0 * lay.lk, M=rows, K=c.d,
                   N=min(c.cols, keys - k0), tb=1, lda=lay.lq, ldb=lay.lk, ldc=lay.ls)
            for k0 in range(0, keys, c.cols)]


def _pv_mms(lay, block, r0, rows):
    """Query block ``block``'s weights times the values of keys ``0 .. r0 + rows`` (V transposed: ``tb = 1``)."""
    c = lay.config
    return [isa.mm(dst=lay.O(block) + c0, A=lay.WT(block), B=lay.VT + c0 * lay.lvt, M=rows, K=r0 + rows,
                   N=min(c.cols, c.d - c0), tb=1, lda=lay.lwt, ldb=lay.lvt, ldc=c.d)
            for c0 in range(0, c.d, c.cols)]


def _requantised_rows(region, stride, rows, length, mn, group=None):
    """RQs of ``rows`` rows of ``length`` words in place: when the rows are packed, one over ``group`` rows at
    a time (default: all of them), else one per row (requantising the pad words between rows would cost the
    vector lane a cycle each)."""
    if stride == length:
        group = group or rows
        return [isa.rq(dst=region + r * stride, src=region + r * stride, len=min(group, rows - r) * length,
                       m=mn[0], s=mn[1]) for r in range(0, rows, group)]
    return [isa.rq(dst=region + r * stride, src=region + r * stride, len=length, m=mn[0], s=mn[1])
            for r in range(rows)]


def program(config, tokens, P, lay=None):
    """The prefill of ``tokens`` tokens as one program (decoupled: reordered to overlap the lanes, as a
    decode step is). ``P``: the requantisation parameters (``decode.rq_params``). PrefillError when it does
    not fit the configuration's memories."""
    from .schedule import reorder
    lay = lay or PrefillLayout(config, tokens)
    for name, needed in (("sp_words", lay.sp_needed), ("ext_words", lay.ext_needed)):
        if getattr(config, name) < needed:
            raise PrefillError(f"Config field '{name}' is {getattr(config, name)}, but a prefill of {tokens} tokens "
                               f"with d_model={config.d_model}, d={config.d} on {config.rows}x{config.cols} "
                               f"needs {needed} words")
    prog = _body(config, tokens, P, lay)
    if len(prog) > config.imem_words:
        raise PrefillError(f"Config field 'imem_words' is {config.imem_words}, but the prefill program has "
                           f"{len(prog)} instructions")
    if not config.decoupled:
        return prog
    # With a buffer per query block the body's order of the MMs is a plan (``_body``): the list scheduler
    # either keeps it or reorders the matrix lane too, whichever the cycle model finds faster (keeping it
    # wins where the banks leave room for the vector lane beside an MM's operands: 66,345 cycles against
    # 76,567 on the 8 x 8 with 32 banks, d_model 256, 4 bytes a beat and row writes; freeing it wins where
    # they do not: 60,657 against 62,925 on the 8 x 8 with 8 banks, d_model 64).
    return reorder(prog, config, orderings=((), ("matrix",)) if lay.block_buffers else ((),))


def _body(config, tokens, P, lay):
    """The prefill's instructions in program order."""
    c, T, R = config, tokens, config.rows
    dm, d = c.d_model, c.d
    blocks = _blocks(T, R)
    # Decoupled, an MM waits only for the rows it reads: packed rows are requantised a block at a time.
    group = (lambda rows: rows) if c.decoupled else (lambda rows: None)

    def projection(n, c0, h, tile):
        """One weight tile: its load, its MMs and, after the projection's last tile, the projection's RQs."""
        out = isa.rows_moved("LD", tile, lay.lw, lay.ex_w + (n * d + c0) * dm, dm, h, dm)
        out += _projection_mms(lay, n, c0, h, tile)
        if c0 + h == d:
            key = ("q", "k", "v")[n]
            if n < 2:
                acc, ld = (lay.Q, lay.lq) if n == 0 else (lay.K, lay.lk)
                out += _requantised_rows(acc, ld, T, d, P[key], group(R))
            else:
                out += _requantised_rows(lay.VT, lay.lvt, d, T, P[key], group(lay.tile_rows(2)))
        return out

    def weights(block, r0, rows):
        """Query block ``block``'s scores, then, row by row, the softmax path to its weights."""
        out = _score_mms(lay, block, r0, rows)
        for i in range(rows):
            n = r0 + i + 1                                  # token r0 + i attends to keys 0 .. r0 + i
            row = lay.S(block) + i * lay.ls
            if lay.block_buffers and i + 1 < rows:          # the keys past the row's token that P V reads
                tail = lay.WT(block) + i * lay.lwt + n
                out.append(isa.rq(dst=tail, src=tail, len=rows - 1 - i, m=0, s=0))
            out += [isa.rq(dst=row, src=row, len=n, m=P["scores"][0], s=P["scores"][1]),
                    isa.sm(dst=row, src=row, len=n),
                    isa.rq(dst=lay.WT(block) + i * lay.lwt, src=row, len=n, m=P["weights"][0], s=P["weights"][1])]
        return out

    def outputs(block, r0, rows):
        """Query block ``block``'s weights times the values, requantised and stored."""
        return _pv_mms(lay, block, r0, rows) + [
            isa.rq(dst=lay.O(block), src=lay.O(block), len=rows * d, m=P["out"][0], s=P["out"][1]),
            isa.st(src=lay.O(block), dst=lay.ex_out + r0 * d, len=rows * d)]

    prog = []
    # The weight rows start at zero: an RQ with m = 0 writes 0 whatever it reads. With a buffer per block only
    # the words P V reads past each row's own keys are (``weights``).
    if not lay.block_buffers:
        for block in range(min(lay.buffers, len(blocks))):
            prog.append(isa.rq(dst=lay.WT(block), src=lay.WT(block), len=R * lay.lwt, m=0, s=0))
    prog += isa.rows_moved("LD", lay.X, lay.lx, lay.ex_x, dm, T, dm)
    # The weights stream through two tile buffers, a tile of output channels at a time (the next loads while
    # this one's products run); each projection is requantised to int8 in place once its last tile is done.
    q_and_k = [tile for tile in lay.tiles() if tile[0] < 2]
    v = [tile for tile in lay.tiles() if tile[0] == 2]
    for tile in q_and_k:
        prog += projection(*tile)
    if lay.block_buffers:
        # The softmax rows need only Q and K: each block's go before a V tile (the blocks spread evenly over
        # the tiles), so the vector lane works through them while the matrix lane computes V; P V follows V.
        for i, tile in enumerate(v):
            for block in blocks[i * len(blocks) // len(v):(i + 1) * len(blocks) // len(v)]:
                prog += weights(*block)
            prog += projection(*tile)
        for block in blocks:
            prog += outputs(*block)
    else:
        for tile in v:
            prog += projection(*tile)
        for block in blocks:
            prog += weights(*block) + outputs(*block)
    prog += isa.rows_moved("ST", lay.K, lay.lk, lay.ex_k, d, T, d)
    prog += isa.rows_moved("ST", lay.VT, lay.lvt, lay.ex_vt, T, d, T)
    prog.append(isa.halt())
    return prog


def useful_macs(config, tokens):
    """The multiply-accumulates a causal prefill needs (the three projections, each token's scores against its
    own and earlier keys, its weights times their values); the array also computes the masked scores and
    zero weights of each block's future keys."""
    T, dm, d = tokens, config.d_model, config.d
    pairs = T * (T + 1) // 2
    return 3 * T * dm * d + 2 * pairs * d


def bank_conflict_cycles(prog, config):
    """The cycles the program's MMs lose to bank conflicts (``banking.mm_extra_cycles``; decoupled only)."""
    return sum(mm_extra_cycles(i, config) for i in prog if i.op == isa.Op.MM) if config.decoupled else 0


# -- images, results and the independent reference ------------------------------------------------------------

def needed_config(config, tokens):
    """``(sp_words, ext_words, instructions)`` a prefill of ``tokens`` tokens needs on ``config``'s shape (the
    scratchpad rounded up to a whole number of rows of every bank; the instructions with HALT)."""
    lay = PrefillLayout(config, tokens)
    step = config.sp_banks
    # The program's length depends neither on the data nor on the order (reorder keeps every instruction).
    length = len(_body(config, tokens, {key: (1, 0) for key in ("q", "k", "v", "scores", "weights", "out")}, lay))
    return -(-lay.sp_needed // step) * step, lay.ext_needed, length


def ext_image(w, lay):
    """External memory before the prefill: the quantised weights (each matrix transposed: column c of W is row
    c) and the prompt's hidden states, as plain rows; the caches and outputs zero."""
    c, s = lay.config, w.scales
    dm, d = c.d_model, c.d
    img = [0] * c.ext_words
    for n, name in enumerate(("wq", "wk", "wv")):
        for col in range(d):
            for r in range(dm):
                img[lay.ex_w + n * dm * d + col * dm + r] = u32(quantize(float(w.W[n][r, col]), s[name]))
    for t in range(lay.tokens):
        for col in range(dm):
            img[lay.ex_x + t * dm + col] = u32(quantize(float(w.X[0][t, col]), s["x"]))
    return img


def results(lay, ext):
    """``{"out", "k", "v"}``: the prefill's int8 outputs and caches (T x d each; the V cache is stored
    transposed) read from external memory."""
    T, d = lay.tokens, lay.config.d
    read = lambda base, shape: np.array([s8(v) for v in ext[base:base + T * d]], dtype=np.int64).reshape(shape)
    return {"out": read(lay.ex_out, (T, d)), "k": read(lay.ex_k, (T, d)), "v": read(lay.ex_vt, (d, T)).T}


def _requant(a, m, s):
    """docs/ISA.md's requant on an int64 array: sat8((a*m + 2^(s-1)) >> s), an arithmetic shift."""
    v = a.astype(np.int64) * m
    if s > 0:
        v = (v + (1 << (s - 1))) >> s
    return np.clip(v, -128, 127)


def _softmax_q16(x):
    """docs/ISA.md's softmax_q16 of one row of int8 scores: EXP[max - x], divided by the sum, rounded."""
    e = np.array([EXP_TABLE[v] for v in (x.max() - x)], dtype=np.int64)
    total = int(e.sum())
    return (e * Q16_ONE + total // 2) // total


def reference(w, P, tokens):
    """The prefill's int8 outputs and caches in numpy integers, from docs/ISA.md's formulas and the decode
    step's scales: ``{"out", "k", "v"}``, T x d each. Row t of ``out`` is token t's attention over tokens
    0..t (the causal mask)."""
    s = w.scales
    q8 = lambda a, scale: np.array([[quantize(float(v), scale) for v in row] for row in a], dtype=np.int64)
    x = q8(w.X[0][:tokens], s["x"])
    proj = [_requant(x @ q8(w.W[n], s[name]), *P[key])
            for n, (name, key) in enumerate((("wq", "q"), ("wk", "k"), ("wv", "v")))]
    q, k, v = proj
    out = np.zeros_like(q)
    for t in range(tokens):
        scores = _requant(k[:t + 1] @ q[t], *P["scores"])
        weights = _requant(_softmax_q16(scores), *P["weights"])
        out[t] = _requant(weights @ v[:t + 1], *P["out"])
    return {"out": out, "k": k, "v": v}
