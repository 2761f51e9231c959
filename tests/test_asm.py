"""The assembler, the image formats (docs/FILES.md), the asm/disasm/run commands and Config validation."""

import dataclasses
import json
import re

import pytest
from hypothesis import given, settings, strategies as st

from ga2_sw import asm, isa
from ga2_sw import decode as dec
from ga2_sw.asm import AsmError
from ga2_cli import main
from ga2_sw.chips import chip
from ga2_sw.config import Config
from ga2_sw.isa import Op, Instr

CFG = Config()

instrs = st.sampled_from(list(Op)).flatmap(
    lambda op: st.fixed_dictionaries({name: st.integers(*isa.field_range(op, name)) for name, _ in isa.FIELDS[op]})
    .map(lambda f: Instr(op, **f)))


def ragged_program():
    w = dec.make_workload(CFG, 4, 16, 9100)
    return dec.program(CFG, [0, 1, 2, 3], [3, 9, 1, 14], dec.rq_params(w))


# -- round trips -----------------------------------------------------------------------------------------

def test_round_trip_of_a_ragged_decode_program():
    p = ragged_program()
    text = asm.format_program(p)
    assert asm.parse(text) == p
    assert asm.parse(text, CFG) == p              # and it passes validation against the configuration
    assert len(text.splitlines()) == len(p)


@settings(max_examples=150, deadline=None)
@given(st.lists(instrs, max_size=20))
def test_round_trip_of_random_instructions(p):
    assert asm.parse(asm.format_program(p)) == p


@settings(max_examples=100, deadline=None)
@given(instrs, st.randoms(use_true_random=False))
def test_fields_in_any_order_case_and_hex(instr, rnd):
    fields = [f"{n}={v:#x}" if v >= 0 and rnd.random() < 0.5 else f"{n}={v}" for n, v in instr.fields()]
    rnd.shuffle(fields)
    mnemonic = "".join(c.lower() if rnd.random() < 0.5 else c for c in instr.op.name)
    line = "   ".join([mnemonic] + fields) + "   # trailing comment"
    assert asm.parse(f"# header\n\n{line}\n   \n") == [instr]


def test_signed_and_explicit_plus():
    assert asm.parse("RQ dst=1 src=+2 len=0x3 m=-0x10 s=0") == [isa.rq(1, 2, 3, -16, 0)]


@settings(max_examples=50, deadline=None)
@given(st.lists(instrs, max_size=30))
def test_image_round_trip(tmp_path_factory, p):
    path = tmp_path_factory.mktemp("img") / "p.hex"
    asm.save_image(path, asm.to_words(p))
    words = asm.load_image(path)
    assert words == [isa.encode(i) for i in p]
    assert [isa.decode(w)[0] for w in words] == p


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.just(0), st.integers(0, 0xFFFFFFFF)), max_size=300), st.integers(0, 50))
def test_mem_round_trip(tmp_path_factory, words, spare):
    path = tmp_path_factory.mktemp("mem") / "m.hex"
    asm.save_mem(path, words)
    assert asm.load_mem(path, len(words) + spare) == words + [0] * spare


def test_save_mem_skips_zero_runs(tmp_path):
    words = [1] + [0] * 100 + [2, 0, 3] + [0] * 50
    asm.save_mem(tmp_path / "m.hex", words)
    lines = (tmp_path / "m.hex").read_text().splitlines()
    assert lines[1:] == ["00000001", "@65", "00000002", "00000000", "00000003"]
    assert asm.load_mem(tmp_path / "m.hex", len(words)) == words


def test_load_mem_readmemh_style(tmp_path):
    (tmp_path / "m.hex").write_text("// comment\n0000000a 0000000b  # two on a line\n@10\nFFFFFFFF\n\n@2 0000000c\n")
    mem = asm.load_mem(tmp_path / "m.hex", 32)
    assert mem[:4] == [10, 11, 12, 0] and mem[16] == 0xFFFFFFFF and sum(1 for v in mem if v) == 4


# -- assembler errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("line, message", [
    ("LD dst:3 src=0 len=1", r"^prog\.s:3: LD: malformed token 'dst:3': expected name=value"),
    ("LD dst= src=0 len=1", r"^prog\.s:3: LD: malformed token 'dst='"),
    ("LD =3 src=0 len=1", r"^prog\.s:3: LD: malformed token '=3'"),
    ("LDX dst=0", r"^prog\.s:3: unknown opcode 'LDX' \(known: LD ST MM RQ SM HALT SMC RSA NRM\)$"),
    ("LD dst=1 src=2", r"^prog\.s:3: LD: missing field 'len'$"),
    ("MM dst=0 A=0 B=0 M=1 K=1 N=1", r"^prog\.s:3: MM: missing field 'tb' \(also missing: lda ldb ldc\)$"),
    ("LD dst=1 src=2 len=3 foo=1", r"^prog\.s:3: LD: unknown field 'foo' \(fields: dst src len\)$"),
    ("LD dst=1 src=2 len=3 dst=4", r"^prog\.s:3: LD: duplicate field 'dst'$"),
    ("LD dst=0x1g src=0 len=1", r"^prog\.s:3: LD: field 'dst' must be an integer \(decimal or 0x hex\), not '0x1g'$"),
    ("LD dst=1.5 src=0 len=1", r"field 'dst' must be an integer"),
    ("LD dst=0b11 src=0 len=1", r"field 'dst' must be an integer"),
    ("LD dst=-1 src=0 len=1", r"^prog\.s:3: LD: field 'dst' must be in range 0\.\.65535, not -1$"),
    ("RQ dst=0 src=0 len=1 m=40000 s=0", r"^prog\.s:3: RQ: field 'm' must be in range -32768\.\.32767, not 40000$"),
    ("MM dst=0 A=0 B=0 M=256 K=1 N=1 tb=0 lda=0 ldb=0 ldc=0", r"field 'M' must be in range 0\.\.255, not 256$"),
    ("MM dst=0 A=0 B=0 M=1 K=1 N=1 tb=2 lda=0 ldb=0 ldc=0", r"field 'tb' must be in range 0\.\.1, not 2$"),
    ("HALT now=1", r"^prog\.s:3: HALT: unknown field 'now' \(fields: none\)$"),
    ("MM dst=0 A=0 B=0 m=1 K=1 N=1 tb=0 lda=0 ldb=0 ldc=0", r"MM: unknown field 'm' \(fields: dst A B M K N tb lda ldb ldc rb sa\)"),
])
def test_syntax_errors(line, message):
    with pytest.raises(AsmError, match=message):
        asm.parse(f"# test\n\n{line}\n", filename="prog.s")


@pytest.mark.parametrize("line, message", [
    ("MM dst=0 A=0 B=0 M=5 K=1 N=1 tb=0 lda=0 ldb=0 ldc=0", r"^prog\.s:2: MM: field 'M' must be in range 1\.\.4 \(rows\), not 5$"),
    ("MM dst=0 A=0 B=0 M=0 K=1 N=1 tb=0 lda=0 ldb=0 ldc=0", r"field 'M' must be in range 1\.\.4 \(rows\), not 0$"),
    ("MM dst=0 A=0 B=0 M=1 K=1 N=9 tb=0 lda=0 ldb=0 ldc=0", r"field 'N' must be in range 1\.\.4 \(cols\), not 9$"),
    ("MM dst=0 A=0 B=0 M=1 K=0 N=1 tb=0 lda=0 ldb=0 ldc=0", r"field 'K' must be in range 1\.\.65535, not 0$"),
    ("LD dst=0 src=0 len=0", r"^prog\.s:2: LD: field 'len' must be in range 1\.\.65535, not 0$"),
    ("SM dst=0 src=0 len=65", r"SM: field 'len' must be in range 1\.\.64 \(sm_max_len\), not 65$"),
    ("RQ dst=0 src=0 len=1 m=1 s=48", r"RQ: field 's' must be in range 0\.\.47, not 48$"),
    ("LD dst=4090 src=0 len=16", r"^prog\.s:2: LD: field 'dst'=4090 touches scratchpad words 4090\.\.4105, outside "
                                 r"the scratchpad's range 0\.\.4095 \(sp_words=4096\)$"),
    ("LD dst=0 src=8190 len=16", r"LD: field 'src'=8190 touches external memory words 8190\.\.8205, outside the "
                                 r"external memory's range 0\.\.8191 \(ext_words=8192\)$"),
    ("ST src=0 dst=8190 len=16", r"ST: field 'dst'=8190 touches external memory words 8190\.\.8205"),
    ("MM dst=0 A=4095 B=0 M=1 K=2 N=1 tb=0 lda=0 ldb=0 ldc=0", r"MM: field 'A'=4095 touches scratchpad words 4095\.\.4096"),
    ("MM dst=0 A=0 B=4090 M=1 K=2 N=1 tb=0 lda=0 ldb=8 ldc=0", r"MM: field 'B'=4090 touches scratchpad words 4090\.\.4098"),
    ("MM dst=4090 A=0 B=0 M=2 K=1 N=2 tb=0 lda=0 ldb=0 ldc=8", r"MM: field 'dst'=4090 touches scratchpad words 4090\.\.4099"),
    ("RQ dst=4095 src=0 len=2 m=1 s=0", r"RQ: field 'dst'=4095 touches scratchpad words 4095\.\.4096"),
    # the sequencer's order: SHAPE before SP_RANGE before EXT_RANGE
    ("LD dst=5000 src=9000 len=0", r"field 'len' must be in range 1\.\.65535, not 0$"),
    ("LD dst=4095 src=8191 len=2", r"field 'dst'=4095 touches scratchpad"),
])
def test_configuration_errors(line, message):
    text = f"HALT\n{line}\nHALT\n"
    assert len(asm.parse(text)) == 3                 # syntactically fine
    with pytest.raises(AsmError, match=message):
        asm.parse(text, CFG, filename="prog.s")


def test_configuration_errors_follow_the_configuration():
    big = chip("chapter8").config
    line = "MM dst=0 A=0 B=0 M=8 K=1 N=8 tb=0 lda=0 ldb=0 ldc=8\nLD dst=4090 src=8190 len=16"
    assert len(asm.parse(line, big)) == 2
    with pytest.raises(AsmError, match=r"<string>:1: MM: field 'M' must be in range 1\.\.4 \(rows\), not 8"):
        asm.parse(line, CFG)


def test_asm_error_is_a_value_error():
    assert issubclass(AsmError, ValueError)


# -- image errors ----------------------------------------------------------------------------------------

HEADER = "# GA-2 program image: 2 instructions\n"
HALT = "00000000000000000000000000000006"


@pytest.mark.parametrize("text, message", [
    (HEADER + HALT + "\n" + HALT[:-1] + "\n", r"p\.hex:3: instruction must be 32 hex digits, not 31"),
    (HEADER + HALT + "\n" + HALT + "0\n", r"p\.hex:3: instruction must be 32 hex digits, not 33"),
    (HEADER + HALT + "\n" + HALT[:-1] + "g\n", r"p\.hex:3: instruction must be 32 hex digits, not '0+g' \(non-hex"),
    (HEADER + "# comment\n" + HALT + "\n", r"p\.hex: truncated program image: the header \(line 1\) announces 2 "
                                            r"instructions, the file holds 1"),
    (HEADER + (HALT + "\n") * 3, r"p\.hex:4: more instructions than the 2 the header \(line 1\) announces"),
    (HALT + "\n", r"p\.hex:1: program image has no header line"),
    ("", r"p\.hex: program image has no header line"),
])
def test_bad_images(tmp_path, text, message):
    (tmp_path / "p.hex").write_text(text)
    with pytest.raises(AsmError, match=message):
        asm.load_image(tmp_path / "p.hex")


def test_truncated_image_of_a_real_program(tmp_path):
    p = ragged_program()
    asm.save_image(tmp_path / "p.hex", asm.to_words(p))
    text = (tmp_path / "p.hex").read_text()
    (tmp_path / "cut.hex").write_text(text[:len(text) // 2])           # cut in the middle of a line
    with pytest.raises(AsmError, match=r"cut\.hex:\d+: instruction must be 32 hex digits"):
        asm.load_image(tmp_path / "cut.hex")
    (tmp_path / "cut.hex").write_text("".join(text.splitlines(True)[:-5]))  # whole lines missing
    with pytest.raises(AsmError, match=rf"truncated program image: the header \(line 1\) announces {len(p)}"):
        asm.load_image(tmp_path / "cut.hex")


def test_missing_file():
    with pytest.raises(AsmError, match=r"nowhere\.hex: cannot read"):
        asm.load_image("nowhere.hex")


@pytest.mark.parametrize("text, size, message", [
    ("0000000a\n000000b\n", 8, r"m\.hex:2: word must be 8 hex digits, not 7"),
    ("0000000a\n0000000x\n", 8, r"m\.hex:2: word must be 8 hex digits, not '0000000x' \(non-hex"),
    ("00000001\n" * 5, 4, r"m\.hex:5: too many words: the memory holds 4 \(0\.\.3\)"),
    ("@8\n", 8, r"m\.hex:1: address @8 \(8\) is outside the memory, 0\.\.7"),
    ("@zz\n", 8, r"m\.hex:1: address '@zz' must be '@' and hex digits"),
])
def test_bad_memory_images(tmp_path, text, size, message):
    (tmp_path / "m.hex").write_text(text)
    with pytest.raises(AsmError, match=message):
        asm.load_mem(tmp_path / "m.hex", size)


def test_save_rejects_bad_words(tmp_path):
    with pytest.raises(ValueError, match="32-bit"):
        asm.save_mem(tmp_path / "m.hex", [1, -1])
    with pytest.raises(ValueError, match="128-bit"):
        asm.save_image(tmp_path / "p.hex", [1 << 128])


# -- the commands ------------------------------------------------------------------------------------------

def test_asm_disasm_run_commands(tmp_path, capsys):
    w = dec.make_workload(CFG, 2, 4, 5)
    p = dec.program(CFG, [0, 1], [1, 1], dec.rq_params(w))
    (tmp_path / "p.s").write_text("# a batch of two at token 1\n" + asm.format_program(p))
    asm.save_mem(tmp_path / "ext.hex", dec.ext_image(w))
    assert main(["asm", str(tmp_path / "p.s"), "-o", str(tmp_path / "p.hex")]) == 0
    assert asm.load_image(tmp_path / "p.hex") == asm.to_words(p)
    capsys.readouterr()
    assert main(["disasm", str(tmp_path / "p.hex")]) == 0
    assert asm.parse(capsys.readouterr().out) == p
    assert main(["run", str(tmp_path / "p.hex"), "--ext", str(tmp_path / "ext.hex"), "--ext-out",
                 str(tmp_path / "out.hex"), "--json", str(tmp_path / "r.json"), "--mode", CFG.mode.value]) == 0
    out = capsys.readouterr().out
    from ga2_sw.machine import Machine
    r = Machine(CFG).run(p, dec.ext_image(w))
    c = r.counters
    assert f"cycles {c.cycles}  mm {c.mm}  dma {c.dma}  vec {c.vec}  instructions {c.instructions}" in out
    assert f"error NONE  pc {len(p) - 1}" in out
    assert asm.load_mem(tmp_path / "out.hex", CFG.ext_words) == r.ext
    assert json.loads((tmp_path / "r.json").read_text())["counters"]["cycles"] == c.cycles


def test_commands_report_errors_on_one_line(tmp_path, capsys):
    (tmp_path / "bad.s").write_text("LD dst=0 src=0 len=1\nMM dst=0 A=0 B=0 M=5 K=1 N=1 tb=0 lda=0 ldb=0 ldc=0\n")
    assert main(["asm", str(tmp_path / "bad.s"), "-o", str(tmp_path / "bad.hex")]) == 2
    err = capsys.readouterr().err.strip()
    assert re.fullmatch(r"ga2 asm: error: .*bad\.s:2: MM: field 'M' must be in range 1\.\.4 \(rows\), not 5", err)
    assert not (tmp_path / "bad.hex").exists()
    # with --rows 8 the same file assembles
    assert main(["asm", str(tmp_path / "bad.s"), "-o", str(tmp_path / "ok.hex"), "--rows", "8"]) == 0
    (tmp_path / "t.hex").write_text("# GA-2 program image: 2 instructions\n" + HALT + "\n")
    assert main(["disasm", str(tmp_path / "t.hex")]) == 2
    assert "truncated program image" in capsys.readouterr().err


def test_disasm_marks_illegal_words_and_run_reports_faults(tmp_path, capsys):
    (tmp_path / "t.hex").write_text("# GA-2 program image: 3 instructions\n"
                                    "00000000000000000000000000000106\n" + "0" * 32 + "\n" + HALT + "\n")
    assert main(["disasm", str(tmp_path / "t.hex")]) == 0
    assert capsys.readouterr().out.splitlines() == ["# illegal: 0x00000000000000000000000000000106",
                                                    "# illegal: 0x00000000000000000000000000000000", "HALT"]
    assert main(["run", str(tmp_path / "t.hex")]) == 1
    assert "error ILLEGAL  pc 0" in capsys.readouterr().out
    (tmp_path / "f.s").write_text("LD dst=4090 src=0 len=16\nHALT\n")
    assert main(["run", str(tmp_path / "f.s")]) == 1
    out = capsys.readouterr().out
    assert "cycles 3  mm 0  dma 0  vec 0  instructions 0" in out and "error SP_RANGE  pc 0" in out


# -- Config validation ---------------------------------------------------------------------------------

def test_config_rows_zero():
    with pytest.raises(ValueError, match=r"^Config field 'rows' must be in range 1\.\.32, not 0$"):
        Config(rows=0)


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(Config) if f.name not in ("mode", "memory")])
def test_every_config_field_is_range_checked(name):
    lo, hi = Config.field_range(name)
    for bad in (lo - 1, hi + 1):
        with pytest.raises(ValueError, match=rf"^Config field '{name}' must be in range {lo}\.\.{hi}, not {bad}$"):
            Config(**{name: bad})
    for bad in ("4", 4.0, True, None):
        with pytest.raises(ValueError, match=rf"^Config field '{name}' must be an integer in range {lo}\.\.{hi}"):
            Config(**{name: bad})


def test_config_mode_is_one_of_the_modes():
    assert Config.field_range("mode") == ("inorder", "decoupled")
    for bad in ("decouple", "", None, 1):
        with pytest.raises(ValueError, match=r"^Config field 'mode' must be one of inorder, decoupled, not "):
            Config(mode=bad)
    assert Config.from_dict(json.loads(Config(mode="decoupled").to_json())).decoupled


def test_config_memory_is_ideal_or_a_dram_grade():
    assert Config.field_range("memory") == ("ideal", "ddr3-1600", "ddr3-800")
    for bad in ("ddr4", "", None, 1):
        with pytest.raises(ValueError, match=r"^Config field 'memory' must be one of ideal, ddr3-1600, ddr3-800, not "):
            Config(axi=1, memory=bad)


def test_config_cross_field_and_unknown_fields():
    with pytest.raises(ValueError, match=r"'sm_max_len' must be at least max_ctx \(16\)"):
        Config(sm_max_len=8)
    with pytest.raises(ValueError, match=r"Unknown config field\(s\) 'row'"):
        Config.from_dict({"row": 4})
    assert Config.from_dict(json.loads(Config(rows=2).to_json())) == Config(rows=2)
