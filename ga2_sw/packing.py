"""Packed external memory: what a beat is and what LD and ST do with bytes (docs/ISA.md, "Packed external
memory"), written once for the reference machine, the cycle model, the harnesses and the RTL's assertions.

With ``config.bus_bytes`` = 1 (the chapter's chip) the external memory holds 32-bit words, one element each,
and the port moves one per cycle. With W = ``bus_bytes`` > 1 it holds bytes: element ``a`` is byte ``a``, and
a beat is the W bytes of one aligned group, beat ``a // W``, byte lane ``a % W``. An LD or ST of ``len``
elements at external address ``x`` moves every beat its elements touch, so any address and length are legal
and the first and last beats may be partial (the DMA enables only the lanes inside the range: ST writes with
byte strobes). LD sign-extends each byte into a scratchpad word; ST stores each word's low byte, or, with its
``wd`` flag on a chip built with ``st_words``, the whole word as WORD_BYTES bytes, least significant first, at
a WORD_BYTES-aligned address."""

from .numerics import s8, u32

__all__ = ["WORD_BYTES", "word_bytes", "packed", "beats", "element_bytes", "beat_bytes", "beat_of", "byte_address", "bursts", "AXI_MAX_BURST",
           "AXI_PAGE_BYTES", "lane_of", "load_element", "store_element", "held_image"]


# The bytes of a scratchpad word, as ST with ``wd`` stores it (little-endian).
WORD_BYTES = 4


def word_bytes(word):
    """The WORD_BYTES bytes of a 32-bit ``word``, least significant first: what ST with ``wd`` stores."""
    return [(word >> (8 * b)) & 0xFF for b in range(WORD_BYTES)]


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


# AXI4 (Config.axi = 1): an INCR burst has at most 256 beats and must not cross a 4 KiB boundary.
AXI_MAX_BURST = 256
AXI_PAGE_BYTES = 4096


def beat_bytes(config):
    """Bytes of one beat on the wires: a 32-bit word at bus_bytes 1, else bus_bytes."""
    return 4 if not packed(config) else config.bus_bytes


def beat_of(ext_addr, config):
    """The beat that holds external element ``ext_addr``."""
    return ext_addr // config.bus_bytes


def byte_address(beat, config):
    """The AXI byte address of beat ``beat``."""
    return beat * beat_bytes(config)


def bursts(ext_addr, length, config):
    """The AXI4 bursts, ``(first beat, beats)``, in which an LD or ST of ``length`` elements at ``ext_addr``
    moves its beats: as long as possible, at most AXI_MAX_BURST beats, never across a 4 KiB page."""
    page = AXI_PAGE_BYTES // beat_bytes(config)
    beat, left, out = beat_of(ext_addr, config), beats(ext_addr, length, config), []
    while left:
        n = min(left, AXI_MAX_BURST, page - beat % page)
        out.append((beat, n))
        beat, left = beat + n, left - n
    return out


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
    if not packed(config):
        return words
    if set(map(type, words)) <= {int}:
        return [w & 0xFF for w in words]
    return [w & 0xFF if isinstance(w, int) else w for w in words]
