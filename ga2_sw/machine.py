"""The reference machine: executes GA-2 programs bit-exactly and returns memories, counters and error."""

from dataclasses import dataclass

from .cycles import Counters, run_program
from .isa import Op, Err
from .packing import WORD_BYTES, held_image, load_element, store_element, word_bytes
from .numerics import nrm_word, rsa_word, s8, s32, smc_words, u32, requant, softmax_q16, wide_score_words

__all__ = ["Machine", "Result", "run"]


@dataclass
class Result:
    ext: list
    sp: list
    counters: Counters
    error: Err
    pc: int                      # the HALT's or the faulting instruction's address

    @property
    def ok(self):
        return self.error == Err.NONE


def _image(words, size, what):
    words = list(words or [])
    if len(words) > size:
        raise ValueError(f"{what} image has {len(words)} words but the memory holds {size}")
    # the common case, plain ints in range, checked at C speed (memories of millions of words); otherwise the
    # word-by-word check names the first bad word
    if words and not (set(map(type, words)) == {int} and min(words) >= 0 and max(words) <= 0xFFFFFFFF):
        for n, w in enumerate(words):
            if not isinstance(w, int) or not 0 <= w <= 0xFFFFFFFF:
                raise ValueError(f"{what} image word {n} must be a 32-bit unsigned integer, not {w!r}")
    return words + [0] * (size - len(words))


class Machine:
    """Runs programs on a configuration. ``run`` never mutates its inputs."""

    def __init__(self, config):
        self.config = config

    def run(self, program, ext=None, sp=None):
        cfg = self.config
        ext = _image(held_image(ext, cfg), cfg.ext_words, "External memory")
        sp = _image(sp, cfg.sp_words, "Scratchpad")
        # Decoupled, the scoreboard never lets two instructions with overlapping ranges run together, so the
        # memories are those of program order; only the timing differs, and the mode's timer times it.
        counters, err, pc = run_program(program, cfg, execute=lambda instr: _execute(instr, sp, ext, cfg))
        return Result(ext, sp, counters, err, pc)


def _execute(i, sp, ext, config):
    if i.op == Op.LD:       # packed, each byte sign-extended; ST keeps each word's low byte (ga2_sw.packing)
        sp[i.dst:i.dst + i.len] = [load_element(e, config) for e in ext[i.src:i.src + i.len]]
    elif i.op == Op.ST and i.wd:        # whole words, WORD_BYTES bytes each, least significant first
        ext[i.dst:i.dst + i.len * WORD_BYTES] = [b for w in sp[i.src:i.src + i.len] for b in word_bytes(w)]
    elif i.op == Op.ST:
        ext[i.dst:i.dst + i.len] = [store_element(w, config) for w in sp[i.src:i.src + i.len]]
    elif i.op == Op.MM:
        a = [[s8(sp[i.A + r * i.lda * (1 - i.sa) + k]) for k in range(i.K)] for r in range(i.M)]   # sa: row 0's A

        def b(r, k, c):     # Bop(k, c) of row r: with rb, row r's B starts r*lda words past B
            base = i.B + r * i.lda * i.rb
            return s8(sp[base + c * i.ldb + k] if i.tb else sp[base + k * i.ldb + c])
        out = [[sum(a[r][k] * b(r, k, c) for k in range(i.K)) for c in range(i.N)] for r in range(i.M)]
        for r in range(i.M):                       # every operand is read before the first write
            for c in range(i.N):
                sp[i.dst + r * i.ldc + c] = u32(out[r][c])
    elif i.op == Op.RQ:
        # The checker lets an RQ's destination be its source or disjoint from it (isa.rq_overlaps_partly), so
        # reading every element before writing any computes what the pipeline does, at any depth.
        words = [u32(requant(s32(w), i.m, i.s)) for w in sp[i.src:i.src + i.len]]
        sp[i.dst:i.dst + i.len] = words
    elif i.op == Op.SM:
        probs = softmax_q16([s8(sp[i.src + t]) for t in range(i.len)])
        sp[i.dst:i.dst + i.len] = probs
    # The online unit reads every word an instruction reads before it writes one (docs/ISA.md), and writes in
    # this order: so do these.
    elif i.op == Op.SMC:
        scores = sp[i.src:i.src + i.len]
        if i.ws:                # 128 x the high plane's score + the low plane's, ld words on (modulo 2**32)
            scores = wide_score_words(scores, sp[i.src + i.ld:i.src + i.ld + i.len])
        high, low, mx, total, alpha = smc_words(scores, sp[i.st], sp[i.st + 1], i.m, i.s)
        sp[i.dst:i.dst + i.len] = high
        sp[i.dst + i.ld:i.dst + i.ld + i.len] = low
        sp[i.st:i.st + 3] = [mx, total, alpha]
    elif i.op == Op.RSA:
        alpha = sp[i.a]
        out = [rsa_word(sp[i.dst + j], alpha, sp[i.src + j], sp[i.src + i.ld + j]) for j in range(i.len)]
        sp[i.dst:i.dst + i.len] = out
    elif i.op == Op.NRM:
        total = sp[i.st + 1]
        out = [nrm_word(sp[i.src + j], total, i.m, i.s) for j in range(i.len)]
        sp[i.dst:i.dst + i.len] = out


def run(program, config, ext=None, sp=None):
    return Machine(config).run(program, ext, sp)
