"""ST of whole words (``Config.st_words``, ST's ``wd`` flag; docs/ISA.md): what the checker and the two packed
DMAs (``PackedDMA``, ``AxiDMA``) need of it, written once.

With ``wd`` an ST stores each scratchpad word as WORD_BYTES bytes, least significant first, from a
WORD_BYTES-aligned external address: its range is ``WORD_BYTES * len`` bytes, and a beat of W byte lanes carries
``W / WORD_BYTES`` words, lane group ``q`` (lanes ``WORD_BYTES * q`` ..) word ``q`` of the beat. Word ``q`` is read
through the lane-``q`` port, as lane ``q``'s byte is without ``wd``: consecutive words, distinct banks. On a chip
built without ``st_words`` every function here gives the plain ST's signals, and its Verilog is the one it had
before the flag existed."""

from amaranth.hdl import Cat, Const, Mux
from amaranth.utils import exact_log2

from ga2_sw.packing import WORD_BYTES

from ..ports import optional_field

__all__ = ["WORD_BITS", "wide", "misaligned", "ext_length", "tail_width", "first_word", "words_per_beat",
           "read_enables", "beat_data"]

WORD_BITS = exact_log2(WORD_BYTES)      # the low address bits of a byte within its word


def wide(instr, *, st_words):
    """ST's ``wd`` flag in ``instr`` (a view of InstrLayout); a constant 0 on a chip without ``st_words``. (An LD
    never has it: the bit is a stray one of LD's, which the checker faults as ILLEGAL.)"""
    return optional_field(instr, "wd") if st_words else Const(0, 1)


def misaligned(is_st, instr, *, st_words):
    """An ST (``is_st``) of whole words at an address that is not a multiple of WORD_BYTES: SHAPE
    (``ga2_sw.isa.check``)."""
    return is_st & wide(instr, st_words=st_words) & (instr.dst[:WORD_BITS] != 0)


def ext_length(instr, *, st_words):
    """The external elements (bytes) an LD or ST moves: ``len``, or WORD_BYTES a word with ``wd``
    (``ga2_sw.isa.ext_length``)."""
    if not st_words:
        return instr.len
    return Mux(wide(instr, st_words=st_words), Cat(Const(0, WORD_BITS), instr.len), instr.len)


def tail_width(*, st_words):
    """Bits of the checker's signed external tail (``ext_length - 1``; -1 for a zero ``len``): a sign bit beside
    the 16-bit ``len``'s 17 (one spare), or WORD_BITS more for a length of whole words."""
    return 17 + WORD_BITS if st_words else 18


def first_word(sp_addr, first_lane, is_wide, *, st_words):
    """The scratchpad word of lane 0 of the first beat: the range's start less its lanes before that lane (with
    ``wd``, less the words before it: ``first_lane / WORD_BYTES``, the address being aligned)."""
    if not st_words:
        return sp_addr - first_lane
    return sp_addr - Mux(is_wide, first_lane >> WORD_BITS, first_lane)


def words_per_beat(is_wide, *, bus_bytes, st_words):
    """Scratchpad words a beat of ``bus_bytes`` W takes: W, or W / WORD_BYTES with ``wd``."""
    w = bus_bytes
    return Mux(is_wide, w // WORD_BYTES, w) if st_words else w


def read_enables(lanes, is_wide, *, bus_bytes, st_words):
    """Each lane port's read enable of an ST beat whose byte lanes in range are ``lanes``: lane ``j``'s own, or
    with ``wd`` word ``j``'s (its first byte lane's) for the first W / WORD_BYTES ports, the others idle."""
    w = bus_bytes
    if not st_words:
        return [lanes[j] for j in range(w)]
    return [Mux(is_wide, lanes[WORD_BYTES * j] if j < w // WORD_BYTES else 0, lanes[j]) for j in range(w)]


def beat_data(ports, is_wide, *, st_words):
    """An ST beat's W bytes from the lane ports' words: each lane's low byte, or with ``wd`` the first
    W / WORD_BYTES words whole."""
    bytes_ = Cat(*(port.data[:8] for port in ports))
    if not st_words:
        return bytes_
    return Mux(is_wide, Cat(*(port.data for port in ports[:len(ports) // WORD_BYTES])), bytes_)
