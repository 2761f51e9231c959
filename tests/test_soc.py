"""GA-2 in a LiteX SoC (ga2_soc, docs/SOC.md): the payload table the firmware reads, the ROM image, the report's
parsing and checks (each check shown to catch what it is for), the command's refusals, and the SoC itself:
VexRiscv firmware runs the axi chip's decode step through LiteDRAM's controller on Verilator, the outputs equal
the integer reference and the fault is read back."""

import json
import shutil
import struct
import subprocess
import sys

import pytest

from ga2_sw import isa
from ga2_sw.chips import config_of
from ga2_sw.isa import Err
from ga2_soc.payload import (MAGIC, PAYLOAD_OFFSET, ROM_BYTES, VERSION, PayloadTooLarge, decode_step_payload)


@pytest.fixture(scope="module")
def payload():
    return decode_step_payload("axi", config_of("axi"), 4)


def _read_table(table):
    """The table read back by the layout of ga2_soc/payload.py's docstring, with struct alone."""
    magic, version, ext_bytes, ext_offset, programs = struct.unpack_from("<5I", table, 0)
    entries = [struct.unpack_from("<2I", table, 20 + 8 * k) for k in range(programs)]
    image = table[ext_offset:ext_offset + ext_bytes]
    words = [[int.from_bytes(table[off + 16 * i:off + 16 * i + 16], "little") for i in range(n)] for n, off in entries]
    return magic, version, image, words


def test_the_table_holds_the_image_and_every_instruction(payload):
    magic, version, image, programs = _read_table(payload.table())
    assert (magic, version) == (MAGIC, VERSION) and struct.pack("<I", magic) == b"GA2P"
    assert image == payload.image and len(image) == config_of("axi").ext_words     # packed: a byte an element
    assert [[isa.decode(w)[0] for w in words] for words in programs] == [list(p.instrs) for p in payload.programs]


def test_the_step_leaves_the_integer_references_outputs(payload):
    step, fault = payload.programs
    assert payload.step_outputs(step.ext) == payload.reference
    assert payload.step_outputs(payload.image) != payload.reference     # the step writes them
    assert (step.error, step.pc) == (Err.NONE, len(step.instrs) - 1)
    assert (fault.error, fault.pc) == (Err.EXT_RANGE, 1) and fault.ext == step.ext


def test_a_table_larger_than_the_rom_is_refused():
    big = decode_step_payload("axi", config_of("axi", ext_words=1 << 17), 1)
    with pytest.raises(PayloadTooLarge, match="bytes; the ROM has"):
        big.table()


def test_the_rom_image_puts_the_table_after_the_firmware():
    from ga2_soc.simulate import rom_image
    words = rom_image(b"\x01\x02\x03\x04\x05", b"\xaa\xbb\xcc\xdd").split()
    assert len(words) == ROM_BYTES // 4
    assert words[:2] == ["04030201", "00000005"] and set(words[2:PAYLOAD_OFFSET // 4]) == {"00000000"}
    assert words[PAYLOAD_OFFSET // 4] == "ddccbbaa"


def _report(payload, ext=None, **changes):
    """What the firmware prints for ``payload`` when the SoC does exactly what the model says (or with
    ``changes`` to the first program's fields, and its memory ``ext``)."""
    lines = ["GA-2 firmware"]
    for k, p in enumerate(payload.programs):
        fields = {"program": k, "error": p.error, "pc": p.pc, "cycles": 2000, "mm_cycles": 1300,
                  "dma_cycles": p.counters["dma_less_stall"] + 150, "vec_cycles": p.counters["vec"],
                  "instructions": p.counters["instructions"], "stall_cycles": 150}
        if k == 0:
            fields.update(changes)
        lines += [f"{name}=0x{value:08x}" for name, value in fields.items()]
        memory = (ext if k == 0 and ext is not None else p.ext).hex()
        lines += ["EXT", *(memory[i:i + 64] for i in range(0, len(memory), 64)), "EXTEND"]
    return "\n".join(lines + ["END", "CYCLES=123456", ""])


def test_the_report_parses_and_a_faithful_one_passes(payload):
    from ga2_soc.simulate import check, parse
    programs, cycles = parse(_report(payload))
    assert cycles == 123456 and [p["ext"] for p in programs] == [p.ext for p in payload.programs]
    assert check(payload, programs) == []


@pytest.mark.parametrize("ext_flip, changes, says", [
    (100, {}, "1 bytes of the memory differ from the reference machine's, the first at 100"),
    (None, {"error": 1}, "error 1, the model's 0"),
    (None, {"pc": 3}, "pc 3, the model's"),
    (None, {"stall_cycles": 149}, "dma_less_stall"),
    (None, {"vec_cycles": 1}, "vec 1, the model's"),
    (None, {"instructions": 7}, "instructions 7"),
])
def test_each_check_catches_its_difference(payload, ext_flip, changes, says):
    from ga2_soc.simulate import check, parse
    ext = None
    if ext_flip is not None:
        ext = bytearray(payload.programs[0].ext)
        ext[ext_flip] ^= 1
        ext = bytes(ext)
    problems = check(payload, parse(_report(payload, ext, **changes))[0])
    assert len(problems) == 1 and says in problems[0], problems


def test_a_missing_program_is_a_difference(payload):
    from ga2_soc.simulate import check, parse
    text = _report(payload).split("program=0x00000001")[0] + "END\n"
    assert check(payload, parse(text)[0]) == ["the firmware reported 1 programs of 2"]


NEXTPNR_LOG = """\
Info: Max frequency for clock '$glbnet$VexRiscv.clk': 48.20 MHz (FAIL at 50.00 MHz)
Info: Device utilisation:
Info:             TRELLIS_IO:      34/    365     9%
Info:            TRELLIS_COMB:   18136/  83640    21%
Info:                  DP16KD:      78/    208    37%
Info:              MULT18X18D:      25/    156    16%
Info: Max frequency for clock             '$glbnet$crg_clkout1': 140.88 MHz (PASS at 100.00 MHz)
Info: Max frequency for clock '$glbnet$VexRiscv.clk': 53.01 MHz (PASS at 50.00 MHz)
"""


def test_the_place_and_route_report_is_read():
    from ga2_soc.board import parse_nextpnr
    r = parse_nextpnr(NEXTPNR_LOG, 50)
    assert (r["fmax_mhz"], r["passed"]) == (53.01, True)          # the final report, not the placer's estimate
    assert (r["luts"], r["brams"], r["multipliers"]) == (18136, 78, 25)
    assert r["clocks"]["$glbnet$crg_clkout1"] == {"fmax_mhz": 140.88, "target_mhz": 100.0, "passed": True}
    late = NEXTPNR_LOG.replace("140.88 MHz (PASS", "90.00 MHz (FAIL")
    assert parse_nextpnr(late, 50)["passed"] is False               # every clock must meet its target
    with pytest.raises(RuntimeError, match="no clock with a 25 MHz target"):
        parse_nextpnr(NEXTPNR_LOG, 25)


@pytest.mark.parametrize("argv, says", [
    (["sim", "--chip", "decoupled"], "--chip decoupled: the SoC takes a chip with an AXI4 port"),
    (["sim", "--chip", "llm"], "does not fit the SoC's ROM (--ext-words at most"),
    (["sim", "--batch", "5"], "--batch 5: 1..4"),
    (["build", "--board", "orangecrab"], "invalid choice"),
    (["build", "--sys-clk-mhz", "500"], "--sys-clk-mhz"),
])
def test_the_commands_refuse_bad_input_in_one_line(argv, says):
    out = subprocess.run([sys.executable, "-m", "ga2_cli", "soc", *argv], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and says in out.stderr, out.stderr


def _soc_tools():
    """Why the SoC cannot be simulated here, or None."""
    for module in ("litex", "litedram", "migen", "pythondata_cpu_vexriscv"):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed (pip install -e '.[soc]')"
    from sim.verilator import find_verilator
    if find_verilator() is None:
        return "no Verilator"
    from ga2_soc.simulate import riscv_compiler
    from ga2_sw.options import ToolMissing
    try:
        riscv_compiler()
    except ToolMissing as exc:
        return str(exc)
    return None if shutil.which("c++") else "no C++ compiler"


def test_the_soc_runs_the_decode_step_from_firmware(tmp_path):
    why = _soc_tools()
    if why:
        pytest.skip(why)
    out = subprocess.run([sys.executable, "-m", "ga2_cli", "soc", "sim", "--json", str(tmp_path / "soc.json")],
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout + out.stderr
    r = json.loads((tmp_path / "soc.json").read_text())
    assert r["matches_reference"] and r["differences"] == [] and r["dram"].startswith("LiteDRAM controller")
    assert r["error_program"]["error_code"] == Err.EXT_RANGE and r["error_program"]["pc"] == 1
    payload = decode_step_payload("axi", config_of("axi"), 4)
    assert [tuple(o) for o in r["outputs"]] == list(payload.reference)
    # the real controller's refreshes and row misses cost cycles the ideal memory does not
    assert r["cycles"] > r["model_cycles"] and r["counters"]["stall_cycles"] > 0
