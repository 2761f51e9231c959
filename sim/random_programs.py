"""Random GA-2 programs and memory images: what ``ga2 fuzz``, tests/test_differential.py and other tests run.

Every choice is drawn through ``draw(lo, hi)`` (inclusive), so the same code runs on ``random.Random.randint``
(the fuzz command: seeded and reproducible) and on Hypothesis's ``st.integers`` (the tests: shrinkable).
Field ranges, opcodes and their operands come from the ISA's tables (``ga2_sw.isa.OPS``, ``FIELDS``, ``SLOTS``,
``field_range``) and the requantiser's largest shift from ``ga2_sw.numerics.MAX_SHIFT``, so a change of the
encoding changes what is generated with it."""

import random

from ga2_sw import isa
from ga2_sw.config import Config
from ga2_sw.cycles import cycle_counts
from ga2_sw.isa import FIELDS, INSTR_BITS, OPS, SLOTS, Err, Instr, Op, enabled, encode, features_of, field_range, used_bits
from ga2_sw.numerics import MAX_SHIFT, NRM_MAX_SHIFT
from ga2_sw.packing import WORD_BYTES

__all__ = ["random_valid_instr", "random_fault", "random_program", "random_words", "fuzz_job", "cycle_limit_for",
           "FAULT_KINDS", "FAULT_ERRORS", "FUZZ_CONFIG"]

# The differential tests' and the fuzzer's default chip: small memories, so images are cheap to move and
# faults and PC overflow are easy to reach.
FUZZ_CONFIG = Config(sp_words=512, ext_words=512, imem_words=64)

FAULT_KINDS = ("illegal_opcode", "stray_bits", "halt_stray", "shape", "overlap", "sp_range", "ext_range",
               "fall_off", "pc_overflow")

FAULT_ERRORS = {"illegal_opcode": Err.ILLEGAL, "stray_bits": Err.ILLEGAL, "halt_stray": Err.ILLEGAL,
                "shape": Err.SHAPE, "overlap": Err.OVERLAP, "sp_range": Err.SP_RANGE, "ext_range": Err.EXT_RANGE,
                "fall_off": Err.ILLEGAL, "pc_overflow": Err.PC_OVERFLOW}

# From the ISA's tables: the opcodes a program computes with (every one with a unit; MM and RQ drawn twice
# as often), the width of the opcode slot and the opcodes it can hold that do not exist, the opcodes with a
# `len` field, and the largest value of a field.
_WEIGHT = {Op.MM: 2, Op.RQ: 2}
VALID_OPS = tuple(op for op, spec in OPS.items() if spec.unit for _ in range(_WEIGHT.get(op, 1)))
_OP_BITS = SLOTS["op"][1]
ILLEGAL_OPCODES = tuple(code for code in range(1 << _OP_BITS) if code not in set(Op))


def _valid_ops(config):
    """VALID_OPS that chips of ``config`` have (the online ones only with config.online_unit)."""
    return tuple(op for op in VALID_OPS if enabled(op, features_of(config)))


def _illegal_opcodes(config):
    """Opcodes that fault ILLEGAL on ``config``: those that do not exist and those its chip is built without."""
    return ILLEGAL_OPCODES + tuple(int(op) for op in Op if not enabled(op, features_of(config)))
LEN_OPS = tuple(op for op in Op if "len" in dict(FIELDS[op]))
M_RANGE = field_range(Op.RQ, "m")
S_MAX = field_range(Op.RQ, "s")[1]              # the s field holds more than MAX_SHIFT: SHAPE above it


def _hi(op, name):
    return field_range(op, name)[1]


# An address far above a default scratchpad, for instructions whose range fault SHAPE must outrank.
_FAR = 65000


def _past_end(n, sp, hi):
    """The length ``n`` of a range meant to run past a scratchpad of ``sp`` words, raised where no value of its
    address field (at most ``hi``) lies past the end: at sp = hi + 1 (2^16 words) only a range of two words or
    more, started at the last word, reaches past it."""
    return max(n, sp - hi + 1)


def _pick(draw, options):
    return options[draw(0, len(options) - 1)]


def _length(draw, hi):
    """A length in 1..hi, mostly short, sometimes the largest."""
    hi = max(1, hi)
    mode = draw(0, 7)
    if mode == 0:
        return hi
    if mode <= 5:
        return draw(1, min(hi, 8))
    return draw(1, hi)


def _near(draw, base, lo, hi):
    """An address at or a few words around ``base`` (overlapping ranges), clamped to lo..hi."""
    return max(lo, min(hi, base + draw(-6, 8)))


def _disjoint(draw, src, n, sp):
    """A destination for an RQ of ``n`` words at ``src``: anywhere in the scratchpad, not partly over the source
    (its own start, or at least ``n`` words away: isa.rq_overlaps_partly)."""
    dst = draw(0, sp - n)
    return src if isa.rq_overlaps_partly(isa.rq(dst, src, n, 1, 0)) else dst


def _rq_pair(draw, n, sp):
    """(dst, src) of a legal RQ of ``n`` words anywhere in the scratchpad."""
    src = draw(0, sp - n)
    return _disjoint(draw, src, n, sp), src


def _adjacent(draw, src, n, sp):
    """The destination right before or right after the source (the closest legal partners), else ``src``."""
    return _pick(draw, tuple(d for d in (src - n, src + n) if 0 <= d <= sp - n) or (src,))


def random_valid_instr(draw, config):
    """One instruction that passes ``isa.check`` on ``config``."""
    sp, ext = config.sp_words, config.ext_words
    op = _pick(draw, _valid_ops(config))
    spec = OPS[op]
    if op == Op.ST and config.st_words and draw(0, 1):      # whole words: WORD_BYTES bytes each, aligned
        n = _length(draw, min(sp, ext // WORD_BYTES, 96))
        return isa.st(draw(0, sp - n), WORD_BYTES * draw(0, ext // WORD_BYTES - n), n, wd=1)
    if spec.ext:                                 # a transfer: one scratchpad and one external range
        n = _length(draw, min(sp, ext, 96))
        spa, exa = draw(0, sp - n), draw(0, ext - n)
        return Instr(op, **{spec.sp[0][0]: spa, spec.ext[0][0]: exa, "len": n})
    if op == Op.RQ:
        n = _length(draw, min(sp, 96))
        src = draw(0, sp - n)
        dst = _pick(draw, (lambda: _disjoint(draw, src, n, sp), lambda: _adjacent(draw, src, n, sp), lambda: src))()
        lo, hi = M_RANGE
        m = _pick(draw, (lambda: draw(lo, hi), lambda: _pick(draw, (lo, hi, 0, 1, -1, (hi + 1) // 2))))()
        s = _pick(draw, (lambda: draw(0, MAX_SHIFT),
                         lambda: _pick(draw, (0, 1, 15, 16, 31, 32, MAX_SHIFT - 1, MAX_SHIFT))))()
        return isa.rq(dst, src, n, m, s)
    if op == Op.SM:
        n = _length(draw, min(config.sm_max_len, sp))
        src = draw(0, sp - n)
        dst = _pick(draw, (lambda: draw(0, sp - n), lambda: _near(draw, src, 0, sp - n), lambda: src))()
        return isa.sm(dst, src, n)
    if op in (Op.SMC, Op.RSA, Op.NRM):
        return _online_instr(draw, config, op)
    # MM: shapes up to the array, strides incl. 0 (broadcast rows) and overlaps of C with A or B.
    M, N = draw(1, config.rows), draw(1, config.cols)
    K = _pick(draw, (lambda: draw(1, 8), lambda: draw(1, 24), lambda: draw(1, 64), lambda: draw(1, 8),
                     lambda: draw(1, 24), lambda: draw(1, 400)))()
    K = max(1, min(K, sp // max(M, N)))            # packed A and B always fit (small scratchpads)
    tb = draw(0, 1)
    lda = _pick(draw, (K, 0, draw(0, 64)))
    ldb = _pick(draw, (K if tb else N, 0, draw(0, 64)))
    ldc = _pick(draw, (N, 0, draw(0, 64)))
    rb = draw(0, 1) if config.row_b else 0         # each row its own B, lda words after the last row's
    sa = draw(0, 1) if config.row_b else 0         # every row row 0's A (A's range is then row 0's alone)
    a_span = (M - 1) * lda * (1 - sa) + K
    b_span = ((N - 1) * ldb + K) if tb else ((K - 1) * ldb + N)
    b_span += (M - 1) * lda * rb
    c_span = (M - 1) * ldc + N
    if max(a_span, b_span, c_span) > sp:           # strides past the scratchpad: fall back to packed ones, and
        N = min(N, sp // M)                        # to a C of at most sp words (arrays of more cells than words)
        lda, ldb, ldc, rb, sa = K, (K if tb else N), N, 0, 0
        a_span, b_span, c_span = M * K, K * N, M * N
    A, B = draw(0, sp - a_span), draw(0, sp - b_span)
    dst = _pick(draw, (lambda: draw(0, sp - c_span), lambda: min(A, sp - c_span), lambda: min(B, sp - c_span)))()
    return isa.mm(dst, A, B, M, K, N, tb, lda, ldb, ldc, rb, sa)


def _online_instr(draw, config, op):
    """A valid SMC, RSA or NRM: ranges anywhere, often over each other (the unit reads all before it writes)."""
    sp = config.sp_words
    n = _length(draw, min(config.sm_max_len, max(1, (sp - 3) // 3), 64))
    lo, hi = M_RANGE
    m = _pick(draw, (lambda: draw(lo, hi), lambda: _pick(draw, (lo, hi, 0, 1, -1, (hi + 1) // 2))))()
    src = draw(0, sp - n)
    if op == Op.SMC:
        ld = _pick(draw, (n, 0, draw(0, min(64, sp - n))))
        ws = draw(0, 1) if config.wide_scores else 0      # the scores' two planes, ld apart
        if ws:
            src = draw(0, sp - n - ld)
        dst = _pick(draw, (lambda: draw(0, sp - n - ld), lambda: _near(draw, src, 0, sp - n - ld)))()
        st = _pick(draw, (lambda: draw(0, sp - 3), lambda: _near(draw, dst, 0, sp - 3)))()
        return isa.smc(dst, src, n, m, draw(0, MAX_SHIFT), st, ld, ws)
    if op == Op.RSA:
        ld = _pick(draw, (n, 0, draw(0, min(64, sp - n))))
        src = draw(0, sp - n - ld)
        dst = _pick(draw, (lambda: draw(0, sp - n), lambda: _near(draw, src, 0, sp - n)))()
        return isa.rsa(dst, src, n, ld, draw(0, sp - 1))
    dst = _pick(draw, (lambda: draw(0, sp - n), lambda: src))()
    return isa.nrm(dst, src, n, m, _pick(draw, (lambda: draw(0, NRM_MAX_SHIFT), lambda: draw(10, 20)))(),
                   draw(0, sp - 2))


def _stray_bit(draw, op, config):
    """A bit ``op`` does not use on ``config``'s chips: outside its fields, or an optional field's
    (``isa.OPTIONAL_FIELDS``) on a chip built without it."""
    used = used_bits(op, features_of(config))
    free = [b for b in range(INSTR_BITS) if not (used >> b) & 1]
    return 1 << _pick(draw, free)


def random_fault(draw, config, kind):
    """(instruction or raw word, expected error) of one faulting instruction of ``kind`` (FAULT_KINDS minus
    fall_off and pc_overflow, which are program shapes)."""
    make = _FAULT_MAKERS.get(kind)
    if make is None:
        raise ValueError(f"Unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
    return make(draw, config)


def _illegal_opcode(draw, config):
    opcode = _pick(draw, _illegal_opcodes(config))
    body = _pick(draw, (lambda: 0, lambda: draw(0, (1 << 62) - 1) << _pick(draw, (4, 40, 66))))()
    return ((body << _OP_BITS) & ((1 << INSTR_BITS) - 1)) | opcode, Err.ILLEGAL


def _stray_bits(draw, config):
    word = encode(random_valid_instr(draw, config))
    return word | _stray_bit(draw, Op(word & ((1 << _OP_BITS) - 1)), config), Err.ILLEGAL


def _halt_stray(draw, config):
    return encode(isa.halt()) | _stray_bit(draw, Op.HALT, config), Err.ILLEGAL


def _shape_fault(draw, config):
    if config.st_words and not draw(0, 8):       # an ST of whole words at an unaligned address
        return isa.st(draw(0, 100), WORD_BYTES * draw(0, 100) + draw(1, WORD_BYTES - 1), draw(1, 8), wd=1), Err.SHAPE
    variant = draw(0, 8 if config.online_unit else 7)
    if variant == 0:
        return Instr(_pick(draw, tuple(o for o in LEN_OPS if enabled(o, features_of(config)))), dst=draw(0, 100),
                     src=draw(0, 100), len=0), Err.SHAPE
    if variant == 8:                             # the online instructions' len and shift limits
        op = _pick(draw, (Op.SMC, Op.RSA, Op.NRM))
        n = draw(config.sm_max_len + 1, min(_hi(op, "len"), config.sm_max_len + 40))
        if op == Op.RSA or draw(0, 1):
            return Instr(op, len=n), Err.SHAPE
        limit = MAX_SHIFT if op == Op.SMC else NRM_MAX_SHIFT
        return Instr(op, len=draw(1, 8), s=draw(limit + 1, S_MAX), st=_FAR), Err.SHAPE
    if variant == 1:
        return isa.mm(0, 0, 0, _pick(draw, (0, config.rows + 1, _hi(Op.MM, "M"))), 1, 1), Err.SHAPE
    if variant == 2:
        return isa.mm(0, 0, 0, 1, 1, _pick(draw, (0, config.cols + 1, _hi(Op.MM, "N")))), Err.SHAPE
    if variant == 3:
        return isa.mm(0, 0, 0, 1, 0, 1), Err.SHAPE
    if variant == 4:
        return isa.rq(0, 0, draw(1, 8), draw(-5, 5), draw(MAX_SHIFT + 1, S_MAX)), Err.SHAPE
    if variant == 5:
        return isa.sm(0, 0, draw(config.sm_max_len + 1, min(_hi(Op.SM, "len"), config.sm_max_len + 40))), Err.SHAPE
    if variant == 6:                             # SHAPE outranks a range fault and an overlap
        return isa.rq(_FAR, _FAR + draw(0, 1), 10, 1, draw(MAX_SHIFT + 1, S_MAX)), Err.SHAPE
    return isa.mm(_FAR, 0, 0, 1, 1, 0), Err.SHAPE


def _overlap_fault(draw, config):
    sp = config.sp_words
    n = draw(2, min(64, (sp + 1) // 2))          # source and destination, up to n - 1 apart, fit: 2n - 1 words
    distance = _pick(draw, (1, n - 1, draw(1, n - 1))) * _pick(draw, (1, -1))
    far = (sp - n + 1, _hi(Op.RQ, "src") - n - 1)   # sources that run past the end (none at 2^16 words)
    if draw(0, 3) or far[0] > far[1]:
        src = draw(max(0, -distance), sp - n - max(0, distance))
    else:                                        # OVERLAP outranks SP_RANGE
        src = draw(*far)
    return isa.rq(src + distance, src, n, draw(-5, 5), draw(0, MAX_SHIFT)), Err.OVERLAP


def _sp_range_fault(draw, config):
    sp, ext = config.sp_words, config.ext_words
    variant = draw(0, 5 if config.row_b and config.rows > 1 else 4)
    if variant == 5:                             # rb: row M-1's B runs past the end, row 0's does not
        M, K, lda = draw(2, config.rows), draw(1, 8), draw(1, 100)
        B = max(0, sp - (M - 1) * lda - K + 1 + draw(0, 3))
        return isa.mm(0, 0, min(B, _hi(Op.MM, "B")), M, K, 1, 1, lda, 1, 1, rb=1), Err.SP_RANGE
    if variant == 0:
        n = _past_end(draw(1, 64), sp, _hi(Op.LD, "dst"))
        return isa.ld(draw(sp - n + 1, min(_hi(Op.LD, "dst"), sp + 5)), 0, n), Err.SP_RANGE
    if variant == 1:                             # SP_RANGE outranks EXT_RANGE
        n = _past_end(draw(1, 64), sp, _hi(Op.ST, "src"))
        return isa.st(draw(sp - n + 1, _hi(Op.ST, "src")), ext, n), Err.SP_RANGE
    if variant == 2:                             # (an SM longer than sm_max_len would be SHAPE: an RQ then)
        n = _past_end(draw(1, min(16, config.sm_max_len)), sp, _hi(Op.RQ, "dst"))
        src, dst = draw(0, sp - n), draw(sp - n + 1, _hi(Op.RQ, "dst"))
        if draw(0, 1) or n > config.sm_max_len:
            ins = isa.rq(dst, min(src, dst - n), n, 1, 0)     # disjoint: OVERLAP would outrank SP_RANGE
        else:
            ins = isa.sm(dst, src, n)
        if draw(0, 1):
            ins = Instr(ins.op, dst=ins.src, src=ins.dst, len=ins.len, m=ins.m, s=ins.s)
        return ins, Err.SP_RANGE
    if variant == 3:                             # one operand just past the end through a stride
        M = draw(2, config.rows) if config.rows > 1 else 1
        lda = draw(1, 200)
        K = _past_end(draw(1, 8), sp, _hi(Op.MM, "A"))
        A = max(0, sp - (M - 1) * lda - K + 1 + draw(0, 3))
        return isa.mm(0, min(A, _hi(Op.MM, "A")), 0, M, K, 1, 0, lda, 1, 1), Err.SP_RANGE
    which = draw(0, 2)                           # A, B or C starts at the last word and runs past it
    tb = draw(0, 1)
    if which == 2 and config.cols == 1:          # a one-column C starts past the end (none does at 2^16 words)
        if sp <= _hi(Op.MM, "dst"):
            return isa.mm(sp, 0, 0, 1, 1, 1), Err.SP_RANGE
        which = 0
    ins = isa.mm(sp - 1 if which == 2 else 0, sp - 1 if which == 0 else 0, sp - 1 if which == 1 else 0,
                 1, 2, 2 if config.cols > 1 else 1, tb, 2, 2, 2)
    return ins, Err.SP_RANGE


def _ext_range_fault(draw, config):
    if config.st_words and not draw(0, 2):       # an ST of whole words whose last bytes run past the end
        n, words = draw(1, 64), config.ext_words // WORD_BYTES
        dst = WORD_BYTES * draw(words - n + 1, words + 3)        # (words + 3 < 2^30: the address fits)
        return isa.st(draw(0, config.sp_words - n), dst, n, wd=1), Err.EXT_RANGE
    n = draw(1, 64)
    spa = draw(0, config.sp_words - n)
    exa = draw(config.ext_words - n + 1, _hi(Op.LD, "src"))
    return (isa.ld(spa, exa, n) if draw(0, 1) else isa.st(spa, exa, n)), Err.EXT_RANGE


# One maker per fault kind random_fault draws (the program shapes fall_off and pc_overflow are made elsewhere).
_FAULT_MAKERS = {"illegal_opcode": _illegal_opcode, "stray_bits": _stray_bits, "halt_stray": _halt_stray,
                 "shape": _shape_fault, "overlap": _overlap_fault, "sp_range": _sp_range_fault,
                 "ext_range": _ext_range_fault}


def _cramped(config):
    """``config`` with the memories shrunk to their smallest: instructions valid there are valid on
    ``config`` too, and crowded into 64 words they overlap all the time (hazards for decoupled mode)."""
    return config.replace(sp_words=64, ext_words=64)


def _load(draw, config, n):
    """A valid LD of ``n`` elements anywhere in both memories."""
    return isa.ld(draw(0, config.sp_words - n), draw(0, config.ext_words - n), n)


def random_program(draw, config, fault=None, max_len=10, cramped=False):
    """A program: random valid instructions, then HALT (fault None), or then one faulting instruction of
    kind ``fault`` (a few more instructions after it, never reached). ``fall_off`` leaves out the HALT
    (the zeroed instruction memory faults); ``pc_overflow`` fills the whole instruction memory.
    ``cramped`` draws about two of three valid instructions inside the first 64 words of both memories, so
    that loads, stores and compute read and write each other's words (RAW, WAR and WAW hazards)."""
    if fault == "pc_overflow":
        prog = []
        for _ in range(config.imem_words):
            n = draw(1, 4)
            prog.append(_pick(draw, (lambda: _load(draw, config, n),
                                     lambda: isa.rq(*_rq_pair(draw, n, config.sp_words), n,
                                                    draw(-300, 300), draw(0, 12))))())
        return prog
    small = _cramped(config) if cramped else config
    prog = [random_valid_instr(draw, small if draw(0, 2) else config) for _ in range(draw(0 if fault else 1, max_len))]
    if config.ld_overlap and draw(0, 1):
        # A run of LDs, some of a beat or two: the DMA takes each beside the last one's beats, and a short one
        # between two longer ones holds the third back until the first has written its last (it holds two).
        at = draw(0, len(prog))
        for _ in range(draw(2, 4)):
            chip = small if draw(0, 2) else config
            most = config.bus_bytes * draw(1, 2) if draw(0, 1) else 64
            prog.insert(at, _load(draw, chip, draw(1, min(most, chip.sp_words, chip.ext_words))))
            at += 1
    prog = prog[:config.imem_words - 2]
    if fault is None:
        return prog + [isa.halt()]
    if fault == "fall_off":
        return prog[:config.imem_words - 1]
    bad, _ = random_fault(draw, config, fault)
    tail = [random_valid_instr(draw, config) for _ in range(draw(0, 2))] + [isa.halt()]
    return (prog + [bad] + tail)[:config.imem_words]


def random_words(rng, n):
    """``n`` memory words from ``random.Random`` ``rng``: int8 operands, int32 accumulators, raw words and
    extremes mixed (the int8 view of a raw word has garbage above bit 7, which the units must ignore)."""
    out = []
    for _ in range(n):
        k = rng.random()
        if k < 0.45:
            out.append(rng.randint(-128, 127) & 0xFFFFFFFF)
        elif k < 0.65:
            out.append(rng.randint(-(1 << 20), 1 << 20) & 0xFFFFFFFF)
        elif k < 0.9:
            out.append(rng.getrandbits(32))
        else:
            out.append(rng.choice((0, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x7F, 0x80, 0xFF, 0xFFFFFF80)))
    return out


def fuzz_job(config, seed, fault_rate=0.3):
    """One reproducible fuzz case from an integer seed: (program, ext image, sp image)."""
    rng = random.Random(seed)
    draw = rng.randint
    fault = None
    if rng.random() < fault_rate:
        fault = rng.choice(FAULT_KINDS)
    program = random_program(draw, config, fault, cramped=rng.random() < 0.5)
    ext = random_words(rng, rng.choice((0, 16, config.ext_words)))
    sp = random_words(rng, rng.choice((0, 64, config.sp_words)))
    return program, ext, sp


def cycle_limit_for(program, config):
    """A cycle limit generous for a correct chip (twice the cycle model's count) and short for a hung one."""
    counters, _, _ = cycle_counts(program, config)
    return 2 * counters.cycles + 1000
