"""The one configuration object shared by the software model and the hardware generator."""

from dataclasses import dataclass, fields, asdict, replace
import enum
import json

from .dram import MEMORIES

__all__ = ["Config", "DEFAULT", "Mode", "MODES", "MEMORIES", "BUS_BYTES", "WORKLOAD_FIELDS", "FEATURE_FIELDS", "memory_words",
           "sized_memories"]


class Mode(enum.Enum):
    """Execution modes (docs/ARCHITECTURE.md)."""
    #: One instruction at a time, as the chapter's chip runs.
    INORDER = "inorder"
    #: The DMA runs beside the compute units under a hardware scoreboard, and the matrix unit reads a whole
    #: k-slice per cycle.
    DECOUPLED = "decoupled"


MODES = tuple(mode.value for mode in Mode)     # the names the command line and JSON use

# The external data widths the chip is built for, in int8 elements (bytes) per beat: 1 is the chapter's port,
# one element per 32-bit word; the others pack bytes (docs/ISA.md, "Packed external memory").
BUS_BYTES = (1, 4, 8, 16)

# The fields that reach no RTL: the workload a chip is measured on (the decode head's shape and context) and the
# testbench around it (what answers the AXI4 port, its write latency, the clock its timing and the reports use).
# Every other field is hardware: ``Config.hardware()`` alone determines the Verilog.
WORKLOAD_FIELDS = ("d_model", "d", "max_ctx", "memory", "clock_mhz", "ext_write_latency")

# Hardware fields that switch on a feature added after chips were measured without it: while off they are left
# out of ``Config.hardware()`` (so of the Verilog's header and every cache key), and a chip without the feature
# keeps its Verilog and its recorded datasheet byte for byte.
FEATURE_FIELDS = ("st_words", "wide_scores")

# (minimum, maximum) of every integer field; the maxima follow from the instruction encoding (16-bit
# scratchpad addresses and lengths, 8-bit M and N, 12-bit strides) or from what the RTL is built and tested
# for: external addresses are 32 bits (docs/ISA.md), external memory is held to 2^26 words (256 MiB, the
# simulation harnesses' image) until a real memory system replaces the harness's.
_RANGES = {
    "rows":        (1, 32),
    "cols":        (1, 32),
    "sp_words":    (64, 65536),
    "ext_words":   (64, 1 << 26),
    "imem_words":  (2, 65536),
    "ext_latency": (1, 64),
    "sm_max_len":  (1, 1024),
    "d_model":     (1, 4095),
    "d":           (1, 4095),
    "max_ctx":     (1, 4096),
    "sp_banks":    (4, 64),
    "online_unit": (0, 1),
    "bus_bytes":   (1, 16),
    "axi":         (0, 1),
    "row_writes":  (0, 1),
    "row_b":       (0, 1),
    "rq_overlap":  (0, 1),
    "rq_lanes":    (1, 16),
    "sm_lanes":    (1, 2),
    "ld_overlap":  (0, 1),
    "st_words":    (0, 1),
    "wide_scores": (0, 1),
    "ext_write_latency": (1, 64),
    "clock_mhz":   (1, 1000),
}

# The fields that take a name, and their allowed names.
_CHOICES = {"mode": MODES, "memory": MEMORIES}

_HELP = {
    "rows": "rows R of the systolic array (also the largest batch)",
    "cols": "columns C of the systolic array",
    "sp_words": "scratchpad size in 32-bit words",
    "ext_words": "external memory size in elements (32-bit words; bytes with bus_bytes > 1)",
    "imem_words": "instruction memory size in 128-bit instructions",
    "ext_latency": "cycles from an external read request to its data",
    "sm_max_len": "longest softmax (SM len) the softmax unit buffers",
    "d_model": "model width of the decode workload",
    "d": "head dimension of the decode workload",
    "max_ctx": "longest context (tokens) the decode layouts hold (above sm_max_len: online_unit=1 streams it)",
    "sp_banks": "scratchpad banks of the decoupled chip (a power of two; docs/ARCHITECTURE.md)",
    "online_unit": "1: build the long-context instructions SMC, RSA, NRM (docs/LONG_CONTEXT.md)",
    "bus_bytes": "int8 elements per external-memory beat: 1 is the chapter's one element per 32-bit word; 4, 8 "
                 "or 16 pack bytes (decoupled mode; docs/ISA.md, \"Packed external memory\")",
    "row_writes": "1: the matrix unit writes a row of an MM's results a cycle (up to cols words, one per bank) "
                  "rather than one result a cycle (decoupled mode, sp_banks > cols; docs/ARCHITECTURE.md)",
    "row_b": "1: MM takes the rb flag (row i of A multiplies a B operand of its own, i*lda words past B) and "
             "the sa flag (every row takes A's row 0), one read port per array cell; the decode step's attention "
             "then takes a key or value tile a row (decoupled mode; docs/ISA.md)",
    "rq_overlap": "1: an RQ may start while the RQ before it is still writing, from the cycle after that RQ's "
                  "last read (the requantiser holds two; decoupled mode; docs/ARCHITECTURE.md)",
    "rq_lanes": "elements an RQ reads, requantises and writes a cycle (1, 2, 4, 8 or 16, at most sp_banks / 4; "
                "above 1 the overlapped requantiser's lanes: rq_overlap = 1; docs/ARCHITECTURE.md)",
    "sm_lanes": "scores the softmax reads a cycle in its max and exp passes (1 or 2; 2: decoupled mode, "
                "SM busy 2 ceil(len/2) + len + overhead; docs/ARCHITECTURE.md)",
    "ld_overlap": "1: an LD may start while the LD before it is still writing, from the cycle after that LD's "
                  "last request (the DMA holds two; decoupled mode, bare packed port; docs/ARCHITECTURE.md)",
    "st_words": "1: ST takes the wd flag, storing whole 32-bit words (four bytes each) through the packed "
                "port, so int32 results leave the chip (bus_bytes > 1; docs/ISA.md)",
    "wide_scores": "1: SMC takes the ws flag, reading each score as two int32 planes ld words apart, 128 x high + "
                   "low: wide keys' scores without an RSA to add them (online_unit = 1; docs/ISA.md)",
    "axi": "1: the external port is an AXI4 manager (bursts, valid/ready on every channel; docs/ARCHITECTURE.md)",
    "ext_write_latency": "with axi = 1: cycles from a write burst's last beat to its answer on B",
    "clock_mhz": "the chip's clock in MHz, as the external memory's timing sees it (with a DRAM memory)",
    "memory": "what answers the AXI4 port in simulation and the cycle model: the ideal memory (ext_latency, "
              "ext_write_latency) or a DRAM speed grade's timing (ga2_sw/dram.py; needs axi = 1)",
    "mode": "execution mode: inorder (one instruction at a time) or decoupled (DMA beside compute)",
}


@dataclass(frozen=True)
class Config:
    """GA-2 generator and workload parameters.

    Frozen and validated on construction: a bad value raises ``ValueError`` naming the field, the value
    and the allowed range. ``ga2_hdl`` builds its circuit from the same object that ``ga2_sw`` uses to
    validate, run and time programs.
    """
    rows: int = 4
    cols: int = 4
    sp_words: int = 4096
    ext_words: int = 8192
    imem_words: int = 1024
    ext_latency: int = 4
    sm_max_len: int = 64
    d_model: int = 16
    d: int = 16
    max_ctx: int = 16
    sp_banks: int = 8
    online_unit: int = 0
    bus_bytes: int = 1
    axi: int = 0
    row_writes: int = 0
    row_b: int = 0
    rq_overlap: int = 0
    rq_lanes: int = 1
    sm_lanes: int = 1
    ld_overlap: int = 0
    st_words: int = 0
    wide_scores: int = 0
    ext_write_latency: int = 1
    clock_mhz: int = 100
    memory: str = "ideal"
    mode: Mode = Mode.INORDER

    def __post_init__(self):
        self._check_fields()
        self._check_port()
        self._check_lanes()
        self._check_memory_and_attention()

    def _check_fields(self):
        """Each field on its own: a name among its choices, an integer in its range."""
        if not isinstance(self.mode, Mode):
            if self.mode not in MODES:
                raise ValueError(f"Config field 'mode' must be one of {', '.join(MODES)}, not {self.mode!r}")
            object.__setattr__(self, "mode", Mode(self.mode))   # the names of the command line and JSON
        if self.memory not in MEMORIES:
            raise ValueError(f"Config field 'memory' must be one of {', '.join(MEMORIES)}, not {self.memory!r}")
        for f in fields(self):
            if f.name in _CHOICES:
                continue
            value = getattr(self, f.name)
            lo, hi = _RANGES[f.name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"Config field '{f.name}' must be an integer in range {lo}..{hi}, not {value!r}")
            if not lo <= value <= hi:
                raise ValueError(f"Config field '{f.name}' must be in range {lo}..{hi}, not {value!r}")

    def _check_port(self):
        """The banks and the external port: a power of two of banks that divides the scratchpad, a beat the
        chip is built for, and the packed port's own rules."""
        if self.sp_banks & (self.sp_banks - 1):
            raise ValueError(f"Config field 'sp_banks' must be a power of two in range 4..64, not {self.sp_banks!r}")
        if self.mode is Mode.DECOUPLED and self.sp_words % self.sp_banks:
            raise ValueError(f"Config field 'sp_banks' must divide sp_words ({self.sp_words}) in decoupled mode, "
                             f"not {self.sp_banks!r}")
        if self.bus_bytes not in BUS_BYTES:
            raise ValueError(f"Config field 'bus_bytes' must be one of {', '.join(map(str, BUS_BYTES))}, "
                             f"not {self.bus_bytes!r}")
        self._check_packed_port()

    def _check_lanes(self):
        """The lanes and overlaps, each on the decoupled chip's banked scratchpad, whose ports they need."""
        if self.row_writes:
            # A row's words are written in one cycle through one port-B requester each: only the banked
            # scratchpad has the ports, and N <= cols consecutive words take distinct banks while cols < sp_banks.
            self._needs_banks("row_writes", 0, "a row's writes")
            if self.cols >= self.sp_banks:
                raise ValueError(f"Config field 'row_writes' needs cols ({self.cols}) less than sp_banks "
                                 f"({self.sp_banks}), so that a row's words take distinct banks")
        if self.row_b:
            # Each cell's B operand is read through a port-B requester of its own: only the banked scratchpad
            # has the ports.
            self._needs_banks("row_b", 0, "per-cell B operands")
        if self.rq_overlap:
            # Two RQs in the requantiser at once share port B's banks as one RQ's reads and writes do: the
            # banked scratchpad's arbitration (ga2_sw.banking.rq_follow_wait) is the decoupled chip's.
            self._needs_banks("rq_overlap", 0, "overlapped RQs")
        if self.rq_lanes > 1:
            # Each lane reads and writes through port-B requesters of its own, consecutive words on distinct banks.
            # With at most sp_banks / 4 lanes, a write skew and a following RQ's wait of at most two cycles keep
            # every cycle's reads and writes apart (ga2_sw.banking.rq_write_skew; a test walks every case).
            if self.rq_lanes & (self.rq_lanes - 1):
                raise ValueError(f"Config field 'rq_lanes' must be a power of two in range 1..16, "
                                 f"not {self.rq_lanes!r}")
            if not self.rq_overlap:
                raise ValueError(f"Config field 'rq_lanes' must be 1 without rq_overlap (the lanes are the "
                                 f"overlapped requantiser's), not {self.rq_lanes!r}")
            if 4 * self.rq_lanes > self.sp_banks:
                raise ValueError(f"Config field 'rq_lanes' must be at most sp_banks / 4 ({self.sp_banks // 4}), "
                                 f"not {self.rq_lanes!r}")
        if self.sm_lanes > 1:
            # The second lane reads through a port-B requester of its own (consecutive words, distinct banks).
            self._needs_banks("sm_lanes", 1, "two scores a cycle")
        if self.ld_overlap:
            # The next LD's requests go out while the last one's beats still come in: the packed DMA of the bare
            # port, whose memory answers in a fixed time, keeps the older LD's write side apart.
            self._needs_banks("ld_overlap", 0, "overlapped LDs")
            if self.bus_bytes == 1 or self.axi:
                raise ValueError(f"Config field 'ld_overlap' needs the bare packed port (bus_bytes > 1, axi = 0; "
                                 f"here bus_bytes = {self.bus_bytes}, axi = {self.axi}), not {self.ld_overlap!r}")

    def _check_memory_and_attention(self):
        """What answers the port, and what the attention's instructions need."""
        if self.memory != "ideal" and not self.axi:
            raise ValueError(f"Config field 'memory' must be ideal on the bare port (a DRAM answers the AXI4 port: "
                             f"axi = 1), not {self.memory!r}")
        if self.wide_scores and not self.online_unit:
            raise ValueError(f"Config field 'wide_scores' needs the online unit (online_unit = 1), whose SMC "
                             f"reads the scores, not {self.wide_scores!r}")
        if self.sm_max_len < self.max_ctx and not self.online_unit:
            # (with the online unit, attention streams the context in chunks of at most sm_max_len)
            raise ValueError(f"Config field 'sm_max_len' must be at least max_ctx ({self.max_ctx}) so attention "
                             f"over a full context fits the softmax unit, not {self.sm_max_len!r}")

    def _check_packed_port(self):
        """The packed port's rules (``bus_bytes`` > 1) and ST's whole words, which only it has."""
        if self.bus_bytes > 1:
            # A beat's elements are written to (read from) the scratchpad in one cycle, each through its own
            # port-A requester: only the banked scratchpad has the ports, and consecutive addresses take
            # distinct banks only while a beat spans fewer than sp_banks of them (ga2_sw.banking).
            self._needs_banks("bus_bytes", 1, "packed beats")
            if self.bus_bytes >= self.sp_banks:
                raise ValueError(f"Config field 'bus_bytes' must be less than sp_banks ({self.sp_banks}), "
                                 f"not {self.bus_bytes!r}")
            if self.ext_words % self.bus_bytes:
                raise ValueError(f"Config field 'ext_words' must be a multiple of bus_bytes ({self.bus_bytes}), "
                                 f"not {self.ext_words!r}")
        elif self.st_words:
            raise ValueError(f"Config field 'st_words' needs the packed port (bus_bytes > 1, where ST stores a "
                             f"word's low byte; at bus_bytes 1 it stores whole words already), not {self.st_words!r}")

    def _needs_banks(self, field, off, what):
        """``field`` asks for ports only the decoupled chip's banked scratchpad has: ``off`` in inorder mode."""
        if self.mode is not Mode.DECOUPLED:
            raise ValueError(f"Config field '{field}' must be {off} in inorder mode ({what} need the decoupled "
                             f"chip's banked scratchpad), not {getattr(self, field)!r}")

    # -- derived figures ------------------------------------------------------------------------------
    @property
    def peak_macs_per_cycle(self):
        return self.rows * self.cols

    @property
    def max_batch(self):
        return self.rows

    def replace(self, **changes):
        return replace(self, **changes)

    def with_largest_memories(self):
        """This chip with the largest scratchpad, external and instruction memories any chip has: what a
        program is built on before the memories are sized to it (``memory_words``)."""
        return replace(self, **{name: _RANGES[name][1] for name in ("sp_words", "ext_words", "imem_words")})

    def to_dict(self):
        return {**asdict(self), "mode": self.mode.value}

    def hardware(self):
        """The fields that reach the RTL, as ``to_dict`` gives them: all but ``WORKLOAD_FIELDS``, and a
        ``FEATURE_FIELDS`` switch only where it is on. Two configurations with the same hardware have the same
        Verilog."""
        return {k: v for k, v in self.to_dict().items()
                if k not in WORKLOAD_FIELDS and not (k in FEATURE_FIELDS and not v)}

    def to_json(self):
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d):
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"Unknown config field(s) {', '.join(map(repr, unknown))}; known: "
                             f"{', '.join(f.name for f in fields(cls))}")
        return cls(**d)

    @staticmethod
    def field_help():
        return dict(_HELP)

    @staticmethod
    def field_range(name):
        """(minimum, maximum) of an integer field; the tuple of allowed names of ``mode`` or ``memory``."""
        return _CHOICES[name] if name in _CHOICES else _RANGES[name]

    @property
    def decoupled(self):
        return self.mode is Mode.DECOUPLED


DEFAULT = Config()


def memory_words(needed, least=1):
    """The smallest power of two that holds ``needed`` words, at least ``least``: a memory sized to a program."""
    return max(least, 1 << (needed - 1).bit_length())


def sized_memories(needed, given, least, what, error=ValueError):
    """The memory fields of a command that sizes them to its program: for each field ``name`` of ``needed``
    (name -> words the program needs), the value ``given`` (name -> words, or None: not given), else
    ``memory_words(needed, least[name])``. A given value too small raises ``error``, one line naming the option
    and what needs more (``what``: "a prefill of 64 tokens ... on 4x4")."""
    fields = {}
    for name, words in needed.items():
        value = given.get(name)
        if value is not None and value < words:
            raise error(f"--{name.replace('_', '-')} is {value}, but {what} needs {words} (leave it out to size it)")
        fields[name] = value if value is not None else memory_words(words, least[name])
    return fields
