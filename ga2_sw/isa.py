"""GA-2 instructions: the 128-bit encoding, static validation and the error codes (docs/ISA.md)."""

from dataclasses import dataclass, fields as dc_fields
from enum import Enum, IntEnum

from .banking import mm_extra_cycles, rq_beats, rq_write_skew
from .numerics import MAX_SHIFT, NRM_MAX_SHIFT
from .packing import WORD_BYTES, beats
from .timing import (STREAM_MM_OVERHEAD, mm_write_cycles, nrm_busy, rq_latency, rsa_busy, sm_overhead,
                     sm_pass_cycles, smc_busy, st_latency)

__all__ = ["rows_moved", "Op", "Err", "Instr", "FIELDS", "SLOTS", "OPS", "OpSpec", "UNITS", "LANES", "unit_ops", "unit_lane", "encode",
           "decode", "check", "WIDE", "ONLINE_OPS", "enabled", "units_of", "Feature", "features_of", "smc", "rsa", "nrm", "EXT_ADDR_BITS", "ext_length", "field_slots", "rq_overlaps_partly", "footprints", "OPTIONAL_FIELDS", "unbuilt_fields", "used_bits", "ld", "st", "mm", "rq", "sm", "halt", "INSTR_BITS",
           "EncodingError"]

INSTR_BITS = 128


class Op(IntEnum):
    LD = 1
    ST = 2
    MM = 3
    RQ = 4
    SM = 5
    HALT = 6
    SMC = 7         # the online softmax of one chunk (docs/LONG_CONTEXT.md); chips built with online_unit=1 only
    RSA = 8         # rescale the running outputs, add a chunk's two digit products; online_unit=1 only
    NRM = 9         # normalise the running outputs to int8; online_unit=1 only


class Err(IntEnum):
    NONE = 0
    ILLEGAL = 1
    SP_RANGE = 2
    EXT_RANGE = 3
    SHAPE = 4
    PC_OVERFLOW = 5
    OVERLAP = 6


# Bit slots: name -> (lsb, width, signed). One slot may carry different fields for different opcodes.
# ga2_hdl.ports.InstrLayout is derived from this table and FIELDS.
SLOTS = {
    "op":  (0, 4, False),
    "tb":  (4, 1, False),
    "rb":  (5, 1, False),       # MM: row i of A takes a B of its own, i*lda words past B (Config.row_b chips only)
    "sa":  (6, 1, False),       # MM: every row takes A's row 0, so lda steps only rb's Bs (Config.row_b chips only)
    "wd":  (4, 1, False),       # ST: store whole words, WORD_BYTES bytes each (Config.st_words chips only)
    "ws":  (4, 1, False),       # SMC: each score from two planes ld words apart (Config.wide_scores chips only)
    "dst": (8, 16, False),
    "src": (24, 16, False),
    "len": (40, 16, False),
    "K":   (56, 16, False),
    "m":   (56, 16, True),
    "s":   (72, 6, False),
    "M":   (72, 8, False),
    "N":   (80, 8, False),
    "lda": (88, 12, False),
    "ldb": (100, 12, False),
    "ldc": (112, 12, False),
    "xhi": (56, 16, False),
    "st":  (112, 16, False),    # SMC, NRM: the online softmax's state words; RSA: the word holding alpha
}

# Fields wider than their slot: the external address of LD (src) and ST (dst) is 32 bits, its low half in the
# slot and its high half in `xhi` (bits [71:56], unused by LD and ST otherwise). A program whose external
# addresses are below 65,536 has xhi = 0 and encodes exactly as before external addresses grew.
WIDE = {(Op.LD, "src"): "xhi", (Op.ST, "dst"): "xhi"}
EXT_ADDR_BITS = 32

# Assembly fields of each opcode, in assembly order, and the slot each one is encoded in.
FIELDS = {
    Op.LD:   (("dst", "dst"), ("src", "src"), ("len", "len")),
    Op.ST:   (("src", "src"), ("dst", "dst"), ("len", "len"), ("wd", "wd")),
    Op.MM:   (("dst", "dst"), ("A", "src"), ("B", "len"), ("M", "M"), ("K", "K"), ("N", "N"),
              ("tb", "tb"), ("lda", "lda"), ("ldb", "ldb"), ("ldc", "ldc"), ("rb", "rb"), ("sa", "sa")),
    Op.RQ:   (("dst", "dst"), ("src", "src"), ("len", "len"), ("m", "m"), ("s", "s")),
    Op.SM:   (("dst", "dst"), ("src", "src"), ("len", "len")),
    Op.HALT: (),
    Op.SMC:  (("dst", "dst"), ("src", "src"), ("len", "len"), ("m", "m"), ("s", "s"), ("st", "st"), ("ld", "lda"),
              ("ws", "ws")),
    Op.RSA:  (("dst", "dst"), ("src", "src"), ("len", "len"), ("ld", "lda"), ("a", "st")),
    Op.NRM:  (("dst", "dst"), ("src", "src"), ("len", "len"), ("m", "m"), ("s", "s"), ("st", "st")),
}

class Feature(Enum):
    """An optional part of the ISA, which a chip is built with or without; its value is the ``Config`` field that
    builds it. A chip's features are a set (``features_of``): the RTL's checker and scoreboard take that set, not
    the whole configuration."""
    ROW_B = "row_b"                 # MM's rb and sa fields: a tile a row (docs/ISA.md)
    WORD_STORES = "st_words"        # ST's wd field: stores of whole int32 words
    ONLINE = "online_unit"          # SMC, RSA and NRM: the online unit (docs/LONG_CONTEXT.md)
    WIDE_SCORES = "wide_scores"     # SMC's ws field: scores of two int32 planes (wide keys)


def features_of(config):
    """The set of ``Feature`` a chip of ``config`` is built with."""
    return frozenset(f for f in Feature if getattr(config, f.value))


# Fields that only chips built with a feature take (MM's rb and sa: Feature.ROW_B; ST's wd: Feature.WORD_STORES;
# SMC's ws: Feature.WIDE_SCORES); elsewhere a set one is ILLEGAL, as a stray bit is.
OPTIONAL_FIELDS = {"rb": Feature.ROW_B, "sa": Feature.ROW_B, "wd": Feature.WORD_STORES, "ws": Feature.WIDE_SCORES}


def unbuilt_fields(instr, features):
    """The optional fields set in ``instr`` that chips of ``features`` (a set of ``Feature``) are built without
    (each makes it ILLEGAL)."""
    return [name for name, feature in OPTIONAL_FIELDS.items() if getattr(instr, name) and feature not in features]


def used_bits(op, features):
    """The bits an ``op`` word may set on chips of ``features`` (a set of ``Feature``): ``USED_BITS`` less the
    slots of the optional fields the chip is built without (where they are stray bits: ILLEGAL)."""
    unbuilt = sum(_mask(slot) for name, slot in FIELDS[op]
                  if name in OPTIONAL_FIELDS and OPTIONAL_FIELDS[name] not in features)
    return USED_BITS[op] & ~unbuilt


# The long-context instructions exist on chips built with them (Config.online_unit = 1; docs/LONG_CONTEXT.md):
# elsewhere their opcodes are illegal, like 10..15.
ONLINE_OPS = (Op.SMC, Op.RSA, Op.NRM)


@dataclass(frozen=True)
class OpSpec:
    """Everything the rest of the project needs to know of an opcode besides its fields: one row each.

    The cycle model, the reference machine, the sequencer's dispatch, the assembler's messages, synth's unit
    map and the random-program generators all read this table."""
    unit: str | None        # the execution unit that runs it (a ga2_hdl.top.UNIT_CLASSES key); None for HALT
    lane: str | None        # decoupled mode's lane, one instruction in flight each (LANES)
    counter: str | None     # the busy counter its busy time is charged to (a cycles.Counters field)
    sp: tuple = ()          # (address field, "r" or "w") of each scratchpad range, in footprints() order
    ext: tuple = ()         # the same for its external-memory ranges
    busy: object = None     # (instr, config) -> the unit's busy time X in cycles (docs/ISA.md)


def _mm_busy(i, config):
    if config.decoupled:    # streaming: a whole k-slice per cycle (more where operands share a bank), results
        return i.K + mm_extra_cycles(i, config) + STREAM_MM_OVERHEAD + mm_write_cycles(i.M, i.N, config)
    return (i.K + 1) * (i.M + i.N) + i.M * i.N     # staged: one operand word per cycle, then a flush


OPS = {
    Op.LD:   OpSpec("dma", "dma", "dma", sp=(("dst", "w"),), ext=(("src", "r"),),
                    busy=lambda i, config: beats(i.src, i.len, config) + config.ext_latency),
    Op.ST:   OpSpec("dma", "dma", "dma", sp=(("src", "r"),), ext=(("dst", "w"),),
                    busy=lambda i, config: beats(i.dst, ext_length(i), config) + st_latency(config)),
    Op.MM:   OpSpec("mm", "matrix", "mm", sp=(("A", "r"), ("B", "r"), ("dst", "w")), busy=_mm_busy),
    Op.RQ:   OpSpec("rq", "vector", "vec", sp=(("src", "r"), ("dst", "w")),
                    busy=lambda i, config: rq_beats(i, config) + rq_latency(config)
                    + (rq_write_skew(i, config) if config.decoupled else 0)),
    Op.SM:   OpSpec("sm", "vector", "vec", sp=(("src", "r"), ("dst", "w")),
                    busy=lambda i, config: 2 * sm_pass_cycles(i.len, config) + i.len + sm_overhead(config)),
    Op.HALT: OpSpec(None, None, None, busy=lambda i, config: 0),
    # The online unit reads everything an instruction reads before it writes anything (docs/ISA.md), so
    # overlapping ranges behave as "read everything, then write" and need no OVERLAP rule.
    Op.SMC:  OpSpec("osm", "vector", "vec", sp=(("src", "r"), ("dst", "w"), ("st", "rw")),
                    busy=lambda i, config: smc_busy(i.len, config, i.ws)),
    Op.RSA:  OpSpec("osm", "vector", "vec", sp=(("src", "r"), ("dst", "rw"), ("a", "r")),
                    busy=lambda i, config: rsa_busy(i.len, config)),
    Op.NRM:  OpSpec("osm", "vector", "vec", sp=(("src", "r"), ("dst", "w"), ("st", "r")),
                    busy=lambda i, config: nrm_busy(i.len, config)),
}
assert set(OPS) == set(Op) == set(FIELDS)

# The execution units in dispatch order (the sequencer's unit array), and decoupled mode's lanes.
UNITS = tuple(dict.fromkeys(spec.unit for spec in OPS.values() if spec.unit))
# Decoupled, each lane runs one instruction at a time beside the others: the DMA lane (port A of the banks),
# the matrix lane and the vector lane (which share port B, the vector lane first).
LANES = ("dma", "matrix", "vector")


def enabled(op, features):
    """Whether chips of ``features`` (a set of ``Feature``) execute opcode ``op`` (the online ones only with
    ``Feature.ONLINE``)."""
    return op not in ONLINE_OPS or Feature.ONLINE in features


def units_of(features):
    """The execution units a chip of ``features`` (a set of ``Feature``) has, in ``UNITS`` order."""
    return tuple(u for u in UNITS if any(enabled(op, features) for op in unit_ops(u)))


def unit_ops(unit):
    """The opcodes a unit executes."""
    return tuple(op for op, spec in OPS.items() if spec.unit == unit)


def unit_lane(unit):
    """Decoupled mode's lane of a unit (every opcode of a unit is on one lane)."""
    return OPS[unit_ops(unit)[0]].lane


def _mask(slot):
    lsb, width, _ = SLOTS[slot]
    return ((1 << width) - 1) << lsb


def field_slots(op, name):
    """The slots an assembly field is encoded in, least significant part first."""
    slot = dict(FIELDS[op])[name]
    return (slot, WIDE[op, name]) if (op, name) in WIDE else (slot,)


# Bits each opcode may set; any other set bit makes the instruction illegal.
USED_BITS = {op: _mask("op") | sum(_mask(slot) for name, _ in FIELDS[op] for slot in field_slots(op, name))
             for op in Op}
assert all(sum(SLOTS[s][1] for s in field_slots(op, name)) == EXT_ADDR_BITS for op, name in WIDE)


def field_range(op, name):
    """Encodable (lo, hi) of an assembly field."""
    slots = field_slots(op, name)
    width = sum(SLOTS[slot][1] for slot in slots)
    signed = SLOTS[slots[0]][2]
    return (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)


class EncodingError(ValueError):
    """A field value does not fit its bit slot."""


@dataclass(frozen=True)
class Instr:
    """One decoded instruction. Fields an opcode does not use stay 0."""
    op: Op
    dst: int = 0
    src: int = 0
    len: int = 0
    A: int = 0
    B: int = 0
    M: int = 0
    K: int = 0
    N: int = 0
    tb: int = 0
    lda: int = 0
    ldb: int = 0
    ldc: int = 0
    rb: int = 0
    m: int = 0
    s: int = 0
    st: int = 0
    ld: int = 0
    a: int = 0
    sa: int = 0
    wd: int = 0
    ws: int = 0

    def __post_init__(self):
        object.__setattr__(self, "op", Op(self.op))
        names = {name for name, _ in FIELDS[self.op]}
        for f in dc_fields(self):
            if f.name == "op":
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise EncodingError(f"{self.op.name}: field '{f.name}' must be an integer, not {value!r}")
            if f.name not in names:
                if value != 0:
                    raise EncodingError(f"{self.op.name} has no field '{f.name}' (fields: "
                                        f"{' '.join(sorted(names)) or 'none'})")
                continue
            lo, hi = field_range(self.op, f.name)
            if not lo <= value <= hi:
                raise EncodingError(f"{self.op.name}: field '{f.name}' must be in range {lo}..{hi}, not {value}")

    def fields(self):
        """The assembly fields of this instruction as (name, value) pairs, in assembly order; a flag of the
        optional hardware (``OPTIONAL_FIELDS``) only where it is set, so that programs without it read as
        they always have."""
        return [(name, getattr(self, name)) for name, _ in FIELDS[self.op]
                if name not in OPTIONAL_FIELDS or getattr(self, name)]

    def __str__(self):
        return " ".join([self.op.name] + [f"{n}={v}" for n, v in self.fields()])


def ld(dst, src, len):
    return Instr(Op.LD, dst=dst, src=src, len=len)


def st(src, dst, len, wd=0):
    return Instr(Op.ST, src=src, dst=dst, len=len, wd=wd)


def ext_length(instr):
    """The external elements an LD or ST moves: ``len``, or WORD_BYTES bytes a word for an ST with ``wd``."""
    return instr.len * WORD_BYTES if instr.wd else instr.len


def rows_moved(op, sp, sp_stride, ext, ext_stride, rows, length):
    """LDs (``op`` = "LD") or STs of ``rows`` rows of ``length`` words between scratchpad rows ``sp_stride``
    apart and external rows ``ext_stride`` apart: when both are packed, one instruction for as many whole rows as
    its ``len`` field holds."""
    if sp_stride == length and ext_stride == length:
        per = max(1, field_range(Op.LD if op == "LD" else Op.ST, "len")[1] // max(length, 1))
        pairs = [(sp + r * length, ext + r * length, min(per, rows - r) * length)
                 for r in range(0, max(rows, 1), per)]
    else:
        pairs = [(sp + r * sp_stride, ext + r * ext_stride, length) for r in range(rows)]
    return [ld(dst=a, src=x, len=n) if op == "LD" else st(src=a, dst=x, len=n) for a, x, n in pairs]


def mm(dst, A, B, M, K, N, tb=0, lda=0, ldb=0, ldc=0, rb=0, sa=0):
    return Instr(Op.MM, dst=dst, A=A, B=B, M=M, K=K, N=N, tb=tb, lda=lda, ldb=ldb, ldc=ldc, rb=rb, sa=sa)


def rq(dst, src, len, m, s):
    return Instr(Op.RQ, dst=dst, src=src, len=len, m=m, s=s)


def sm(dst, src, len):
    return Instr(Op.SM, dst=dst, src=src, len=len)


def halt():
    return Instr(Op.HALT)


def smc(dst, src, len, m, s, st, ld=None, ws=0):
    """SMC; the low digits ``ld`` words after the high ones (default ``len``: right after them), and with ``ws``
    the scores' low plane ``ld`` words after their high one."""
    return Instr(Op.SMC, dst=dst, src=src, len=len, m=m, s=s, st=st, ld=len if ld is None else ld, ws=ws)


def rsa(dst, src, len, ld, a):
    return Instr(Op.RSA, dst=dst, src=src, len=len, ld=ld, a=a)


def nrm(dst, src, len, m, s, st):
    return Instr(Op.NRM, dst=dst, src=src, len=len, m=m, s=s, st=st)


def encode(instr):
    """Instr -> 128-bit integer."""
    word = int(instr.op)
    for name, _ in FIELDS[instr.op]:
        value = getattr(instr, name)
        for slot in field_slots(instr.op, name):
            lsb, width, _ = SLOTS[slot]
            word |= (value & ((1 << width) - 1)) << lsb
            value >>= width
    return word


def decode(word):
    """128-bit integer -> (Instr or None, Err). Err.ILLEGAL for an unknown opcode or stray bits."""
    if not 0 <= word < (1 << INSTR_BITS):
        raise ValueError(f"Instruction word must be a {INSTR_BITS}-bit unsigned integer, not {word!r}")
    opcode = word & 0xF
    try:
        op = Op(opcode)
    except ValueError:
        return None, Err.ILLEGAL
    if word & ~USED_BITS[op]:
        return None, Err.ILLEGAL
    values = {}
    for name, slot in FIELDS[op]:
        lsb, width, signed = SLOTS[slot]
        v = (word >> lsb) & ((1 << width) - 1)
        if signed and v >> (width - 1):
            v -= 1 << width
        for high in field_slots(op, name)[1:]:      # unsigned: only the external addresses are wide
            hlsb, hwidth, _ = SLOTS[high]
            v |= ((word >> hlsb) & ((1 << hwidth) - 1)) << width
            width += hwidth
        values[name] = v
    return Instr(op, **values), Err.NONE


def footprints(instr):
    """(scratchpad (lo, hi) ranges, external (lo, hi) ranges) an instruction touches, hi inclusive.

    Only meaningful for an instruction with a legal shape."""
    i = instr
    if i.op == Op.LD:
        return [(i.dst, i.dst + i.len - 1)], [(i.src, i.src + i.len - 1)]
    if i.op == Op.ST:
        return [(i.src, i.src + i.len - 1)], [(i.dst, i.dst + ext_length(i) - 1)]
    if i.op == Op.MM:       # with rb, B's range spans every row's B: from row 0's first word to row M-1's last;
        a_hi = i.A + (i.M - 1) * i.lda * (1 - i.sa) + i.K - 1       # with sa, A's is row 0 alone
        b_hi = i.B + ((i.N - 1) * i.ldb + i.K - 1 if i.tb else (i.K - 1) * i.ldb + i.N - 1) + \
            (i.M - 1) * i.lda * i.rb
        c_hi = i.dst + (i.M - 1) * i.ldc + i.N - 1
        return [(i.A, a_hi), (i.B, b_hi), (i.dst, c_hi)], []
    if i.op in (Op.RQ, Op.SM):
        return [(i.src, i.src + i.len - 1), (i.dst, i.dst + i.len - 1)], []
    if i.op == Op.SMC:          # the scores (with ws their two planes, ld apart); the weights' high digits, their
        # low digits ld words on; the state (M, S, alpha)
        return [(i.src, i.src + i.ws * i.ld + i.len - 1), (i.dst, i.dst + i.ld + i.len - 1), (i.st, i.st + 2)], []
    if i.op == Op.RSA:          # the two product rows, ld apart; the running outputs; alpha
        return [(i.src, i.src + i.ld + i.len - 1), (i.dst, i.dst + i.len - 1), (i.a, i.a)], []
    if i.op == Op.NRM:          # the state's (M, S): S is read
        return [(i.src, i.src + i.len - 1), (i.dst, i.dst + i.len - 1), (i.st, i.st + 1)], []
    return [], []


# The opcodes whose len is held to sm_max_len (the softmax unit's and the online unit's buffers), and the
# largest shift of each opcode with one (RQ and SMC: the requantiser's 48-bit product; NRM: NRM_MAX_SHIFT).
LEN_LIMITED = (Op.SM, Op.SMC, Op.RSA, Op.NRM)
MAX_SHIFTS = {Op.RQ: MAX_SHIFT, Op.SMC: MAX_SHIFT, Op.NRM: NRM_MAX_SHIFT}


def rq_overlaps_partly(instr):
    """An RQ whose destination overlaps its source without being it (``0 < |dst - src| < len``): the OVERLAP
    fault. What such an RQ would compute depends on the requantiser's pipeline depth, which the ISA leaves to
    the implementation (docs/ISA.md, "Overlapping source and destination ranges")."""
    i = instr
    return i.op == Op.RQ and 0 < abs(i.dst - i.src) < i.len


def check(instr, config):
    """Static validation of a decoded instruction against a configuration: the hardware's error code."""
    i, features = instr, features_of(config)
    if not enabled(i.op, features) or unbuilt_fields(i, features):
        return Err.ILLEGAL
    if i.op == Op.HALT:
        return Err.NONE
    if i.op == Op.MM:
        if not (1 <= i.M <= config.rows and 1 <= i.N <= config.cols and i.K >= 1):
            return Err.SHAPE
    else:
        if i.len == 0:
            return Err.SHAPE
        if i.s > MAX_SHIFTS.get(i.op, MAX_SHIFT):
            return Err.SHAPE
        if i.op in LEN_LIMITED and i.len > config.sm_max_len:
            return Err.SHAPE
        if i.wd and i.dst % WORD_BYTES:
            return Err.SHAPE
    if rq_overlaps_partly(i):
        return Err.OVERLAP
    sp, ext = footprints(i)
    if any(hi >= config.sp_words for _, hi in sp):
        return Err.SP_RANGE
    if any(hi >= config.ext_words for _, hi in ext):
        return Err.EXT_RANGE
    return Err.NONE


def explain(instr, config):
    """A sentence saying why `check` rejects an instruction (empty string when it does not)."""
    i, err = instr, check(instr, config)
    if err == Err.NONE:
        return ""
    if err == Err.SHAPE:
        if i.op == Op.MM:
            parts = []
            if not 1 <= i.M <= config.rows:
                parts.append(f"M={i.M} is outside 1..{config.rows} (rows)")
            if not 1 <= i.N <= config.cols:
                parts.append(f"N={i.N} is outside 1..{config.cols} (cols)")
            if i.K < 1:
                parts.append("K must be at least 1")
            return "; ".join(parts)
        if i.len == 0:
            return "len must be at least 1"
        if i.s > MAX_SHIFTS.get(i.op, MAX_SHIFT):
            return f"s={i.s} is outside 0..{MAX_SHIFTS[i.op]}"
        if i.wd and i.dst % WORD_BYTES:
            return f"dst={i.dst} is not a multiple of {WORD_BYTES} (an ST of whole words, wd=1, stores aligned words)"
        return f"len={i.len} is outside 1..{config.sm_max_len} (sm_max_len)"
    if err == Err.ILLEGAL and enabled(i.op, features_of(config)):
        field = unbuilt_fields(i, features_of(config))[0]
        return f"{field}={getattr(i, field)} needs a chip built with {OPTIONAL_FIELDS[field].value}=1 (docs/ISA.md)"
    if err == Err.ILLEGAL:
        return f"{i.op.name} exists only on chips built with online_unit=1 (docs/LONG_CONTEXT.md)"
    if err == Err.OVERLAP:
        return (f"destination {i.dst}..{i.dst + i.len - 1} overlaps source {i.src}..{i.src + i.len - 1} "
                f"without being it (RQ's destination is its source or is disjoint from it)")
    sp, ext = footprints(i)
    if err == Err.SP_RANGE:
        lo, hi = next(r for r in sp if r[1] >= config.sp_words)
        return f"touches scratchpad words {lo}..{hi}, but the scratchpad has {config.sp_words} words (0..{config.sp_words - 1})"
    lo, hi = next(r for r in ext if r[1] >= config.ext_words)
    return f"touches external words {lo}..{hi}, but external memory has {config.ext_words} words (0..{config.ext_words - 1})"
