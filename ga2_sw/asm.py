"""GA-2 assembly text, program images and memory images (docs/FILES.md).

Assembly: one instruction per line, ``MNEMONIC name=value ...`` with the field names of ``isa.FIELDS`` in
any order, ``#`` starting a comment. ``parse`` turns text into ``Instr`` objects and, given a ``Config``,
also rejects every instruction the sequencer would fault on, naming the line, the field and the allowed
range. ``format_program`` is the inverse (``parse(format_program(p)) == p``).

Program images hold encoded 128-bit instructions, memory images 32-bit words, both as hex text. Every
reader error is an ``AsmError`` (a ``ValueError``) that names the file and the line."""

import re

from . import isa
from .isa import Op, Err, Instr
from .numerics import MAX_SHIFT
from .packing import WORD_BYTES
from .options import atomic_write

__all__ = ["AsmError", "parse", "format_program", "format_instr", "to_words", "save_image", "load_image",
           "save_mem", "load_mem", "IMAGE_HEADER", "MEM_HEADER"]

IMAGE_HEADER = "GA-2 program image"
MEM_HEADER = "GA-2 memory image"

_INT = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|[0-9]+)\Z")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_HEX = re.compile(r"[0-9a-fA-F]+\Z")


class AsmError(ValueError):
    """Bad assembly text or a bad image file. The message starts with ``file:line:``."""


def _int(text):
    """Decimal or 0x hex, optionally signed; None when the text is neither."""
    if not _INT.match(text):
        return None
    sign = -1 if text[0] == "-" else 1
    body = text.lstrip("+-")
    return sign * (int(body, 16) if body[:2].lower() == "0x" else int(body, 10))


def _strip_comment(line, markers=("#",)):
    cut = min((line.find(m) for m in markers if m in line), default=-1)
    return (line if cut < 0 else line[:cut]).strip()


# -- assembly text ---------------------------------------------------------------------------------------

def parse(text, config=None, filename="<string>"):
    """Assembly text -> list of Instr. With ``config``, also validate every instruction against it."""
    program = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw)
        if not line:
            continue
        where = f"{filename}:{lineno}"
        instr = _parse_line(line, where)
        if config is not None:
            problem = _config_problem(instr, config)
            if problem:
                raise AsmError(f"{where}: {instr.op.name}: {problem}")
        program.append(instr)
    return program


def _parse_line(line, where):
    mnemonic, *tokens = line.split()
    try:
        op = Op[mnemonic.upper()]
    except KeyError:
        raise AsmError(f"{where}: unknown opcode {mnemonic!r} (known: {' '.join(o.name for o in Op)})") from None
    known = [name for name, _ in isa.FIELDS[op]]
    values = {}
    for token in tokens:
        name, eq, value = token.partition("=")
        if not eq or not _NAME.match(name) or not value:
            raise AsmError(f"{where}: {op.name}: malformed token {token!r}: expected name=value "
                           f"(fields: {' '.join(known) or 'none'})")
        if name not in known:
            raise AsmError(f"{where}: {op.name}: unknown field {name!r} (fields: {' '.join(known) or 'none'})")
        if name in values:
            raise AsmError(f"{where}: {op.name}: duplicate field {name!r}")
        number = _int(value)
        if number is None:
            raise AsmError(f"{where}: {op.name}: field {name!r} must be an integer (decimal or 0x hex), "
                           f"not {value!r}")
        lo, hi = isa.field_range(op, name)
        if not lo <= number <= hi:
            raise AsmError(f"{where}: {op.name}: field {name!r} must be in range {lo}..{hi}, not {number}")
        values[name] = number
    missing = [name for name in known if name not in values and name not in isa.OPTIONAL_FIELDS]
    if missing:
        raise AsmError(f"{where}: {op.name}: missing field {missing[0]!r}"
                       + (f" (also missing: {' '.join(missing[1:])})" if missing[1:] else ""))
    return Instr(op, **values)


def _config_problem(i, config):
    """Why the sequencer would fault on ``i`` under ``config`` (same decision and order as isa.check),
    phrased per field; "" when it would not."""
    err = isa.check(i, config)
    if err == Err.NONE:
        return ""
    unbuilt = isa.unbuilt_fields(i, isa.features_of(config))
    if err == Err.ILLEGAL and unbuilt:      # a flag of hardware this chip is built without
        option = isa.OPTIONAL_FIELDS[unbuilt[0]].value
        return (f"field {unbuilt[0]!r}={getattr(i, unbuilt[0])} needs a chip built with {option}=1 "
                f"(--mode decoupled --{option.replace('_', '-')} 1, Config field {option!r}; docs/ISA.md)")
    if err == Err.ILLEGAL:          # an instruction of a unit this chip is built without
        return (f"{i.op.name} needs the online unit (--online-unit 1, Config field 'online_unit'; "
                f"docs/LONG_CONTEXT.md)")
    if err == Err.SHAPE:
        if i.op == Op.MM:
            for name, lo, hi, what in (("M", 1, config.rows, " (rows)"), ("N", 1, config.cols, " (cols)"),
                                       ("K", 1, isa.field_range(Op.MM, "K")[1], "")):
                if not lo <= getattr(i, name) <= hi:
                    return f"field {name!r} must be in range {lo}..{hi}{what}, not {getattr(i, name)}"
        if i.len == 0:
            hi = config.sm_max_len if i.op in isa.LEN_LIMITED else isa.field_range(i.op, "len")[1]
            return f"field 'len' must be in range 1..{hi}, not 0"
        if i.s > isa.MAX_SHIFTS.get(i.op, MAX_SHIFT):
            return f"field 's' must be in range 0..{isa.MAX_SHIFTS[i.op]}, not {i.s}"
        if i.wd and i.dst % WORD_BYTES:
            return (f"field 'dst' must be a multiple of {WORD_BYTES} in an ST of whole words (wd=1), not {i.dst}")
        if i.op in isa.LEN_LIMITED:
            return f"field 'len' must be in range 1..{config.sm_max_len} (sm_max_len), not {i.len}"
    if err == Err.OVERLAP:
        return (f"fields 'dst'={i.dst} and 'src'={i.src} with 'len'={i.len}: the destination overlaps the source "
                f"without being it (RQ's dst must equal src or differ from it by at least len)")
    for name, memory, lo, hi in _footprints(i):
        size = config.sp_words if memory == "scratchpad" else config.ext_words
        if hi >= size and (err == Err.SP_RANGE) == (memory == "scratchpad"):
            return (f"field {name!r}={getattr(i, name)} touches {memory} words {lo}..{hi}, outside the "
                    f"{memory}'s range 0..{size - 1} ({'sp_words' if memory == 'scratchpad' else 'ext_words'}="
                    f"{size})")
    return isa.explain(i, config)           # not reached while _footprints mirrors isa.footprints


def _footprints(i):
    """(address field, memory, lo, hi) of every range an instruction touches; hi inclusive."""
    sp, ext = isa.footprints(i)
    spec = isa.OPS[i.op]
    return ([(n, "scratchpad", lo, hi) for (n, _), (lo, hi) in zip(spec.sp, sp)]
            + [(n, "external memory", lo, hi) for (n, _), (lo, hi) in zip(spec.ext, ext)])


def format_instr(instr):
    """One line of assembly, fields in assembly order."""
    return str(instr)


def format_program(instrs):
    """Assembly text of a program: one line per instruction."""
    return "".join(format_instr(i) + "\n" for i in instrs)


# -- program images ---------------------------------------------------------------------------------------

def to_words(instrs):
    """Encode a program: one 128-bit integer per instruction (integers are passed through)."""
    return [w if isinstance(w, int) else isa.encode(w) for w in instrs]


def save_image(path, words):
    """Write a program image: a header comment with the count, then one instruction per line as 32 hex
    digits, most significant first."""
    words = to_words(words)
    for n, w in enumerate(words):
        if not 0 <= w < 1 << isa.INSTR_BITS:
            raise ValueError(f"Instruction {n} must be a {isa.INSTR_BITS}-bit unsigned integer, not {w!r}")
    with atomic_write(path) as f:
        f.write(f"# {IMAGE_HEADER}: {len(words)} instructions, 32 hex digits each (bit 127 first)\n")
        for w in words:
            f.write(f"{w:032x}\n")


_IMAGE_COUNT = re.compile(r"#\s*" + re.escape(IMAGE_HEADER) + r":\s*(\d+)\s+instructions?\b")


def load_image(path):
    """Read a program image written by ``save_image``; 128-bit integers (not yet decoded)."""
    words, count, header_line = [], None, None
    for lineno, raw in enumerate(_read_lines(path), 1):
        match = _IMAGE_COUNT.match(raw.strip())
        if match and count is None and not words:
            count, header_line = int(match.group(1)), lineno
            continue
        line = _strip_comment(raw)
        if not line:
            continue
        where = f"{path}:{lineno}"
        if count is None:
            raise AsmError(f"{where}: program image has no header line '# {IMAGE_HEADER}: N instructions' "
                           f"before its first instruction")
        if not _HEX.match(line):
            raise AsmError(f"{where}: instruction must be 32 hex digits, not {line!r} (non-hex characters)")
        if len(line) != 32:
            raise AsmError(f"{where}: instruction must be 32 hex digits, not {len(line)} ({line!r})")
        if len(words) == count:
            raise AsmError(f"{where}: more instructions than the {count} the header (line {header_line}) announces")
        words.append(int(line, 16))
    if count is None:
        raise AsmError(f"{path}: program image has no header line '# {IMAGE_HEADER}: N instructions'")
    if len(words) != count:
        raise AsmError(f"{path}: truncated program image: the header (line {header_line}) announces {count} "
                       f"instructions, the file holds {len(words)}")
    return words


def _read_lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError as exc:
        raise AsmError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise AsmError(f"{path}: not a text file") from None


# -- memory images ----------------------------------------------------------------------------------------

_ZERO_RUN = 16          # save_mem replaces a run of at least this many zero words by an @ADDR jump


def save_mem(path, words32):
    """Write a memory image: one 8-hex-digit word per line, ``@ADDR`` (hex) jumping over runs of zeros
    and over the trailing zeros, which ``load_mem`` restores."""
    words32 = list(words32)
    for n, w in enumerate(words32):
        if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= 0xFFFFFFFF:
            raise ValueError(f"Memory word {n} must be a 32-bit unsigned integer, not {w!r}")
    lines = [f"# {MEM_HEADER}: {len(words32)} words, 8 hex digits each; @ADDR (hex) sets the next address"]
    addr, expect = 0, 0
    while addr < len(words32):
        end = addr
        while end < len(words32) and words32[end] == 0:
            end += 1
        if end - addr >= _ZERO_RUN or end == len(words32):
            addr = end
            continue
        if addr != expect:
            lines.append(f"@{addr:x}")
        lines.append(f"{words32[addr]:08x}")
        addr += 1
        expect = addr
    with atomic_write(path) as f:
        f.write("\n".join(lines) + "\n")


def load_mem(path, size):
    """Read a memory image into ``size`` words (unwritten words are 0). ``#`` and ``//`` start comments."""
    mem, addr = [0] * size, 0
    for lineno, raw in enumerate(_read_lines(path), 1):
        line = _strip_comment(raw, ("#", "//"))
        if not line:
            continue
        where = f"{path}:{lineno}"
        for token in line.split():
            if token.startswith("@"):
                if not _HEX.match(token[1:]):
                    raise AsmError(f"{where}: address {token!r} must be '@' and hex digits")
                addr = int(token[1:], 16)
                if addr >= size:
                    raise AsmError(f"{where}: address {token} ({addr}) is outside the memory, 0..{size - 1}")
                continue
            if not _HEX.match(token):
                raise AsmError(f"{where}: word must be 8 hex digits, not {token!r} (non-hex characters)")
            if len(token) != 8:
                raise AsmError(f"{where}: word must be 8 hex digits, not {len(token)} ({token!r})")
            if addr >= size:
                raise AsmError(f"{where}: too many words: the memory holds {size} (0..{size - 1})")
            mem[addr] = int(token, 16)
            addr += 1
    return mem
