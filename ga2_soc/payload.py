"""What the SoC's firmware runs, as a table in the ROM beside it, and what it must leave behind.

The firmware (``firmware/main.c``) is compiled once and knows nothing of GA-2's programs: it reads a table
written at ``PAYLOAD_OFFSET`` in the ROM, copies its external-memory image into DRAM, then loads and runs each of
its programs in turn through GA-2's host registers and prints, after each, the status, the six counters and the
whole external memory. A new program needs neither the RISC-V compiler nor a new Verilator build: only a new
ROM image.

The table, little-endian 32-bit words (``firmware/payload.h`` reads the same layout)::

    magic "GA2P", version, ext_bytes, ext_offset, programs,
    then per program: instructions, offset    (offsets from the table's start, in bytes)
    ... the image (ext_bytes), each program's instructions (four words each, bits 31:0 first)

``expected`` gives what the reference machine leaves after each program (memory, error, pc) and the counters
every memory gives alike (``MEMORY_FREE_COUNTERS``), from ``ga2_sw`` alone."""

import struct
from dataclasses import dataclass, replace

from ga2_sw import decode as dec, isa
from ga2_sw.cycles import cycle_counts
from ga2_sw.machine import Machine
from ga2_sw.packing import element_bytes, held_image
from ga2_sw.workloads import decode_table_programs

__all__ = ["MAGIC", "VERSION", "PAYLOAD_OFFSET", "ROM_BYTES", "MEMORY_FREE_COUNTERS", "Program", "Payload",
           "decode_step_payload", "PayloadTooLarge"]

MAGIC = 0x50324147              # "GA2P" in memory order
VERSION = 1
# The SoC's ROM: the firmware (about 1.2 KiB), then the table (the axi chip's: 10 KiB). 32 KiB is 16 of an
# ECP5's block RAMs; at 128 KiB the ULX3S build missed 50 MHz (45.5 MHz, the CPU's bus spread over 120 BRAMs).
ROM_BYTES = 0x8000
PAYLOAD_OFFSET = 0x2000         # where the table starts: the firmware must end before it
# Counters that do not depend on the memory behind the AXI4 port: the vector lane's busy time, the instructions,
# and the DMA's busy time less its stall cycles (the busy time an ideal memory gives: the stall count is defined
# as the difference, ga2_sw.cycles.ExternalPort.stall). Not the matrix unit's: a decoupled chip's MM streams
# beside the DMA, and the banks its reads share with the DMA's writes depend on when the memory's beats come.
MEMORY_FREE_COUNTERS = ("vec", "instructions", "dma_less_stall")


class PayloadTooLarge(ValueError):
    """The table does not fit the ROM behind the firmware."""


@dataclass(frozen=True)
class Program:
    """A program the firmware runs: its ``name``, its instructions and what the reference machine says of it
    run after the programs before it: ``ext`` (the external memory as bytes), ``error``, ``pc`` and the
    memory-free counters (``MEMORY_FREE_COUNTERS``, from the cycle model with an ideal memory)."""
    name: str
    instrs: tuple
    ext: bytes
    error: int
    pc: int
    counters: dict


@dataclass(frozen=True)
class Payload:
    """The image the programs start from (``image``, bytes) and the ``programs`` run on it in order; the first
    is a decode step of ``batch`` sequences whose outputs must be ``reference`` (each sequence's int8 output from
    ``ga2_sw.decode.int_reference``: plain Python integers, no instructions, no addresses)."""
    chip: str
    config: object
    batch: int
    image: bytes
    programs: tuple
    reference: tuple

    def step_outputs(self, ext):
        """Each sequence's int8 output as the decode step left it in the memory ``ext`` (bytes)."""
        elements = list(ext) if element_bytes(self.config) == 1 else \
            [int.from_bytes(ext[i:i + 4], "little") for i in range(0, len(ext), 4)]
        return tuple(tuple(dec.outputs(self.config, elements, b)) for b in range(self.batch))

    def table(self):
        """The table as the ROM holds it (bytes), or PayloadTooLarge."""
        head = 5 * 4 + 8 * len(self.programs)
        blobs, offsets, at = [self.image], [], head + len(self.image)
        for p in self.programs:
            words = b"".join(isa.encode(i).to_bytes(16, "little") for i in p.instrs)
            offsets.append((len(p.instrs), at))
            blobs.append(words)
            at += len(words)
        table = struct.pack("<5I", MAGIC, VERSION, len(self.image), head, len(self.programs))
        table += b"".join(struct.pack("<2I", n, off) for n, off in offsets) + b"".join(blobs)
        room = ROM_BYTES - PAYLOAD_OFFSET
        if len(table) > room:
            raise PayloadTooLarge(f"the payload takes {len(table):,} bytes; the ROM has {room:,} after the firmware")
        return table


def _bytes(words, config):
    """The external memory as the SoC's DRAM holds it: bytes, packed or as little-endian 32-bit words."""
    if element_bytes(config) == 1:
        return bytes(w & 0xFF for w in words)
    return b"".join((w & 0xFFFFFFFF).to_bytes(4, "little") for w in words)


def _run(config, name, instrs, ext):
    result = Machine(config).run(list(instrs), ext)
    ideal, _, _ = cycle_counts(list(instrs), replace(config, memory="ideal"))
    counters = {"vec": ideal.vec, "instructions": ideal.instructions,
                "dma_less_stall": ideal.dma - ideal.stall}
    return Program(name, tuple(instrs), _bytes(result.ext, config), int(result.error), result.pc, counters), \
        list(result.ext)


def decode_step_payload(chip_name, config, batch):
    """The chip's decode step of ``batch`` sequences (all at token max_ctx; ``ga2 decode-table``'s row), then a
    program that faults: an LD past the external memory (EXT_RANGE at pc 1), whose error the firmware must
    read back."""
    if not 1 <= batch <= config.rows:
        raise ValueError(f"batch {batch}: 1..{config.rows} (the chip's rows)")
    seed = 4242                                     # decode_table_programs' workload
    step = decode_table_programs(config, seed=seed, batches=[batch])[0]
    ext = held_image(step.ext, config)
    ext = ext + [0] * (config.ext_words - len(ext))
    first, after = _run(config, step.name, step.program, ext)
    fault = [isa.ld(dst=0, src=0, len=4), isa.ld(dst=0, src=config.ext_words - 2, len=16), isa.halt()]
    second, _ = _run(config, "a fault: an LD past the external memory", fault, after)
    workload = dec.make_workload(config, batch, config.max_ctx, seed)
    reference = tuple(tuple(dec.int_reference(workload, b, config.max_ctx)) for b in range(batch))
    return Payload(chip_name, config, batch, _bytes(ext, config), (first, second), reference)
