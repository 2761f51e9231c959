"""Decode steps over long contexts (docs/LONG_CONTEXT.md): the batched step of ``ga2_sw.decode`` with the K and V
caches in external memory, streamed through the scratchpad in chunks and attended with the online unit's
instructions (SMC, RSA, NRM). Chips built with ``Config.online_unit = 1`` decode this way at every length;
the chapter's path (``ga2_sw.decode``, caches in the scratchpad, one SM over the whole context) is what
chips without the unit run, and its programs and figures are unchanged.

One step for ``B`` sequences at their own lengths: the B new tokens' hidden states are loaded, the three weight
matrices stream through two tile buffers (``cols`` output channels a tile, each weight loaded once for the
batch), the projections are requantised to int8 (RQ), each sequence's new K and V rows are stored at the end
of its caches, then each sequence attends over its whole cache, ``chunk`` tokens at a time: its K and V chunks
load into two buffers each, the next chunk's loads issued between this chunk's parts, so the DMA streams the
cache while the matrix and vector lanes work (in program order: no reordering pass over thousands of
instructions). Scores are one MM per ``cols`` keys, SMC turns them into weight digits, both digit rows' ``P V``
are one MM per ``cols`` value columns, RSA adds them into the running outputs, NRM divides once at the end.
With wide keys (``key_digits = 2``) the new keys' two int8 digits are made on the chip (``_key_digits``) and
the K cache is two digit planes: two score MMs per ``cols`` keys, added by RSA (``128 q.hi + q.lo``).

The numerics are the long-context ones: 1/64-logit scores (``m / 2**s = s_q s_k / sqrt(d) * 64``), 12-bit
weights, int32 running outputs, the output scaled by ``s_v / s_o``. :func:`int_reference` computes a step's
outputs from the workload with plain-Python projections and ``ga2_sw.llm.vector_numerics.online_attention``,
sharing nothing with the program."""

from dataclasses import dataclass

import numpy as np

from . import isa
from .banking import key_stride, operand_start, operand_stride, spread_stride
from .config import memory_words
from .layout import LayoutBase, LayoutError
from .numerics import DIGIT_BITS, KEY_DIGITS, ONLINE_START, quantize, requant, s8, u32

__all__ = ["OnlineDecodeLayout", "program", "sized_config", "TIMING_PARAMS", "ext_image", "outputs", "int_reference",
           "wide_key", "CHUNK"]

CHUNK = 64          # tokens per chunk: the online unit buffers sm_max_len words (chunks are min(CHUNK, sm_max_len))


@dataclass(frozen=True)
class OnlineDecodeLayout(LayoutBase):
    """Addresses of a long-context decode step. External memory: the weights (each matrix transposed, ``d``
    rows of ``d_model``), the state's two starting words, then per sequence its new token's hidden state
    (``d_model``), its K cache (``max_ctx`` keys of ``d`` words, ``key_stride`` apart), its V cache (``max_ctx``
    rows of ``d``, row-major) and its output (``d``). With wide keys (``key_digits = 2``) the K cache is two
    planes of that shape (the keys' high digits, then their low digits) and the state's words are four."""
    config: object
    key_digits: int = 1

    def __post_init__(self):
        c = self.config
        if self.key_digits not in KEY_DIGITS:
            raise LayoutError(f"keys have 1 or 2 int8 digits, not {self.key_digits}")
        if not c.online_unit:
            raise LayoutError("Long-context decode steps need the online unit (Config field 'online_unit' = 1)")
        if c.rows < 2:
            raise LayoutError("P V multiplies both weight digit rows at once: the array needs 2 rows or more")
        if c.d > c.sm_max_len:
            raise LayoutError(f"d = {c.d} must be at most sm_max_len ({c.sm_max_len}): RSA and NRM buffer d words")
        if c.sp_words < self.sp_needed:
            raise LayoutError(f"Config field 'sp_words' is {c.sp_words}, but the long-context decode layout for "
                             f"a batch of {c.rows} with d_model={c.d_model}, d={c.d}, chunks of {self.chunk} "
                             f"needs {self.sp_needed} words")
        if self.ext_seqs < 1:
            raise LayoutError(f"Config field 'ext_words' is {c.ext_words}, but the weights and one sequence of "
                             f"max_ctx={c.max_ctx} need {self.ex_seqs_base + self.ex_seq_words} words")

    @property
    def chunk(self):
        return min(CHUNK, self.config.sm_max_len)

    @property
    def digit_stride(self):
        """Words between SMC's two digit rows (the ``P V`` product's A rows): at least a chunk, and decoupled a
        distance at which the two rows never share a bank (``banking``: ``v = e + e // Nb`` neither 0 nor
        ``Nb - 1`` modulo Nb), so each slice of the product reads its two weights on two banks."""
        return spread_stride(self.chunk, self.config)

    @property
    def key_stride(self):
        """Words from one key to the next, in the K chunk buffers and in the external K cache
        (``banking.key_stride`` for a score MM's ``cols`` keys: 64 for d = 64 on 16 banks, 65 on 8, where 64
        would put a slice's keys all on one bank, 1.39 x the step's words at 4,096 tokens). The words between
        keys are never read, nor loaded after a chunk's last key."""
        return key_stride(self.config.d, min(self.config.cols, self.chunk), self.config)

    @property
    def lx(self):
        """Row stride of the new tokens and of a weight tile's rows. Decoupled, the projections' operand rows are
        placed as prefill's (``ga2_sw.prefill.PrefillLayout``): rows an odd multiple of ``2 Nb`` apart, the
        tokens (A) on even ``a >> b``, the weights (B) on odd, so a slice's operands sit on distinct banks
        (``d_model`` words apart, every token and weight row would share one bank)."""
        c = self.config
        return operand_stride(c.d_model, c)

    # scratchpad
    @property
    def X(self):                    # rows x lx: the batch's new tokens
        return 0

    def W(self, k):                 # weight tile buffer k % 2: cols rows (W's columns) of lx
        c = self.config
        first = operand_start(self.X + c.rows * self.lx, "B", c)
        return first + (k % 2) * c.cols * self.lx

    def A(self, n):                 # projection n (Q, K, V): rows x d, int32 then int8 in place
        c = self.config
        return self.W(1) + c.cols * self.lx + n * c.rows * c.d

    def KB(self, k, plane=0):       # K chunk buffer k % 2, its digit planes one after the other: keys key_stride apart
        return self.A(3) + ((k % 2) * self.key_digits + plane) * self.chunk * self.key_stride

    def VB(self, k):
        return self.A(3) + 2 * self.key_digits * self.chunk * self.key_stride + (k % 2) * self.chunk * self.config.d

    @property
    def S(self):                    # the chunk's scores (wide keys: each plane's, then RSA adds them into S)
        return self.A(3) + 2 * self.chunk * (self.key_digits * self.key_stride + self.config.d)

    def S_plane(self, plane):
        return self.S + plane * self.chunk

    @property
    def D(self):                    # weight digits: chunk high, chunk low
        return self.S_plane(self.key_digits)

    @property
    def PR(self):                   # the two products: d high, d low
        return self.D + self.digit_stride + self.chunk

    def PARTIAL(self, j):           # per sequence parity: running outputs, state, output
        return self.PR + 2 * self.config.d + (j % 2) * (2 * self.config.d + 3)

    def STATE(self, j):
        return self.PARTIAL(j) + self.config.d

    def OUT(self, j):
        return self.STATE(j) + 3

    @property
    def END(self):                  # after both parities' running outputs, states and outputs
        return self.PARTIAL(1) + 2 * self.config.d + 3

    # wide keys: the digits of the new keys (docs/LONG_CONTEXT.md, "Wide keys in the decode step")
    @property
    def ZERO(self):                 # 0, -1 and alpha = 2 ** (16 - s), loaded from the state's words
        return self.END

    @property
    def NEG1(self):
        return self.ZERO + 1

    @property
    def ALPHA(self):
        return self.ZERO + 2

    @property
    def HI(self):                   # rows x d: the new keys' high digits
        return self.ZERO + 3

    @property
    def NEGHI(self):                # rows x d: minus the high digits (int32), then rows x d of zeros (RSA's low)
        return self.HI + self.config.rows * self.config.d

    @property
    def sp_needed(self):
        c = self.config
        return self.END if self.key_digits == 1 else self.NEGHI + 2 * c.rows * c.d

    # external memory
    @property
    def ex_w(self):
        return 0

    @property
    def ex_state(self):
        return 3 * self.config.d_model * self.config.d

    @property
    def ex_seqs_base(self):         # the state's start (maximum, sum 0), with wide keys then -1 and alpha
        return self.ex_state + (2 if self.key_digits == 1 else 4)

    @property
    def ex_seq_words(self):
        c = self.config
        return c.d_model + c.max_ctx * (self.key_digits * self.key_stride + c.d) + c.d

    @property
    def ext_seqs(self):
        return (self.config.ext_words - self.ex_seqs_base) // self.ex_seq_words

    def ex_x(self, b):
        if not 0 <= b < self.ext_seqs:
            raise LayoutError(f"Sequence {b} is outside the external layout, which holds sequences 0..{self.ext_seqs - 1}")
        return self.ex_seqs_base + b * self.ex_seq_words

    def ex_k(self, b, plane=0):
        return self.ex_x(b) + self.config.d_model + plane * self.config.max_ctx * self.key_stride

    def ex_v(self, b):
        return self.ex_k(b, self.key_digits)

    def ex_out(self, b):
        return self.ex_v(b) + self.config.max_ctx * self.config.d


# Requantisation parameters for programs built only to be timed or counted: no instruction's length, address or
# busy time depends on them.
TIMING_PARAMS = {key: (1, 0) for key in ("q", "k", "v", "scores", "out")}


def sized_config(config, lengths, sequences=None, key_digits=1):
    """``config`` with its memories the smallest powers of two that hold the step of sequences at ``lengths``:
    the layout, ``sequences`` sequences' external blocks (default one per length) and the program."""
    roomy = config.with_largest_memories()
    lay = OnlineDecodeLayout(roomy, key_digits)
    length = len(program(roomy, list(range(len(lengths))), list(lengths), TIMING_PARAMS, key_digits))
    return config.replace(sp_words=memory_words(lay.sp_needed, config.sp_banks * 8),
                          ext_words=memory_words(lay.ex_seqs_base + (sequences or len(lengths)) * lay.ex_seq_words, 64),
                          imem_words=memory_words(length, 2))


def program(config, seqs, ts, P, key_digits=1):
    """One decode step for sequences ``seqs`` at ``ts[j]`` tokens each (the new one included), with keys of
    ``key_digits`` int8 digits (2: wide keys, ``P["k"] = (1, s)`` from ``decode.rq_params(w, 2)``)."""
    lay = OnlineDecodeLayout(config, key_digits)
    c, n_seq = config, len(seqs)
    DM, D, C, n = c.d_model, c.d, c.cols, lay.chunk
    if not 1 <= n_seq <= c.rows:
        raise ValueError(f"Batch of {n_seq} sequences: must be 1..{c.rows} (config field 'rows')")
    if len(ts) != n_seq or any(not 1 <= t <= c.max_ctx for t in ts):
        raise ValueError(f"Token positions {list(ts)} must be one per sequence, each in 1..{c.max_ctx}")
    lx, ks = lay.lx, lay.key_stride
    prog = [isa.ld(dst=lay.X + j * lx, src=lay.ex_x(b), len=DM) for j, b in enumerate(seqs)]
    tiles = [(wi, c0) for wi in range(3) for c0 in range(0, D, C)]
    for k, (wi, c0) in enumerate(tiles):
        cols = min(C, D - c0)
        src = lay.ex_w + (wi * D + c0) * DM
        prog += isa.rows_moved("LD", lay.W(k), lx, src, DM, cols, DM)
        prog.append(isa.mm(dst=lay.A(wi) + c0, A=lay.X, B=lay.W(k), M=n_seq, K=DM, N=cols, tb=1, lda=lx, ldb=lx,
                           ldc=D))
    # The chunks of every sequence in order, the loads of chunk k + 1 issued during chunk k's compute. The
    # DMA is what bounds the step, so the first chunk's loads follow the last weight tile's at once, and a
    # sequence's new K and V rows are stored just before its last chunk (the one holding them) is loaded.
    chunks = [(j, b, c0, min(n, ts[j] - c0)) for j, b in enumerate(seqs) for c0 in range(0, ts[j], n)]
    projected = [isa.rq(dst=lay.A(wi), src=lay.A(wi), len=n_seq * D, m=P[key][0], s=P[key][1])
                 for wi, key in ((0, "q"), (2, "v"))] + _key_digits(lay, n_seq, P["k"])
    planes = range(key_digits)
    new_key = [lay.A(1)] if key_digits == 1 else [lay.HI, lay.A(1)]      # each plane's row of sequence 0

    def loads(k):
        """Chunk k's DMA in three parts: the new rows' stores and the first K plane; the other K plane; V."""
        j, b, c0, size = chunks[k]
        new_rows = []
        if c0 + size == ts[j]:              # the sequence's last chunk holds its new row: store it first
            new_rows = [*(isa.st(src=new_key[p] + j * D, dst=lay.ex_k(b, p) + (ts[j] - 1) * ks, len=D) for p in planes),
                        isa.st(src=lay.A(2) + j * D, dst=lay.ex_v(b) + (ts[j] - 1) * D, len=D)]
        keys = [isa.ld(dst=lay.KB(k, p), src=lay.ex_k(b, p) + c0 * ks, len=(size - 1) * ks + D) for p in planes]
        return new_rows + keys[:1], keys[1:], [isa.ld(dst=lay.VB(k), src=lay.ex_v(b) + c0 * D, len=size * D)]
    first = sum(loads(0), [])
    prog += (projected + first) if first[0].op == isa.Op.ST else (first + projected)
    for k, (j, b, c0, size) in enumerate(chunks):
        if c0 == 0:                          # a sequence starts: its state, its running outputs at zero
            prog += [isa.ld(dst=lay.STATE(j), src=lay.ex_state, len=2),
                     isa.rq(dst=lay.PARTIAL(j), src=lay.PARTIAL(j), len=D, m=0, s=0)]
        # The next chunk's loads go between this chunk's parts, one before each, so that each part's
        # instructions issue while a load runs (in order, an LD waits for the DMA lane and holds up all
        # behind it): the new rows' stores and the first K plane, the scores; the other loads, the P V part.
        before_scores, before_pv, after_pv = loads(k + 1) if k + 1 < len(chunks) else ([], [], [])
        prog += before_scores
        prog += [isa.mm(dst=lay.S_plane(p) + k0, A=lay.A(0) + j * D, B=lay.KB(k, p) + k0 * ks, M=1, K=D,
                        N=min(C, size - k0), tb=1, lda=D, ldb=ks, ldc=C) for p in planes for k0 in range(0, size, C)]
        if key_digits == 2:     # 128 (q . hi) + q . lo = q . k, in place (alpha 0): RSA reads before it writes
            prog.append(isa.rsa(dst=lay.S, src=lay.S, len=size, ld=n, a=lay.ZERO))
        ld = lay.digit_stride
        prog.append(isa.smc(dst=lay.D, src=lay.S, len=size, m=P["scores"][0], s=P["scores"][1], st=lay.STATE(j),
                            ld=ld))
        prog += before_pv
        prog += [isa.mm(dst=lay.PR + k0, A=lay.D, B=lay.VB(k) + k0, M=2, K=size, N=min(C, D - k0), tb=0,
                        lda=ld, ldb=D, ldc=D) for k0 in range(0, D, C)]
        prog.append(isa.rsa(dst=lay.PARTIAL(j), src=lay.PR, len=D, ld=D, a=lay.STATE(j) + 2))
        prog += after_pv
        if c0 + size == ts[j]:               # the sequence's last chunk
            prog += [isa.nrm(dst=lay.OUT(j), src=lay.PARTIAL(j), len=D, m=P["out"][0], s=P["out"][1],
                             st=lay.STATE(j)),
                     isa.st(src=lay.OUT(j), dst=lay.ex_out(b), len=D)]
    prog.append(isa.halt())
    return prog


def _key_digits(lay, n_seq, mn):
    """The new keys' requantisation: int8 in place; or, wide (``mn = (1, s)``), the high digits
    ``hi = RQ(acc, 1, s + 7)`` into HI and the low ones ``round(acc / 2**s) - 128 hi`` in place, by RSA with
    alpha ``2**(16 - s)`` and high digits ``-hi`` (MMs of ``K = 1``: the word -1 times the row)."""
    c, D = lay.config, lay.config.d
    if lay.key_digits == 1:
        return [isa.rq(dst=lay.A(1), src=lay.A(1), len=n_seq * D, m=mn[0], s=mn[1])]
    m, s = mn
    if m != 1 or not 0 <= s <= 16:
        raise ValueError(f"wide keys need the keys' requantisation (1, s) with s in 0..16 (decode.rq_params(w, 2)), "
                         f"not {mn}")
    words = n_seq * D
    return ([isa.ld(dst=lay.ZERO, src=lay.ex_state + 1, len=3),
             isa.rq(dst=lay.NEGHI + c.rows * D, src=lay.NEGHI + c.rows * D, len=words, m=0, s=0),
             isa.rq(dst=lay.HI, src=lay.A(1), len=words, m=1, s=s + DIGIT_BITS)] +
            [isa.mm(dst=lay.NEGHI + i, A=lay.NEG1, B=lay.HI + i, M=1, K=1, N=min(c.cols, words - i), tb=0, lda=1,
                    ldb=c.cols, ldc=c.cols) for i in range(0, words, c.cols)] +
            [isa.rsa(dst=lay.A(1) + j * D, src=lay.NEGHI + j * D, len=D, ld=c.rows * D, a=lay.ALPHA)
             for j in range(n_seq)])


def wide_key(acc, s):
    """The wide key of an int32 projection sum as the decode step makes it: ``128 hi + lo``, ``hi`` the int8
    requantisation of ``acc / 2**(s + 7)`` and ``lo = round(acc / 2**s) - 128 hi`` (both rounded half up)."""
    hi = requant(acc, 1, s + DIGIT_BITS)
    rounded = (acc + (1 << s >> 1)) >> s
    return hi, rounded - (hi << DIGIT_BITS)


def _quantised(w):
    """The workload's int8 weights and hidden states (numpy)."""
    s = w.scales
    q = np.vectorize(lambda v, scale: quantize(float(v), scale), otypes=[np.int64])
    W = [q(w.W[n], s[name]) for n, name in enumerate(("wq", "wk", "wv"))]
    X = [q(x, s["x"]) for x in w.X]
    return W, X


def _project(x8, W8, mn):
    """int8 rows of one projection: requant of the int32 sums (numpy integers)."""
    v = (x8 @ W8).astype(np.int64) * mn[0]
    if mn[1] > 0:
        v = (v + (1 << (mn[1] - 1))) >> mn[1]
    return np.clip(v, -128, 127)


def ext_image(w, P, seqs, ts, key_digits=1):
    """External memory before the step of sequences ``seqs`` at ``ts``: the weights, the state's words, each
    sequence's new token and its caches as the earlier steps left them (tokens 0 .. t-2, their K (int8, or
    wide as two digit planes) and V from the same projections and requantisations; computed here directly, not
    by running thousands of steps)."""
    lay = OnlineDecodeLayout(w.config, key_digits)
    c = w.config
    DM, D = c.d_model, c.d
    W8, X8 = _quantised(w)
    img = np.zeros(c.ext_words, dtype=np.uint32)
    for n in range(3):
        img[lay.ex_w + n * DM * D:lay.ex_w + (n + 1) * DM * D] = (W8[n].T.reshape(-1) & 0xFFFFFFFF).astype(np.uint32)
    state = list(ONLINE_START) + ([] if key_digits == 1 else [-1, 1 << (16 - P["k"][1])])   # -1 and RSA's alpha
    img[lay.ex_state:lay.ex_seqs_base] = [u32(v) for v in state]
    for b, t in zip(seqs, ts):
        x8 = X8[b]
        img[lay.ex_x(b):lay.ex_x(b) + DM] = (x8[t - 1] & 0xFFFFFFFF).astype(np.uint32)
        if t > 1:
            planes = _key_planes(x8[:t - 1], W8[1], P["k"], key_digits)
            for base, rows, stride in [(lay.ex_k(b, p), keys, lay.key_stride) for p, keys in enumerate(planes)] + \
                                      [(lay.ex_v(b), _project(x8[:t - 1], W8[2], P["v"]), D)]:
                for r, row in enumerate(rows & 0xFFFFFFFF):
                    img[base + r * stride:base + r * stride + D] = row.astype(np.uint32)
    return [int(v) for v in img]


def _key_planes(x8, Wk8, mn, key_digits):
    """The keys of hidden states ``x8`` as the cache holds them: [int8 keys], or [high digits, low digits]."""
    if key_digits == 1:
        return [_project(x8, Wk8, mn)]
    sums = (x8 @ Wk8).astype(np.int64)
    digits = np.vectorize(lambda acc: wide_key(int(acc), mn[1]), otypes=[np.int64, np.int64])(sums)
    return list(digits)


def outputs(config, ext, b, key_digits=1):
    """Sequence b's int8 output of its latest step."""
    base = OnlineDecodeLayout(config, key_digits).ex_out(b)
    return [s8(ext[base + i]) for i in range(config.d)]


def int_reference(w, P, b, t, key_digits=1):
    """Sequence b's int8 output at token t: plain-Python projections of the new token, the caches' rows from the
    same integer projections (numpy; wide keys whole, not as the chip's digits), and
    ``vector_numerics.online_attention`` over them."""
    from .llm.vector_numerics import online_attention
    c = w.config
    W8, X8 = _quantised(w)
    x = [int(v) for v in X8[b][t - 1]]
    q = [requant(sum(x[i] * int(W8[0][i, col]) for i in range(c.d_model)), *P["q"]) for col in range(c.d)]
    if key_digits == 1:
        K = _project(X8[b][:t], W8[1], P["k"])
    else:
        shift = P["k"][1]                       # wide keys whole: the sums over 2**shift, rounded half up
        K = ((X8[b][:t] @ W8[1]).astype(np.int64) + (1 << shift >> 1)) >> shift
    V8 = _project(X8[b][:t], W8[2], P["v"])
    chunk = OnlineDecodeLayout(c).chunk
    out = online_attention(np.array([q]), K[None], V8[None], [P["scores"][0]], [P["scores"][1]],
                           [P["out"][0]], [P["out"][1]], chunk)
    return [int(v) for v in out[0]]
