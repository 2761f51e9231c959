"""Memory layouts of the batched decode step, computed from the configuration (docs/ARCHITECTURE.md).

Scratchpad: one region per operand, sized for a batch of ``rows`` sequences, plus one K and one V cache
per batch slot, each ``max_ctx`` rows of ``d`` words (a V cache in column blocks: ``Layout.v_block``).
External memory: the three weight matrices, then one block per sequence (hidden states, K cache, V cache,
output)."""

from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["Layout", "LayoutBase", "LayoutError", "ATTENTION_BUFFERS"]

# A sequence's attention buffers, in scratchpad order: its int32 and int8 scores, probabilities, int8 weights,
# int32 and int8 outputs (Layout.attention).
ATTENTION_BUFFERS = ("S", "S8", "P", "WT", "O", "O8")


class LayoutError(ValueError):
    """A layout that does not fit its configuration (the message names the field and what the layout needs)."""


class LayoutBase:
    """What the program layouts share: the decode step's ``Layout``, the long-context step's
    ``online_decode.OnlineDecodeLayout``, the grouped attention's ``online_program.GroupedLayout`` and the
    prefill's ``prefill.PrefillLayout``. Each is a frozen dataclass of a ``config`` and of what it lays out,
    which checks as it is made that the chip holds it: every refusal is a ``LayoutError`` (a ValueError)."""

    def require(self, holds, message):
        """LayoutError(``message``) unless ``holds``."""
        if not holds:
            raise LayoutError(message)


@dataclass(frozen=True)
class Layout(LayoutBase):
    """The decode step's regions. ``pads`` (words before ``W``, ``WT`` and ``caches``) is for the search in
    :func:`bank_pads` only; everyone else leaves it out and gets the searched pads (none in order)."""
    config: object
    pads: tuple = field(default=None, compare=False)

    def __post_init__(self):
        c = self.config
        if self.pads is None:
            object.__setattr__(self, "pads", bank_pads(c) if c.decoupled else (0, 0, 0))
        if c.sp_words < self.sp_needed:
            raise LayoutError(f"Config field 'sp_words' is {c.sp_words}, but the decode layout for a batch of "
                              f"{c.rows} with d_model={c.d_model}, d={c.d}, max_ctx={c.max_ctx} needs "
                              f"{self.sp_needed} words")
        if self.ext_seqs < 1:
            raise LayoutError(f"Config field 'ext_words' is {c.ext_words}, but the weights and one sequence "
                              f"need {self.ex_w_words + self.ex_seq_words} words")
        if c.d_model > 4095 or c.d > 4095 or c.max_ctx > 4095:
            raise LayoutError("d_model, d and max_ctx must fit the 12-bit MM strides (<= 4095)")

    # sizes ---------------------------------------------------------------------------------------------
    @property
    def dm(self):
        return self.config.d_model

    @property
    def d(self):
        return self.config.d

    @property
    def lmax(self):
        return self.config.max_ctx

    @property
    def cache_words(self):
        return self.lmax * self.d

    @property
    def v_block(self):
        """Columns per block of a V cache. A V cache is stored (in the scratchpad and in external memory alike)
        as blocks of ``v_block`` columns, each block ``max_ctx`` rows of ``v_block`` words, so that each block
        loads with an LD of its own. In order, one block of d columns: the chapter's row-major cache. Decoupled,
        two blocks when each holds whole column tiles of the array (d/2 a multiple of cols): the P V products of
        the first block then run while the second loads, and only the second's follow the step's last load
        (docs/ARCHITECTURE.md, "What holds back the worst programs"). On a ``row_b`` chip, whose P V takes up
        to ``rows`` column tiles of a block an MM (``decode.column_tiles``), only when a half fills the array's
        rows: else two blocks would be two MMs where one block is one (the B = 4 step at 4 bytes a beat on the
        fastest chip, one set of attention buffers: 1,039 cycles against 1,054)."""
        d, cols = self.d, self.config.cols
        halves = self.config.decoupled and d % 2 == 0 and (d // 2) % cols == 0
        if halves and (not self.config.row_b or (d // 2) // cols >= self.config.rows):
            return d // 2
        return d

    @property
    def v_blocks(self):
        """(first column, offset in the cache) of each V-cache block."""
        return [(c0, self.v_at(0, c0)) for c0 in range(0, self.d, self.v_block)]

    def v_at(self, t, c):
        """Offset of token t's column c in a V cache (``KC`` caches are plain rows: t * d + c)."""
        g = self.v_block
        return (c // g) * g * self.lmax + t * g + c % g

    @property
    def w_transposed(self):
        """Whether each weight matrix is stored transposed, ``d`` rows of ``d_model`` words (output column
        ``c``'s weights contiguous), in the scratchpad and in external memory alike, and read by the projections
        with ``tb = 1``. Decoupled, so that every operand stream of every MM steps one word per k-slice and
        keeps its distance in banks from the others (docs/ARCHITECTURE.md, "Eight banks, and the operands
        placed on them"); in order, the chapter's row-major matrices."""
        return self.config.decoupled

    def w_at(self, r, c):
        """Offset of row ``r`` (of ``d_model``), column ``c`` (of ``d``) in a weight matrix."""
        return c * self.dm + r if self.w_transposed else r * self.d + c

    # scratchpad ----------------------------------------------------------------------------------------
    @property
    def X(self):                       # new tokens' hidden states, one row per batch slot
        return 0

    @property
    def W(self):                       # Wq | Wk | Wv, each d_model x d
        return self.X + self.config.rows * self.dm + self.pads[0]

    @property
    def QA(self):                      # int32 projections, one row per batch slot
        return self.W + 3 * self.dm * self.d

    @property
    def KA(self):
        return self.QA + self.config.rows * self.d

    @property
    def VA(self):
        return self.KA + self.config.rows * self.d

    @property
    def Q8(self):
        return self.VA + self.config.rows * self.d

    @property
    def S(self):                       # int32 scores of the sequence being attended
        return self.Q8 + self.config.rows * self.d

    @property
    def S8(self):
        return self.S + self.lmax

    @property
    def P(self):                       # Q16 probabilities
        return self.S8 + self.lmax

    @property
    def WT(self):                      # int8 attention weights
        return self.P + self.lmax + self.pads[1]

    @property
    def O(self):
        return self.WT + self.lmax

    @property
    def O8(self):
        return self.O + self.d

    @property
    def caches(self):
        return self.O8 + self.d + self.pads[2]

    def KC(self, j):
        return self.caches + 2 * self.cache_words * j

    def VC(self, j):
        return self.caches + 2 * self.cache_words * j + self.cache_words

    @property
    def caches_end(self):
        return self.caches + 2 * self.cache_words * self.config.rows

    @property
    def attention_words(self):
        """One set of a sequence's attention buffers, ``S`` to the end of ``O8``."""
        return self.O8 + self.d - self.S

    @property
    def attention_sets(self):
        """Sets of attention buffers: one for the batch, or on a ``row_b`` chip one per batch slot, after the
        caches, where the scratchpad holds them. A ``row_b`` chip's attention MMs are short
        (``decode.column_tiles``), and with one set a sequence's weights and outputs wait until the sequence
        before has read the shared buffers: the B = 4 step at 4 bytes a beat on the fastest chip takes 972
        cycles with a set per slot against 1,039 with one (990 with slot 0's set left in its place, on other
        banks). Elsewhere one set, the chapter's layout (on the other decoupled chips a set per slot does not
        pay: 1,207 cycles against 1,180)."""
        rows = self.config.rows
        fits = self.caches_end + rows * self.attention_words <= self.config.sp_words
        return rows if self.config.row_b and rows > 1 and fits else 1

    def attention(self, j):
        """Slot ``j``'s attention buffers: ``{name: address}`` for each of ``ATTENTION_BUFFERS``."""
        shift = 0 if self.attention_sets == 1 else self.caches_end + j * self.attention_words - self.S
        return {name: getattr(self, name) + shift for name in ATTENTION_BUFFERS}

    @property
    def sp_needed(self):
        sets = self.attention_sets
        return self.caches_end + (sets * self.attention_words if sets > 1 else 0)

    # external memory -----------------------------------------------------------------------------------
    @property
    def ex_w(self):
        return 0

    @property
    def ex_w_words(self):
        return 3 * self.dm * self.d

    @property
    def ex_seq_words(self):
        return self.lmax * self.dm + 2 * self.cache_words + self.d

    @property
    def ext_seqs(self):
        """How many sequences the external layout holds."""
        return (self.config.ext_words - self.ex_w_words) // self.ex_seq_words

    def _seq_base(self, b):
        if not 0 <= b < self.ext_seqs:
            raise LayoutError(f"Sequence {b} is outside the external layout, which holds sequences "
                              f"0..{self.ext_seqs - 1} with ext_words={self.config.ext_words}")
        return self.ex_w + self.ex_w_words + b * self.ex_seq_words

    def ex_x(self, b):
        return self._seq_base(b)

    def ex_kc(self, b):
        return self._seq_base(b) + self.lmax * self.dm

    def ex_vc(self, b):
        return self.ex_kc(b) + self.cache_words

    def ex_out(self, b):
        return self.ex_vc(b) + self.cache_words


@lru_cache(maxsize=256)
def bank_pads(config):
    """Words of padding before ``W``, ``WT`` and ``caches`` on the decoupled chip, chosen so that the MMs of a
    decode step meet as few bank conflicts as the banks allow (``ga2_sw.banking``).

    Each MM reads two operand streams per k-slice: A's rows and B's columns, each stepping one word per slice
    (the weights are stored transposed for this, ``Layout.w_transposed``), so whether two of them meet on a
    bank depends only on where their regions start, in banks. Moving a region by a multiple of ``sp_banks``
    words moves all its words by the same number of banks (``bank(a + m * Nb) = bank(a) + m``), which leaves
    every later pair's distances alone: so each pad is searched on its own, over ``m * Nb`` for
    ``m < Nb``, in the order in which it moves its partner: ``W`` against the hidden states ``X`` (the
    projections), ``caches`` against the attention weights ``WT`` (P V: the V caches move, WT does not), and
    ``WT`` with everything after it against the queries ``Q8`` (the scores, over the K caches). The cost is the
    extra slice cycles (``banking.mm_extra_cycles``) of the MMs a full-batch step at ``max_ctx`` runs; ties
    go to the smaller pad."""
    from . import isa
    from .banking import mm_extra_cycles
    nb, C, rows = config.sp_banks, config.cols, config.rows

    def mms(lay, which):
        dm, d, lmax, G = lay.dm, lay.d, lay.lmax, lay.v_block
        if which == "projections":
            return [isa.mm(dst=0, A=lay.X, B=lay.W + wi * dm * d + lay.w_at(0, c0), M=rows, K=dm,
                           N=min(C, d - c0), tb=1, lda=dm, ldb=dm, ldc=d)
                    for wi in range(3) for c0 in range(0, d, C)]
        if which == "pv":
            return [isa.mm(dst=0, A=lay.WT, B=lay.VC(j) + lay.v_at(0, c0), M=1, K=lmax, N=min(C, d - c0),
                           tb=0, lda=lmax, ldb=G, ldc=C)
                    for j in range(rows) for c0 in range(0, d, C)]
        return [isa.mm(dst=0, A=lay.Q8 + j * d, B=lay.KC(j) + c0 * d, M=1, K=d, N=min(C, lmax - c0), tb=1,
                       lda=d, ldb=d, ldc=C)
                for j in range(rows) for c0 in range(0, lmax, C)]

    pads = [0, 0, 0]
    for slot, which in ((0, "projections"), (2, "pv"), (1, "scores")):
        costs = []
        for m in range(nb):
            trial = list(pads)
            trial[slot] = m * nb
            try:
                lay = Layout(config, tuple(trial))
            except LayoutError:             # this pad does not fit the scratchpad: try no larger one
                break
            costs.append((sum(mm_extra_cycles(i, config) for i in mms(lay, which)), m * nb))
        pads[slot] = min(costs)[1] if costs else 0
    return tuple(pads)
