"""One head's attention over a long context as a chip program: the chunk loop of docs/LONG_CONTEXT.md on the
online unit's instructions (SMC, RSA, NRM; chips with ``Config.online_unit = 1``).

The query, the K and V caches (``L`` rows of ``d`` int8, row-major) and the two state words live in external
memory; the caches stream through two scratchpad buffers each, a chunk of ``chunk`` tokens at a time (load
chunk c + 1 while chunk c is computed: the decoupled reorder overlaps them). Per chunk: the scores (MM, one per
``cols`` keys), SMC (weights as two digit rows, the running maximum and sum, alpha), ``P V`` for both digit
rows at once (MM with ``M = 2``, one per ``cols`` value columns) and RSA (the running outputs rescaled by
alpha plus the two products); after the last chunk NRM writes the int8 outputs. ``ga2_sw.llm.vector_numerics.
online_attention`` is the same computation written with numpy over whole arrays, the tests' reference."""

from dataclasses import dataclass

from . import isa
from .numerics import ONLINE_START, u32

__all__ = ["OnlineLayout", "attention_program", "ext_image", "output"]


@dataclass(frozen=True)
class OnlineLayout:
    """Scratchpad and external addresses of one head's long-context attention."""
    config: object
    length: int             # L: context tokens
    d: int                  # head dimension
    chunk: int              # tokens per chunk (<= sm_max_len)

    def __post_init__(self):
        c = self.config
        if not c.online_unit:
            raise ValueError("The long-context program needs the online unit: Config field 'online_unit' = 1")
        if not 1 <= self.chunk <= c.sm_max_len:
            raise ValueError(f"chunk {self.chunk} must be in 1..sm_max_len ({c.sm_max_len})")
        if not 1 <= self.d <= c.sm_max_len:
            raise ValueError(f"d = {self.d} must be in 1..sm_max_len ({c.sm_max_len}): RSA and NRM buffer d words")
        if c.rows < 2:
            raise ValueError("P V multiplies both weight digit rows at once: it needs an array of 2 rows or more")
        if self.sp_needed > c.sp_words or self.ext_needed > c.ext_words:
            raise ValueError(f"The long-context layout needs {self.sp_needed} scratchpad and {self.ext_needed} "
                             f"external words (Config fields 'sp_words', 'ext_words')")

    # scratchpad
    @property
    def Q(self):
        return 0

    def K(self, c):             # chunk buffer c % 2: chunk rows of d
        return self.Q + self.d + (c % 2) * self.chunk * self.d

    def V(self, c):
        return self.Q + self.d + (2 + c % 2) * self.chunk * self.d

    @property
    def S(self):                # the chunk's int32 scores
        return self.Q + self.d + 4 * self.chunk * self.d

    @property
    def D(self):                # the weight digits: chunk high, then chunk low (SMC's dst; P V's A rows)
        return self.S + self.chunk

    @property
    def PR(self):               # the two products: d high, then d low (P V's C rows; RSA's src)
        return self.D + 2 * self.chunk

    @property
    def PARTIAL(self):          # the running int32 outputs
        return self.PR + 2 * self.d

    @property
    def STATE(self):            # running maximum, running sum, alpha
        return self.PARTIAL + self.d

    @property
    def OUT(self):
        return self.STATE + 3

    @property
    def sp_needed(self):
        return self.OUT + self.d

    # external memory
    @property
    def ex_q(self):
        return 0

    @property
    def ex_state(self):         # the state's two starting words (ONLINE_START)
        return self.ex_q + self.d

    @property
    def ex_k(self):
        return self.ex_state + 2

    @property
    def ex_v(self):
        return self.ex_k + self.length * self.d

    @property
    def ex_out(self):
        return self.ex_v + self.length * self.d

    @property
    def ext_needed(self):
        return self.ex_out + self.d


def attention_program(lay, score, out):
    """The program: ``score`` = (m, s) of SMC's score scaling, ``out`` = (m, s) of NRM."""
    from .schedule import reorder
    c, L, d, n = lay.config, lay.length, lay.d, lay.chunk
    C = c.cols
    prog = [isa.ld(dst=lay.Q, src=lay.ex_q, len=d), isa.ld(dst=lay.STATE, src=lay.ex_state, len=2),
            isa.rq(dst=lay.PARTIAL, src=lay.PARTIAL, len=d, m=0, s=0)]        # the running outputs start at 0
    for k, c0 in enumerate(range(0, L, n)):
        size = min(n, L - c0)
        prog += [isa.ld(dst=lay.K(k), src=lay.ex_k + c0 * d, len=size * d),
                 isa.ld(dst=lay.V(k), src=lay.ex_v + c0 * d, len=size * d)]
        prog += [isa.mm(dst=lay.S + j0, A=lay.Q, B=lay.K(k) + j0 * d, M=1, K=d, N=min(C, size - j0), tb=1,
                        lda=d, ldb=d, ldc=C) for j0 in range(0, size, C)]
        prog.append(isa.smc(dst=lay.D, src=lay.S, len=size, m=score[0], s=score[1], st=lay.STATE, ld=n))
        # Both digit rows at once: A = the high digits (size words) above the low ones.
        prog += [isa.mm(dst=lay.PR + j0, A=lay.D, B=lay.V(k) + j0, M=2, K=size, N=min(C, d - j0), tb=0,
                        lda=n, ldb=d, ldc=d) for j0 in range(0, d, C)]
        prog.append(isa.rsa(dst=lay.PARTIAL, src=lay.PR, len=d, ld=d, a=lay.STATE + 2))
    prog += [isa.nrm(dst=lay.OUT, src=lay.PARTIAL, len=d, m=out[0], s=out[1], st=lay.STATE),
             isa.st(src=lay.OUT, dst=lay.ex_out, len=d), isa.halt()]
    return reorder(prog, c) if c.decoupled else prog


def ext_image(lay, q8, K8, V8):
    """External memory before the program: the query (d int8), the state's start, the caches (L x d int8)."""
    img = [0] * lay.config.ext_words
    img[lay.ex_q:lay.ex_q + lay.d] = [u32(int(v)) for v in q8]
    img[lay.ex_state:lay.ex_state + 2] = [u32(v) for v in ONLINE_START]
    img[lay.ex_k:lay.ex_k + lay.length * lay.d] = [u32(int(v)) for v in K8.reshape(-1)]
    img[lay.ex_v:lay.ex_v + lay.length * lay.d] = [u32(int(v)) for v in V8.reshape(-1)]
    return img


def output(lay, ext):
    """The int8 outputs the program stored."""
    from .numerics import s8
    return [s8(w) for w in ext[lay.ex_out:lay.ex_out + lay.d]]
