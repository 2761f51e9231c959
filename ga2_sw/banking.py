"""The decoupled chip's banked scratchpad: which bank holds a word, and what bank conflicts cost in cycles.

Decoupled, the scratchpad is ``config.sp_banks`` banks (``Nb``, a power of two), each a true dual-port block
RAM: port A serves the DMA lane, port B the matrix and vector lanes (docs/ARCHITECTURE.md, "The banked
scratchpad").
Word ``a`` lives in bank ``(a + (a >> b)) mod Nb``, row ``a >> b``, with ``b = log2(Nb)``: consecutive words
go to consecutive banks (a DMA burst of up to ``Nb - 1`` words never meets itself on a bank, an aligned one of
``Nb`` neither), and the skew by ``a >> b`` puts the rows of a matrix whose row length is a multiple of ``Nb``
on different banks instead of all on one.

Within one instruction two kinds of bank conflict cost cycles, both static, computed from the instruction alone,
by the cycle model here and by the RTL (``ga2_hdl.matrix.stream_feeder``, ``ga2_hdl.vector.requantiser``); where an MM runs
beside an RQ or SM, the cycles it gives way to them are ``cycles.mm_schedule``'s:

* the matrix unit reads each k-slice's ``M + N`` operands in rounds, one operand per bank per round
  (``slice_rounds``); a slice takes as many cycles as the most operands on one bank.
* the requantiser reads ``src + t`` in the cycle in which the write of element ``t - RQ_READ_TO_WRITE``
  reaches the memory (with ``rq_lanes`` lanes, ``rq_lanes`` such elements a cycle); where those can share a
  bank it delays its writes by ``rq_write_skew`` cycles."""

from collections import Counter
from functools import lru_cache

from .timing import BANKED_DATA_DELAY, BANKED_SELECT_DELAY, PORT_B_ANNOUNCE, RQ_DEPTH, SP_WRITE_DELAY

__all__ = ["key_stride", "bank_bits", "bank_of", "bank_among", "row_of", "row_among", "slice_addresses", "slice_rounds", "most_on_one_bank", "mm_extra_cycles",
           "rq_write_skew", "rq_window_may_collide", "rq_beats", "RQ_MAX_SKEW", "RQ_READ_TO_WRITE",
           "rq_follow_wait", "rq_follow_decision", "RQ_FOLLOW_MAX_WAIT", "rq_write_track", "may_collide", "spread_stride", "operand_stride", "operand_start"]

# Cycles from a decoupled RQ element's read in the memory to its write reaching the memory, without skew: the
# bank's data and select registers, the RQ_DEPTH stages from the word register on, and the write's announce and
# request registers (the read's announce register comes before the memory).
RQ_READ_TO_WRITE = BANKED_DATA_DELAY + BANKED_SELECT_DELAY + RQ_DEPTH + PORT_B_ANNOUNCE + SP_WRITE_DELAY
# The largest write skew ``rq_write_skew`` ever chooses (proved in its docstring, checked by the tests).
RQ_MAX_SKEW = 2
# The most cycles ``rq_follow_wait`` ever adds (the same proof: of three consecutive differences, one is safe).
RQ_FOLLOW_MAX_WAIT = 2


def bank_bits(config):
    """``b = log2(sp_banks)``: the bank index's width."""
    return config.sp_banks.bit_length() - 1


def bank_of(addr, config):
    """The bank holding scratchpad word ``addr``."""
    return bank_among(addr, config.sp_banks)


def bank_among(addr, banks):
    """The bank holding scratchpad word ``addr`` among ``banks`` (a power of two): ``(addr + (addr >> b)) mod
    banks``, ``b = log2(banks)``."""
    return (addr + (addr >> (banks.bit_length() - 1))) % banks


def row_of(addr, config):
    """The row of word ``addr`` in its bank."""
    return row_among(addr, config.sp_banks)


def row_among(addr, banks):
    """The row of word ``addr`` in its bank, among ``banks``."""
    return addr >> (banks.bit_length() - 1)


def slice_addresses(instr, k):
    """The scratchpad addresses an MM's streaming feeder reads for k-slice ``k``, in its operand order: ``A[i][k]``
    for ``i < M`` (with ``sa`` only ``A[0][k]``, which every row takes), then ``Bop(k, j)`` for ``j < N``; with
    ``rb``, then row ``r``'s ``Bop(k, j)`` (``r * lda`` words on) for ``r = 1 .. M-1``, ``j < N`` (row 0's are the
    columns' operands)."""
    i = instr
    b = [i.B + (c * i.ldb + k if i.tb else k * i.ldb + c) for c in range(i.N)]
    rows_b = [a + r * i.lda for r in range(1, i.M) for a in b] if i.rb else []
    return [i.A + r * i.lda + k for r in range(1 if i.sa else i.M)] + b + rows_b


def slice_rounds(addresses, config):
    """Cycles the feeder spends reading one slice: the most operands on one bank."""
    return _rounds(addresses, config.sp_banks)


def most_on_one_bank(banks):
    """The most entries of ``banks`` (one bank index per operand) equal to one another."""
    return max(Counter(banks).values())


def _rounds(addresses, nb):
    return most_on_one_bank(bank_among(a, nb) for a in addresses)


@lru_cache(maxsize=65536)
def _mm_extra(instr, nb):
    return sum(_rounds(slice_addresses(instr, k), nb) - 1 for k in range(instr.K))


def mm_extra_cycles(instr, config):
    """Cycles an MM's k-slices lose to bank conflicts on the decoupled chip: the sum over its slices of
    ``slice_rounds - 1``."""
    return _mm_extra(instr, config.sp_banks)


def may_collide(e, config):
    """Whether words ``x`` and ``x + e`` can share a bank for some ``x``. ``bank(x + e) - bank(x)`` is
    ``e + (x + e) // Nb - x // Nb``, which is ``v = e + e // Nb`` or ``v + 1`` (mod Nb)."""
    nb = config.sp_banks
    return (e + (e >> bank_bits(config))) % nb in (0, nb - 1)


def spread_stride(e, config, rows=2):
    """The smallest stride ``>= e`` at which ``rows`` rows, each stepping one word per MM slice, never put two of
    them on one bank (no multiple ``k * stride``, ``0 < k < rows``, ``may_collide``); ``e`` itself in order (the
    in-order chip's scratchpad is one memory, without banks)."""
    if not config.decoupled:
        return e
    while any(may_collide(k * e, config) for k in range(1, rows)):
        e += 1
    return e


@lru_cache(maxsize=1024)          # a grouped layout asks for it at every address it works out
def key_stride(d, keys, config):
    """Words from one key of ``d`` words to the next in a K buffer read by score MMs (``tb = 1``, ``keys`` keys,
    a slice reading one word of each): decoupled, the stride from ``d`` to ``d + 2 Nb - 1`` at which the fewest
    pairs of the keys can share a bank (``may_collide``), the shortest of those; ``d`` in order. With d = 64 on
    16 banks that is 64, but on 8 banks ``v = e + e // Nb`` is 0 for e = 64, so every slice would read its keys
    all on one bank and take ``keys`` cycles: 65 puts them on four banks."""
    if not config.decoupled:
        return d
    return min(range(d, d + 2 * config.sp_banks),
               key=lambda e: (sum(may_collide(k * e, config) for k in range(1, keys)), e))


def operand_stride(words, config):
    """The row stride of an MM operand of ``words`` words a row placed for the banks (``ga2_sw.prefill``,
    ``ga2_sw.online_decode``): the smallest odd multiple of ``2 Nb`` that holds it. Rows starting at multiples of
    ``Nb`` cross a bank row together, so their banks differ by their ``a >> b``, which an odd multiple of ``2 Nb``
    steps by ``2 x odd``: ``Nb / 2`` rows of one operand on distinct banks of one parity. In order, ``words``
    (packed rows: one memory, no banks)."""
    if not config.decoupled:
        return words
    unit = 2 * config.sp_banks
    n = -(-words // unit)
    return unit * (n if n % 2 else n + 1)


def operand_start(addr, side, config):
    """The first word at or after ``addr`` where a row of an MM operand placed by ``operand_stride`` may start:
    a multiple of ``Nb`` with ``a >> b`` even for ``side`` "A", odd for "B", so that the two operands' rows sit
    on banks of different parities; in order, ``addr`` itself."""
    if not config.decoupled:
        return addr
    nb = config.sp_banks
    a = -(-addr // nb) * nb
    return a if (a // nb) % 2 == (side == "B") else a + nb


def rq_window_may_collide(e, config):
    """Whether an RQ's reads of one cycle and the writes of that cycle can share a bank, given ``e``, the first
    read's address less the first write's: with ``w = rq_lanes`` lanes the cycle reads ``w`` consecutive words
    and writes ``w`` (fewer in an instruction's last cycle), so the pairs differ by ``e - (w - 1) .. e + (w - 1)``,
    and any of them may collide (``may_collide``). One lane: ``may_collide(e)``."""
    w = config.rq_lanes
    return any(may_collide(e + d, config) for d in range(1 - w, w))


def rq_beats(instr, config):
    """The cycles an RQ reads in (and writes in): ``ceil(len / rq_lanes)``, element ``t`` in its cycle
    ``t // rq_lanes`` through lane ``t % rq_lanes``."""
    return -(-instr.len // config.rq_lanes)


def rq_write_skew(instr, config):
    """The cycles the decoupled requantiser delays its writes by, so that no write reaches a bank in the cycle in
    which the same bank is read: the smallest ``s`` such that the reads of ``src + w t + j`` and the writes of
    ``dst + w (t - RQ_READ_TO_WRITE - s) + j'`` (the accesses of one cycle, ``w = rq_lanes``, lanes ``j, j' < w``)
    can never share a bank (``rq_window_may_collide``).

    ``s <= 2`` with one lane: ``v(e) = e + e // Nb`` grows by 1 or 2 when ``e`` grows by 1, so at most two
    consecutive values of ``e`` have ``v`` in ``{0, -1}`` (mod Nb). With ``w <= Nb / 4`` lanes (``Config``) the
    bound holds too, which a test shows by walking every difference modulo ``Nb**2`` (``v``'s period). The skew
    never changes what the instruction computes: its destination is its source or disjoint from it (the checker
    faults the rest, ``isa.rq_overlaps_partly``), so no read can see one of its writes, however late they come."""
    w = config.rq_lanes
    e = instr.src - instr.dst + w * RQ_READ_TO_WRITE
    for skew in range(RQ_MAX_SKEW + 1):
        if not rq_window_may_collide(e + w * skew, config):
            return skew
    raise AssertionError("unreachable: see the docstring")


def rq_write_track(instr, first_read, config):
    """The write track of a decoupled RQ whose first read request is in cycle ``first_read``: the function
    ``cycle -> address`` that gives the first word it writes in the cycle in which a read requested in ``cycle``
    reaches the bank (its lanes write that word and the next ``rq_lanes - 1``), extended past both ends of its
    range (element ``t`` is read in ``first_read + t // rq_lanes`` and written ``RQ_READ_TO_WRITE + skew``
    cycles after its read reaches the bank). It grows by ``rq_lanes`` a cycle, so a register that counts keeps
    it in the RTL."""
    lag = RQ_READ_TO_WRITE + rq_write_skew(instr, config)
    return lambda cycle: instr.dst + config.rq_lanes * (cycle - first_read - lag)


def rq_follow_decision(config):
    """Cycles from the start of an RQ that follows a draining one to its first possible read: its fields are
    registered in the start cycle and its wait decided in the next (``rq_follow_wait``), so it reads from
    ``start + 2 + wait``; with several lanes the decision is registered once more, ``start + 3 + wait``: over the
    lanes' window it was the two-lane AXI chip's critical path (``rq.track`` -> ``rq.reading``, 84.38 MHz median
    of three seeds on a 25F)."""
    return 2 if config.rq_lanes == 1 else 3


def rq_follow_wait(instr, track, start, config):
    """With ``Config.rq_overlap``: the cycles an RQ started in cycle ``start`` while the RQ before it is still
    writing waits before its first read, beyond ``start + rq_follow_decision`` (its fields are registered in the
    start cycle, and this is decided in ``start + 1``): the fewest, ``w``, such that none of its reads can meet
    a write of the RQ before it on a bank. Reading from ``r = start + rq_follow_decision + w``, the reads of its
    cycle ``t`` start at ``src + t * rq_lanes`` and the writes of that cycle at ``track(r + t)``
    (``rq_write_track``): always the same difference, so ``w`` is the first for which ``rq_window_may_collide``
    of it is false, at most ``RQ_FOLLOW_MAX_WAIT``."""
    decision = rq_follow_decision(config)
    for wait in range(RQ_FOLLOW_MAX_WAIT + 1):
        if not rq_window_may_collide(instr.src - track(start + decision + wait), config):
            return wait
    raise AssertionError("unreachable: see the docstring")
