"""Attention over long contexts as chip programs: the chunk loop of docs/LONG_CONTEXT.md on the online unit's
instructions (SMC, RSA, NRM; chips with ``Config.online_unit = 1``), for several key/value heads of several
sequences at once, each with the query heads that share it (grouped-query attention; one group of one head is
one head's attention).

The queries, the K and V caches (``L`` rows of ``d`` int8, row-major; on 32 banks V chunk by chunk, a column of
``chunk`` tokens per value dimension: ``GroupedLayout.value_columns``) and the state's two starting words live in
external memory; the caches stream through two scratchpad buffers each, a chunk of ``chunk`` tokens at a time,
the next chunk's loads issued before this chunk's compute. Per chunk and query head: the scores (MM, one per
``cols`` keys), SMC (weights as two digit rows, the running maximum and sum, alpha), ``P V`` for both digit
rows at once (MM with ``M = 2``, one per ``cols`` value columns) and RSA (the running outputs rescaled by
alpha plus the two products); after a group's last chunk NRM writes each head's int8 outputs, and a group with
fine scalings has a second NRM per head read the same running outputs at a finer scale (two int8 readings of
one output: the host takes the fine one where it is inside its range).

With wide keys (``key_digits = 2``, docs/LONG_CONTEXT.md) each key is 15 bits as two int8 digits, ``128 hi +
lo`` (``numerics.wide_key_digits``), held as two digit planes of the cache: the K chunk is two loads, the scores
two MMs (one per plane) that RSA adds with alpha 0 (a word holding 0), ``128 * q.hi + q.lo``, before SMC; on a chip
built with wide scores (``Config.wide_scores``) SMC reads both planes' scores itself (``ws``), and no RSA adds them.
The keys' traffic doubles; the scores' error from rounding the keys all but vanishes.

Where the array has rows for every query head's two digit rows (``2 x heads <= rows``: the llm chip's 8) and the
scratchpad room, the groups run as two **streams** (``GroupedLayout.streams``), each with buffers of its own,
their chunks taken in turn: ``P V`` of a group's query heads is then one MM of all their digit rows a value
tile, and while the matrix unit runs it for one stream the vector lane has the other's SMCs to run.
``ga2_sw.llm.vector_numerics.online_attention`` is the same computation written with numpy over whole arrays,
the tests' reference (it takes the wide keys whole: no digits)."""

from dataclasses import dataclass
from itertools import zip_longest

from . import isa
from .banking import key_stride, operand_start, operand_stride, spread_stride
from .layout import LayoutBase, LayoutError
from .numerics import KEY_DIGITS, ONLINE_START, u32, wide_key_digits
from .packing import packed

__all__ = ["Group", "GroupedLayout", "grouped_layout", "grouped_program", "grouped_ext_image", "grouped_outputs"]

# Wide keys' RSA reads its alpha of 0 from the word after the state's starting maximum (``ex_state + 1``).
assert ONLINE_START[1] == 0, "the online state's starting sum is the zero word wide keys' RSA reads"

# A packed port loads bytes, and the state's starting maximum (SCORE_MIN) is not one: there the state starts
# as the product of int8 operands loaded once (``START_A`` times the rows of ``START_B``), one MM per head.
START_A = (-128, -128, -128)
START_B = ((127, 0), (127, 0), (2, 0))
assert tuple(sum(a * row[j] for a, row in zip(START_A, START_B)) for j in range(2)) == ONLINE_START


@dataclass(frozen=True)
class Group:
    """One key/value head of one sequence: its context length and the query heads that share its caches (each
    with its SMC score scaling and NRM output scaling, (m, s) pairs; and, when ``fines`` is given, the scaling
    of a second NRM per head, the output's fine reading)."""
    length: int
    scores: tuple           # per query head: (m, s) of SMC
    outs: tuple             # per query head: (m, s) of NRM
    fines: tuple = ()       # per query head: (m, s) of the second NRM, or () for none

    def __post_init__(self):
        if self.fines and len(self.fines) != len(self.scores):
            raise ValueError(f"a group's fine scalings are one per query head ({len(self.scores)}), "
                             f"not {len(self.fines)}")


@dataclass(frozen=True)
class GroupedLayout(LayoutBase):
    """Addresses of a grouped attention program: the chunk buffers, scores, digits and products are shared;
    each query head of the largest group has its query, running outputs, state and output. External memory:
    per group its queries, caches (K as ``key_digits`` planes of int8 digits) and outputs, one after the other,
    then the state's start."""
    config: object
    groups: tuple
    d: int
    chunk: int
    key_digits: int = 1     # 1: int8 keys; 2: wide keys, two digit planes
    streams: int = 1        # 2: the groups in two streams, each with buffers of its own (``two_streams``)

    def __post_init__(self):
        c = self.config
        if self.key_digits not in KEY_DIGITS:
            raise LayoutError(f"keys have 1 or 2 int8 digits, not {self.key_digits}")
        if self.streams not in (1, 2):
            raise LayoutError(f"a grouped program runs 1 or 2 streams, not {self.streams}")
        if self.streams == 2 and not self.one_mm_products:
            raise LayoutError(f"two streams need P V as one MM of every query head's two digit rows: "
                              f"{2 * self.heads} rows on an array of {c.rows}")
        if not c.online_unit:
            raise LayoutError("Grouped attention needs the online unit (Config field 'online_unit' = 1)")
        if not (1 <= self.chunk <= c.sm_max_len and 1 <= self.d <= c.sm_max_len and c.rows >= 2):
            raise LayoutError("chunk and d must be in 1..sm_max_len, and the array must have 2 rows or more")
        if self.sp_needed > c.sp_words or self.ext_needed > c.ext_words:
            raise LayoutError(f"The grouped layout needs {self.sp_needed} scratchpad and {self.ext_needed} external "
                             f"words (Config fields 'sp_words', 'ext_words')")

    @property
    def heads(self):
        return max(len(g.scores) for g in self.groups)

    @property
    def readings(self):
        """Int8 readings of each output: 2 when any group has fine scalings, else 1."""
        return 2 if any(g.fines for g in self.groups) else 1

    @property
    def key_stride(self):
        """Words from one key to the next in the K chunk buffers and the external K cache
        (``banking.key_stride``: ``d`` on the 16 and 32 banks of ``ga2 llm``'s chips, 65 for d = 64 on 8, where
        64 would put a score MM's keys all on one bank). The words between keys are never read."""
        return key_stride(self.d, min(self.config.cols, self.chunk), self.config)

    def K(self, k, plane=0):        # K chunk buffer k % 2, its digit planes one after the other
        return ((k % 2) * self.key_digits + plane) * self.chunk * self.key_stride

    @property
    def value_columns(self):
        """Whether the V chunks are held a column of ``chunk`` tokens per value dimension (in external memory
        and in the buffers alike), so that ``P V`` reads them transposed (``tb = 1``): then every operand of
        its MM steps one word a slice and, placed as the score MMs' are (``aligned``, the digit rows on the
        other parity), no slice ever reads two from one bank. Row by row (``tb = 0``) the value columns step
        ``d`` words a slice and drift across the digit rows' banks: on the llm chip a ``P V`` MM of 64 tokens
        loses 36 cycles to it. Where a column's stride is not the chunk itself (``operand_stride``), rows."""
        return self.aligned and operand_stride(self.chunk, self.config) == self.chunk

    def V(self, k):                 # V chunk buffer k % 2: d rows of a token each, or d columns of chunk tokens
        return 2 * self.key_digits * self.chunk * self.key_stride + (k % 2) * self.chunk * self.d

    @property
    def S0(self):                   # the scores, two buffers (chunk parity): one row of a chunk per query head
        return 2 * self.key_digits * self.chunk * self.key_stride + 2 * self.chunk * self.d

    @property
    def wide_scores(self):
        """Whether SMC reads the two planes' scores itself (``ws``: wide keys on a chip built with
        ``wide_scores``): each head's high plane's row then its low plane's, ``digit_stride`` apart, SMC's ``ld``
        for its reads as for its two digit rows."""
        return self.key_digits == 2 and bool(self.config.wide_scores)

    @property
    def score_ldc(self):
        """Words from one query head's scores to the next's (the score MMs' ``ldc``)."""
        return 2 * self.digit_stride if self.wide_scores else self.chunk

    @property
    def score_words(self):          # one buffer's scores: every plane of every head
        return self.heads * (self.score_ldc if self.wide_scores else self.key_digits * self.chunk)

    def S(self, k):                 # chunk k's scores (ldc = chunk; with wide scores 2 digit_stride)
        return self.S0 + (k % 2) * self.score_words

    def S_plane(self, plane, k):    # wide keys: each digit plane's scores (RSA adds them into S's rows, or SMC reads
        # both: the low plane's row digit_stride after each head's high one)
        return self.S(k) + plane * (self.digit_stride if self.wide_scores else self.heads * self.chunk)

    def score_row(self, k, h, plane=0):
        """Where query head ``h``'s scores of chunk ``k`` (of digit plane ``plane``) start."""
        return self.S_plane(plane, k) + h * self.score_ldc

    @property
    def digit_stride(self):
        """Words between SMC's two digit rows (the ``P V`` product's A rows): decoupled, the smallest distance
        from a chunk at which the two never share a bank (``banking.spread_stride``: a chunk on the 16 and 32
        banks of ``ga2 llm``'s chips; 64 on 8 banks would read both weights of every slice from one bank)."""
        return spread_stride(self.chunk, self.config)

    @property
    def _d_step(self):
        nb = self.config.sp_banks if self.config.decoupled else 1
        return -(-(self.digit_stride + self.chunk) // nb) * nb

    def D(self, h):                 # query head h's weights: SMC's two digit rows, a digit_stride apart
        base = self.S0 + 2 * self.score_words
        if self.value_columns:      # on the banks of the other parity than the value columns' (at even a >> b);
            base = operand_start(base, "B", self.config)    # a step of twice an odd multiple of 2 Nb keeps it
        return base + h * self._d_step

    def PR(self, h):                # query head h's P V products: two rows of d (one per digit row)
        return self.D(self.heads) + h * 2 * self.d

    @property
    def aligned(self):
        """Whether the score MMs' operands sit on banks of opposite parity (``banking.operand_stride``): the keys
        an odd multiple of ``2 Nb`` apart (64 on 32 banks), so the queries can be too and start a multiple of
        ``Nb`` away from the keys with ``a >> b`` of the other parity; a slice then never reads two operands
        from one bank."""
        c = self.config
        unit = 2 * c.sp_banks
        return c.decoupled and self.key_stride % unit == 0 and (self.key_stride // unit) % 2 == 1

    @property
    def head_stride(self):
        """Words between two query heads' blocks (q, partial, state, out and the fine out): their queries are
        the rows of ONE score MM (``lda``), so decoupled the stride is one at which no two of a group's rows
        share a bank (``banking``: ``v = e + e // Nb`` neither 0 nor ``Nb - 1`` modulo Nb for every multiple
        of it); with ``aligned`` keys an odd multiple of ``2 Nb`` (``banking.operand_stride``)."""
        e = (2 + self.readings) * self.d + 3
        if self.aligned:
            return operand_stride(e, self.config)
        return spread_stride(e, self.config, self.heads)

    def Q(self, h):                 # query head h of the group being attended: q, partial, state, out
        base = self.PR(self.heads)
        if self.aligned:            # the keys' buffers start at multiples of Nb with a >> b even
            base = operand_start(base, "B", self.config)
        return base + h * self.head_stride

    def PARTIAL(self, h):
        return self.Q(h) + self.d

    def STATE(self, h):
        return self.PARTIAL(h) + self.d

    def OUT(self, h):
        return self.STATE(h) + 3

    def FINE(self, h):
        return self.OUT(h) + self.d

    @property
    def one_mm_products(self):
        """Whether ``P V`` of a group's query heads can be one MM (``M = 2 x heads``): the array has the rows,
        and each head's two digit rows lie ``digit_stride`` after the head before's (``D``), as its products do
        (``PR``, ``d`` apart)."""
        return 2 * self.heads <= self.config.rows and self._d_step == 2 * self.digit_stride

    @property
    def stream_stride(self):
        """Words from one stream's buffers (the chunk buffers to the query heads' blocks) to the next's: a
        multiple of ``Nb x Nb`` words, so that every address of the second stream is on the bank of the first's
        (``(a + a >> b) mod Nb``)."""
        unit = self.config.sp_banks ** 2
        return -(-self.Q(self.heads) // unit) * unit

    @property
    def ZERO(self):                 # wide keys: a word holding 0, RSA's alpha when it adds the planes' scores (unused
        # with wide scores); after every stream's buffers
        return self.Q(self.heads) + (self.streams - 1) * self.stream_stride

    @property
    def START(self):                # a packed port: START_A's row, then START_B's rows
        return self.ZERO + 1

    @property
    def start_words(self):          # the state's start in external memory: ONLINE_START (and START_A, START_B)
        return len(ONLINE_START) + (len(START_A) + 2 * len(START_B) if packed(self.config) else 0)

    @property
    def sp_needed(self):
        return self.START + (self.start_words - len(ONLINE_START))

    # external memory
    def ex_group(self, g):
        return sum(self.group_words(k) for k in range(g))

    def group_words(self, g):
        heads, L = len(self.groups[g].scores), self.groups[g].length
        return (1 + self.readings) * heads * self.d + self.key_digits * L * self.key_stride + self.value_words(L)

    def value_words(self, L):
        """Words of a V cache of ``L`` tokens in external memory: ``L`` rows of ``d``, or with
        ``value_columns`` whole chunks of ``d`` columns (the last one's columns padded to ``chunk``)."""
        return -(-L // self.chunk) * self.chunk * self.d if self.value_columns else L * self.d

    def ex_value(self, g, t, j):
        """Where value ``j`` of token ``t`` of group ``g`` lies in external memory."""
        if not self.value_columns:
            return self.ex_v(g) + t * self.d + j
        return self.ex_v(g) + (t - t % self.chunk) * self.d + j * self.chunk + t % self.chunk

    def ex_q(self, g, h):
        return self.ex_group(g) + h * self.d

    def ex_k(self, g):
        return self.ex_group(g) + len(self.groups[g].scores) * self.d

    def ex_k_plane(self, g, plane):
        return self.ex_k(g) + plane * self.groups[g].length * self.key_stride

    def ex_v(self, g):
        return self.ex_k_plane(g, self.key_digits)

    def ex_out(self, g, h):
        return self.ex_v(g) + self.value_words(self.groups[g].length) + h * self.d

    def ex_fine(self, g, h):
        return self.ex_out(g, len(self.groups[g].scores)) + h * self.d

    @property
    def ex_state(self):
        return self.ex_group(len(self.groups))

    @property
    def ext_needed(self):
        return self.ex_state + self.start_words


def grouped_layout(config, groups, d, chunk, key_digits=1):
    """The layout of ``groups``' attention on ``config``'s chip: two streams where there are two groups or more,
    the array has the rows for one MM of ``P V`` a group and the scratchpad the room, else one."""
    if len(groups) > 1:
        try:
            return GroupedLayout(config, tuple(groups), d, chunk, key_digits, streams=2)
        except LayoutError:
            pass
    return GroupedLayout(config, tuple(groups), d, chunk, key_digits)


def grouped_program(lay):
    """Each group (a key/value head of a sequence) in turn: its caches stream through the chunk buffers once,
    and every query head sharing them runs its own scores, SMC, P V and RSA on each chunk; NRM and the store per
    query head at the end. The loads of the next chunk (of this group or the next) go before this chunk's
    compute.

    The heads are software-pipelined, each with its own SMC weights and P V products: the vector lane runs head
    h + 1's SMC and head h - 1's RSA while the matrix unit multiplies head h's P V; and within a group the next
    chunk's scores (into the other scores buffer) go before the last head's P V, its first SMC before the last
    head's RSA (with two heads or more: one head's SMC and RSA share its state), so that neither lane waits
    for the other at a chunk's edge."""
    if lay.streams == 2:
        return _two_streams(lay)
    ops = _ChunkOps(lay)
    chunks = ops.chunks
    prog = ops.loads(0) + _constants(lay)
    started = False             # this chunk's scores and first SMC already issued (by the chunk before)
    for k, (g, c0, size) in enumerate(chunks):
        heads = len(lay.groups[g].scores)
        if c0 == 0:
            prog += ops.group_start(g)
        if k + 1 < len(chunks):
            prog += ops.loads(k + 1)
        if not started:
            prog += ops.scores(k) + ops.weights(k, 0)
        ahead = k + 1 < len(chunks) and chunks[k + 1][0] == g      # the next chunk is this group's
        for h in range(heads - 1):
            prog += ops.products(k, h) + ops.weights(k, h + 1) + (ops.rescale(h - 1) if h else [])
        if ahead:
            prog += ops.scores(k + 1)
        prog += ops.products(k, heads - 1)
        started = ahead and heads > 1
        if heads > 1:
            prog += ops.rescale(heads - 2)
        if started:
            prog += ops.weights(k + 1, 0)
        prog += ops.rescale(heads - 1)
        if ahead and not started:
            prog += ops.weights(k + 1, 0)
            started = True
        if c0 + size == lay.groups[g].length:
            prog += ops.group_end(g)
    return prog + [isa.halt()]


def _constants(lay):
    """The words every chunk reads: wide keys' 0 (RSA's alpha, without wide scores), and on a packed port the
    state's start as START_A's and START_B's operands."""
    prog = []
    if lay.key_digits == 2 and not lay.wide_scores:
        prog.append(isa.ld(dst=lay.ZERO, src=lay.ex_state + 1, len=1))
    if packed(lay.config):
        prog.append(isa.ld(dst=lay.START, src=lay.ex_state + len(ONLINE_START), len=lay.start_words - 2))
    return prog


def _two_streams(lay):
    """The groups in two streams (even groups and odd), each with its own buffers, their chunks in turn: a chunk's
    loads of the next, every head's SMC, the next chunk's scores (the same group's), ``P V`` of all the heads'
    digit rows as one MM a value tile, then every head's RSA. The list scheduler (``schedule.reorder``) then runs
    one stream's SMCs beside the other's ``P V``."""
    streams = [_ChunkOps(lay, s) for s in range(2)]
    prog = [i for ops in streams if ops.chunks for i in ops.loads(0)] + _constants(lay)
    for turn in zip_longest(*(ops.rounds() for ops in streams), fillvalue=[]):
        prog += [i for part in turn for i in part]
    return prog + [isa.halt()]


class _Stream:
    """A grouped layout seen from stream ``s`` (``GroupedLayout.streams``): its buffers' addresses
    ``s x stream_stride`` on, every other attribute the layout's."""
    BUFFERS = ("K", "V", "S", "S_plane", "score_row", "D", "PR", "Q", "PARTIAL", "STATE", "OUT", "FINE")

    def __init__(self, lay, s):
        self._lay, self._offset = lay, s * lay.stream_stride

    def __getattr__(self, name):
        value = getattr(self._lay, name)
        if name in self.BUFFERS:
            return lambda *args: value(*args) + self._offset
        return value


class _ChunkOps:
    """The instructions of a grouped program's pieces, chunk ``k`` of ``chunks`` (group, first token, size): of
    every group, or of stream ``s``'s (its groups, ``g % streams == s``, on its buffers)."""

    def __init__(self, lay, s=0):
        self.lay, n = (lay if lay.streams == 1 else _Stream(lay, s)), lay.chunk
        self.chunks = [(g, c0, min(n, grp.length - c0)) for g, grp in enumerate(lay.groups) if g % lay.streams == s
                       for c0 in range(0, grp.length, n)]

    def rounds(self):
        """Each chunk's instructions in a stream (``_two_streams``), one list a chunk."""
        chunks, scored = self.chunks, False
        for k, (g, c0, size) in enumerate(chunks):
            heads = len(self.lay.groups[g].scores)
            ahead = k + 1 < len(chunks) and chunks[k + 1][0] == g      # the next chunk is this group's
            part = self.group_start(g) if c0 == 0 else []
            part += self.loads(k + 1) if k + 1 < len(chunks) else []
            part += [] if scored else self.scores(k)
            part += [i for h in range(heads) for i in self.weights(k, h)]
            part += self.scores(k + 1) if ahead else []
            part += self.products(k, 0, heads) + [i for h in range(heads) for i in self.rescale(h)]
            part += self.group_end(g) if c0 + size == self.lay.groups[g].length else []
            scored = ahead
            yield part

    def loads(self, k):         # the chunk's keys (each digit plane) and values (to the last one's last token)
        lay, (g, c0, size), ks = self.lay, self.chunks[k], self.lay.key_stride
        values = (lay.d - 1) * lay.chunk + size if lay.value_columns else size * lay.d
        return [*(isa.ld(dst=lay.K(k, p), src=lay.ex_k_plane(g, p) + c0 * ks, len=(size - 1) * ks + lay.d)
                  for p in range(lay.key_digits)),
                isa.ld(dst=lay.V(k), src=lay.ex_value(g, c0, 0), len=values)]

    def scores(self, k):        # the group's query heads are the rows of one MM per cols keys, per plane
        lay, (g, _, size), n = self.lay, self.chunks[k], self.lay.chunk
        rows, C, heads = lay.config.rows, lay.config.cols, len(lay.groups[g].scores)
        out = [isa.mm(dst=lay.score_row(k, h0, p) + j0, A=lay.Q(h0), B=lay.K(k, p) + j0 * lay.key_stride,
                      M=min(rows, heads - h0), K=lay.d, N=min(C, size - j0), tb=1, lda=lay.head_stride,
                      ldb=lay.key_stride, ldc=lay.score_ldc)
               for p in range(lay.key_digits) for h0 in range(0, heads, rows) for j0 in range(0, size, C)]
        if lay.key_digits == 2 and not lay.wide_scores:     # 128 * (q . hi) + q . lo, in place: RSA reads
            # everything before it writes
            out += [isa.rsa(dst=lay.S(k) + h * n, src=lay.S(k) + h * n, len=size, ld=lay.heads * n, a=lay.ZERO)
                    for h in range(heads)]
        return out

    def weights(self, k, h):    # SMC: head h's weights as two digit rows, its running maximum and sum
        lay, (g, _, size) = self.lay, self.chunks[k]
        m, s = lay.groups[g].scores[h]
        return [isa.smc(dst=lay.D(h), src=lay.score_row(k, h), len=size, m=m, s=s, st=lay.STATE(h),
                        ld=lay.digit_stride, ws=int(lay.wide_scores))]

    def products(self, k, h, heads=1):  # P V of both digit rows of heads h .. h + heads - 1 (more than one:
        # one MM of all their rows, one_mm_products)
        lay, size, C = self.lay, self.chunks[k][2], self.lay.config.cols
        # value j of token t at V + t * d + j, or by columns at V + j * chunk + t (read transposed)
        step, ldb = (lay.chunk, lay.chunk) if lay.value_columns else (1, lay.d)
        return [isa.mm(dst=lay.PR(h) + j0, A=lay.D(h), B=lay.V(k) + j0 * step, M=2 * heads, K=size,
                       N=min(C, lay.d - j0), tb=int(lay.value_columns), lda=lay.digit_stride, ldb=ldb, ldc=lay.d)
                for j0 in range(0, lay.d, C)]

    def rescale(self, h):       # RSA: the running outputs rescaled by alpha plus the two products
        lay = self.lay
        return [isa.rsa(dst=lay.PARTIAL(h), src=lay.PR(h), len=lay.d, ld=lay.d, a=lay.STATE(h) + 2)]

    def group_start(self, g):   # each query head's query, the state's start, its running outputs zeroed
        lay = self.lay
        return [i for h in range(len(lay.groups[g].scores))
                for i in (isa.ld(dst=lay.Q(h), src=lay.ex_q(g, h), len=lay.d), self.state_start(h),
                          isa.rq(dst=lay.PARTIAL(h), src=lay.PARTIAL(h), len=lay.d, m=0, s=0))]

    def state_start(self, h):   # ONLINE_START into head h's state: loaded, or on a packed port START_A x START_B
        lay, n = self.lay, len(ONLINE_START)
        if not packed(lay.config):
            return isa.ld(dst=lay.STATE(h), src=lay.ex_state, len=n)
        k = len(START_A)
        return isa.mm(dst=lay.STATE(h), A=lay.START, B=lay.START + k, M=1, K=k, N=n, tb=0, lda=k, ldb=n, ldc=n)

    def group_end(self, g):     # each head's int8 outputs, coarse then (where the group has them) fine
        lay, grp = self.lay, self.lay.groups[g]
        return ([i for h, (m, s) in enumerate(grp.outs)
                 for i in (isa.nrm(dst=lay.OUT(h), src=lay.PARTIAL(h), len=lay.d, m=m, s=s, st=lay.STATE(h)),
                           isa.st(src=lay.OUT(h), dst=lay.ex_out(g, h), len=lay.d))] +
                [i for h, (m, s) in enumerate(grp.fines)
                 for i in (isa.nrm(dst=lay.FINE(h), src=lay.PARTIAL(h), len=lay.d, m=m, s=s, st=lay.STATE(h)),
                           isa.st(src=lay.FINE(h), dst=lay.ex_fine(g, h), len=lay.d))])


def grouped_ext_image(lay, data):
    """External memory of a grouped program: ``data[g] = (q8 (heads, d), K (L, d), V8 (L, d))``, the keys int8
    or, with ``key_digits = 2``, wide (stored as their two digit planes)."""
    img = [0] * lay.config.ext_words
    for g, (q8, K8, V8) in enumerate(data):
        for h, q in enumerate(q8):
            img[lay.ex_q(g, h):lay.ex_q(g, h) + lay.d] = [u32(int(v)) for v in q]
        L = lay.groups[g].length
        keys = [int(v) for v in K8.reshape(-1)]
        planes = [keys] if lay.key_digits == 1 else [list(p) for p in zip(*map(wide_key_digits, keys))]
        for p, plane in enumerate(planes):
            for i in range(L):      # key i at i * key_stride
                at = lay.ex_k_plane(g, p) + i * lay.key_stride
                img[at:at + lay.d] = [u32(v) for v in plane[i * lay.d:(i + 1) * lay.d]]
        if lay.value_columns:       # each chunk a column at a time
            for c0 in range(0, L, lay.chunk):
                for j in range(lay.d):
                    at = lay.ex_value(g, c0, j)
                    img[at:at + min(lay.chunk, L - c0)] = [u32(int(v)) for v in V8[c0:c0 + lay.chunk, j]]
        else:
            img[lay.ex_v(g):lay.ex_v(g) + L * lay.d] = [u32(int(v)) for v in V8.reshape(-1)]
    start = [*ONLINE_START, *START_A, *(v for row in START_B for v in row)][:lay.start_words]
    img[lay.ex_state:lay.ex_state + lay.start_words] = [u32(v) for v in start]
    return img


def grouped_outputs(lay, ext, fine=False):
    """The int8 outputs, ``[group][head] -> list of d`` (with ``fine``, the fine readings of the groups that
    have them, ``[]`` for the others)."""
    from .numerics import s8
    at = lay.ex_fine if fine else lay.ex_out
    return [[[s8(w) for w in ext[at(g, h):at(g, h) + lay.d]] for h in range(len(grp.scores))]
            if grp.fines or not fine else [] for g, grp in enumerate(lay.groups)]
