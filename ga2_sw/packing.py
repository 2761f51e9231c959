"""Packed external memory: what a beat is and what LD and ST do with bytes (docs/ISA.md, "Packed external
memory"), written once for the reference machine, the cycle model, the harnesses and the RTL's assertions.

With ``config.bus_bytes`` = 1 (the chapter's chip) the external memory holds 32-bit words, one element each,
and the port moves one per cycle. With W = ``bus_bytes`` > 1 it holds bytes: element ``a`` is byte ``a``, and
a beat is the W bytes of one aligned group, beat ``a // W``, byte lane ``a % W``. An LD or ST of ``len``
elements at external address ``x`` moves every beat its elements touch, so any address and length are legal
and the first and last beats may be partial (the DMA enables only the lanes inside the range: ST writes with
byte strobes). LD sign-extends each byte into a scratchpad word; ST stores each word's low byte."""

from .numerics import s8, u32

__all__ = ["packed", "beats", "element_bytes", "lane_of", "load_element", "store_element", "held_image"]


def packed(config):
    """Whether ``config``'s external memory holds bytes (``bus_bytes`` > 1)."""
    return config.bus_bytes > 1


def beats(ext_addr, length, config):
    """Beats an LD or ST of ``length`` elements at external address ``ext_addr`` moves: ``length`` at one
    element per beat, else every W-byte group the range touches."""
    w = config.bus_bytes
    if w == 1:
        return length
    return (ext_addr % w + length + w - 1) // w


def element_bytes(config):
    """Bytes an element takes in the external memory: a 32-bit word, or one byte packed."""
    return 1 if packed(config) else 4


def lane_of(ext_addr, config):
    """The byte lane of external element ``ext_addr`` within its beat."""
    return ext_addr % config.bus_bytes


def load_element(value, config):
    """The scratchpad word an LD makes of external element ``value``: the word itself, or the byte sign-extended."""
    return value if not packed(config) else u32(s8(value))


def store_element(word, config):
    """The external element an ST makes of scratchpad ``word``: the word itself, or its low byte."""
    return word if not packed(config) else word & 0xFF


def held_image(words, config):
    """An external-memory image as the memory holds it: 32-bit words as given, or, packed, each word's low
    byte (the decode builders write int8 values as 32-bit words; a packed memory keeps their bytes)."""
    words = list(words or [])
    return words if not packed(config) else [w & 0xFF if isinstance(w, int) else w for w in words]
