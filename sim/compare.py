"""Comparing two runs of a program: the differences between a reference ``Result`` and a simulator's as
readable lines (``compare_results``), and programs and words printed for such reports."""

from ga2_sw import isa
from ga2_sw.asm import to_words
from ga2_sw.cycles import Counters

__all__ = ["compare_results", "format_words", "format_program", "COUNTERS"]

COUNTERS = tuple(Counters.__dataclass_fields__)          # cycles, mm, dma, vec, instructions


def format_words(words, limit=8):
    """``[(address, word)]`` as ``[a] 0x...`` items, the first ``limit`` of them."""
    return ", ".join(f"[{a}] {w:#010x}" for a, w in words[:limit]) + (" ..." if len(words) > limit else "")


def _name(error):
    return getattr(error, "name", error)


def compare_results(ref, got, check_sp=True):
    """Differences between two Results as readable lines; [] when they agree: the external memory (and the
    scratchpad unless ``check_sp`` is false), all six counters, error and pc, and none of the simulator's
    own alarms (a hang, external accesses beyond the memory, debug-port mismatches) was raised."""
    if getattr(got, "hang", False):
        return [f"the simulator did not halt (pc={got.pc}); the reference halted with {_name(ref.error)} at pc {ref.pc}"]
    diffs = []
    for name in COUNTERS:
        a, b = getattr(ref.counters, name), getattr(got.counters, name)
        if a != b:
            diffs.append(f"counter {name}: reference {a}, simulator {b}")
    if int(ref.error) != int(got.error):
        diffs.append(f"error: reference {_name(ref.error)} ({int(ref.error)}), simulator "
                     f"{_name(got.error)} ({int(got.error)})")
    if ref.pc != got.pc:
        diffs.append(f"pc: reference {ref.pc}, simulator {got.pc}")
    for name in ("ext", "sp") if check_sp else ("ext",):
        a, b = getattr(ref, name), getattr(got, name)
        if b is None:
            diffs.append(f"{name}: the simulator returned no image")
            continue
        if len(a) != len(b):
            diffs.append(f"{name}: reference has {len(a)} words, simulator {len(b)}")
        bad = [(i, x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y]
        if bad:
            diffs.append(f"{name}: {len(bad)} words differ; reference " + format_words([(i, x) for i, x, _ in bad])
                         + "; simulator " + format_words([(i, y) for i, _, y in bad]))
    if getattr(got, "ext_oob", 0):
        diffs.append(f"the chip made {got.ext_oob} external accesses beyond the memory")
    if getattr(got, "sp_port_mismatch", 0):
        diffs.append(f"{got.sp_port_mismatch} scratchpad words read through dbg_sp_data differ from the memory")
    return diffs


def format_program(program):
    """Assembly of a program; raw words that do not decode are shown as ``.word 0x...`` with the reason."""
    lines = []
    for pc, word in enumerate(to_words(program)):
        instr, err = isa.decode(word)
        text = str(instr) if instr is not None else f".word {word:#034x}    # {err.name}"
        lines.append(f"{pc:4d}: {text}")
    return "\n".join(lines)
