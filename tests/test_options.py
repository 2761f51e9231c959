"""The command lines' shared parts (ga2_sw/options.py): the validators, atomic outputs, the exit statuses of
every simulator backend (a hang, a missing tool, a bad image: one line naming the backend), the help texts
and the README's table of exit statuses. The sweep of every option with hostile values is in
tests/test_hostile_cli.py."""

import argparse
import os
import re
from pathlib import Path

import pytest

from ga2_sw.config import Config
from ga2_cli import main
from ga2_sw.options import (EXIT_FAULT, EXIT_HANG, EXIT_OK, EXIT_STATUSES, EXIT_USAGE, Float,
                            Identifier, InputFile, Int, IntList, OutputDir, OutputFile, Parser, atomic_write,
                            one_line, savefig)

README = Path(__file__).resolve().parent.parent / "README.md"


def refused(validator, value):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        validator(value)
    return str(info.value)


# -- validators -----------------------------------------------------------------------------------------------

def test_numbers_name_their_range():
    v = Int(1, 100)
    assert v("7") == 7 and v(" 100 ") == 100
    for bad in ("0", "101", "-1", "abc", "", "1.5", "0x10", "1_0", "\uff11", "9" * 5000):
        assert "1..100" in refused(v, bad)
    f = Float(0, 1e3, lo_open=True)
    assert f("1e3") == 1000.0
    for bad in ("0", "-1", "nan", "inf", "-inf", "1e400", "", "x", "1001"):
        assert "0 < x <= 1000" in refused(f, bad)
    lst = IntList(1, 32)
    assert lst("1, 2,3,") == (1, 2, 3)
    for bad in ("", ",", "1,,2", "0", "1,33", "a,b"):
        assert "1..32" in refused(lst, bad)


def test_identifiers_are_verilog_names():
    v = Identifier()
    assert v("ga2_top") == "ga2_top" and v("_x9") == "_x9"
    for bad in ("", "9x", "a-b", "a b", "a.b", "module", "wire", "x" * 65, "\u00e9t\u00e9", "a$"):
        refused(v, bad)


def test_input_files_must_be_readable_regular_text(tmp_path):
    v = InputFile()
    (tmp_path / "ok.s").write_text("HALT\n")
    assert v(str(tmp_path / "ok.s")) == str(tmp_path / "ok.s")
    (tmp_path / "bin").write_bytes(bytes(range(256)))
    assert "not a text file" in refused(v, str(tmp_path / "bin"))
    assert "no such file" in refused(v, str(tmp_path / "none"))
    assert "is a directory" in refused(v, str(tmp_path))
    os.mkfifo(tmp_path / "fifo")
    assert "not a regular file" in refused(v, str(tmp_path / "fifo"))      # reading it would block
    assert "not a regular file" in refused(v, "/dev/zero")                 # reading it would never end

    def decode(path):
        raise ValueError(f"{path}:1: bad")
    assert refused(InputFile(decode=decode), str(tmp_path / "ok.s")) == f"{tmp_path / 'ok.s'}:1: bad"


def test_output_paths_must_be_writable_files(tmp_path):
    v = OutputFile()
    assert v(str(tmp_path / "new.json")) == str(tmp_path / "new.json")
    assert "no such folder" in refused(v, str(tmp_path / "missing" / "x.json"))
    assert "is a directory" in refused(v, str(tmp_path))
    assert "is a directory" in refused(v, str(tmp_path / "new") + "/")
    (tmp_path / "file").write_text("")
    assert "not a folder" in refused(v, str(tmp_path / "file" / "x.json"))
    assert "cannot create" in refused(v, "/proc/ga2-x.json")
    assert "must end in .png, .pdf or .svg" in refused(OutputFile(suffixes=(".png", ".pdf", ".svg")),
                                                       str(tmp_path / "x.json"))
    assert OutputFile(stdout=True)("-") == "-"
    assert list(tmp_path.iterdir()) == [tmp_path / "file"]                  # the probes left nothing
    d = OutputDir()
    assert d(str(tmp_path)) == str(tmp_path) and d(str(tmp_path / "new")) == str(tmp_path / "new")
    assert "not a folder" in refused(d, str(tmp_path / "file"))
    assert d(str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")       # created with its parent, as mkdir -p
    assert "not a folder" in refused(d, str(tmp_path / "file" / "a" / "b"))
    assert "cannot create" in refused(d, "/proc/ga2-a/b")
    assert sorted(tmp_path.iterdir()) == [tmp_path / "file"]                # nothing created while checking


def test_the_parser_reports_one_line(capsys):
    p = Parser(prog="x")
    sub = p.add_subparsers(dest="command")
    s = sub.add_parser("cmd")
    s.add_argument("--n", type=Int(1, 3))
    with pytest.raises(SystemExit) as info:
        p.parse_args(["cmd", "--n", "9"])
    assert info.value.code == EXIT_USAGE
    assert capsys.readouterr().err == "x cmd: error: argument --n: must be a whole number in 1..3, not '9'\n"
    assert one_line("a\n\n  b \nc") == "a | b | c"


def test_an_option_is_never_taken_by_a_prefix(capsys):
    """`ga2 llm cycles --chip llm` is refused as an option it does not have, not read as another option that
    begins alike (its array sizes once were --chips)."""
    from ga2_cli import main
    assert main(["llm", "cycles", "--chip", "llm"]) == EXIT_USAGE
    assert "unrecognized arguments: --chip llm" in capsys.readouterr().err
    assert main(["llm", "cycles", "--size", "4", "--batches", "1", "--contexts", "16", "--no-progress"]) == EXIT_USAGE
    assert "unrecognized arguments: --size 4" in capsys.readouterr().err


# -- atomic outputs -------------------------------------------------------------------------------------------

def test_atomic_write_leaves_the_whole_file_or_nothing(tmp_path):
    path = tmp_path / "out.txt"
    with atomic_write(path) as f:
        f.write("one")
    assert path.read_text() == "one"
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    with pytest.raises(RuntimeError):
        with atomic_write(path) as f:
            f.write("half")
            raise RuntimeError("disk full")
    assert path.read_text() == "one" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    with pytest.raises(RuntimeError):
        with atomic_write(tmp_path / "new.txt") as f:
            raise RuntimeError
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_savefig_writes_the_format_of_the_suffix(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, _ = plt.subplots()
    savefig(fig, tmp_path / "a.png")
    savefig(fig, tmp_path / "a.svg")
    plt.close(fig)
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG" and b"<svg" in (tmp_path / "a.svg").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "a.svg"]


def test_a_failing_command_leaves_no_output(tmp_path, capsys):
    """A JSON value that cannot be written fails before the file; nothing half-written stays."""
    from ga2_sw.analyses.common import write_json
    with pytest.raises(TypeError):
        write_json(tmp_path / "x.json", {"a": object()})
    assert not list(tmp_path.iterdir())


# -- three bugs, each with its test -------------------------------------------------------------------------------

def test_fuzz_refuses_a_batch_of_zero(capsys):
    assert main(["fuzz", "--count", "5", "--batch", "0"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == "ga2 fuzz: error: argument --batch: must be a whole number in 1..100000, not '0'\n"


def test_decode_table_refuses_an_unwritable_json_before_the_work(tmp_path, capsys):
    path = tmp_path / "missing_folder" / "x.json"
    assert main(["decode-table", "--json", str(path)]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "missing_folder: no such folder" in err
    assert not path.parent.exists()


def test_run_writes_no_output_after_refusing_another(tmp_path, capsys):
    """--ext-out is fine, --json is not: nothing is written (before, --ext-out was written, then the JSON
    failed)."""
    (tmp_path / "p.s").write_text("HALT\n")
    assert main(["run", str(tmp_path / "p.s"), "--ext-out", str(tmp_path / "m.hex"), "--json",
                 str(tmp_path / "no" / "r.json")]) == EXIT_USAGE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.s"]
    assert main(["run", str(tmp_path / "p.s"), "--json", str(tmp_path / "r.json"), "--ext-out",
                 str(tmp_path / "r.json")]) == EXIT_USAGE
    assert "name the same file" in capsys.readouterr().err


# -- every backend ---------------------------------------------------------------------------------------------
# A hang, a missing tool and a program too big, on every backend: tests/test_hostile_cli.py.

def test_a_hang_keeps_the_waveform_up_to_the_limit(tmp_path, capsys):
    (tmp_path / "long.s").write_text("MM dst=0 A=0 B=0 M=4 K=20 N=4 tb=1 lda=0 ldb=0 ldc=4\nHALT\n")
    vcd = tmp_path / "w.vcd"
    assert main(["run", str(tmp_path / "long.s"), "--sim", "pysim", "--cycle-limit", "100", "--vcd",
                 str(vcd)]) == EXIT_HANG
    assert f"waveform up to the limit: {vcd}" in capsys.readouterr().err
    assert vcd.read_text().startswith("$") and sorted(p.name for p in tmp_path.iterdir()) == ["long.s", "w.vcd"]


def test_the_model_honours_the_cycle_limit(tmp_path, capsys):
    (tmp_path / "long.s").write_text("MM dst=0 A=0 B=0 M=4 K=20 N=4 tb=1 lda=0 ldb=0 ldc=4\nHALT\n")
    inorder = ["--mode", "inorder"]
    assert main(["run", str(tmp_path / "long.s"), "--cycle-limit", "188", *inorder]) == EXIT_HANG
    assert main(["run", str(tmp_path / "long.s"), "--cycle-limit", "189", *inorder]) == EXIT_OK
    assert "cycles 189" in capsys.readouterr().out
    # Decoupled, the commands' default: every slice's eight operands are word 0, on one bank, so MM takes
    # K + extra + 8 + M*N = 20 + 140 + 8 + 16 = 184 cycles (docs/ISA.md), and the program a cycle less than in
    # order (the HALT issues in the cycle after the MM's last).
    assert main(["run", str(tmp_path / "long.s"), "--cycle-limit", "187"]) == EXIT_HANG
    assert main(["run", str(tmp_path / "long.s"), "--cycle-limit", "188"]) == EXIT_OK
    assert "cycles 188  mm 184" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["run", "p.s"], ["asm", "p.s", "-o", "p.hex"], ["traffic"], ["latency"], ["check-batching"]])
def test_commands_build_the_decoupled_chip_unless_told(argv, tmp_path, monkeypatch):
    """The commands' --mode defaults to decoupled (the faster chip at its Fmax); --mode inorder is the chapter's."""
    from ga2_cli import build_parser
    from ga2_sw.cli import config_from_args
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.s").write_text("HALT\n")
    parser = build_parser()
    assert config_from_args(parser.parse_args(argv)).mode.value == "decoupled"
    assert config_from_args(parser.parse_args([*argv, "--mode", "inorder"])) == Config()


def test_a_faulting_program_is_status_1(tmp_path, capsys):
    (tmp_path / "f.s").write_text("LD dst=4090 src=0 len=16\nHALT\n")
    assert main(["run", str(tmp_path / "f.s")]) == EXIT_FAULT


# -- help texts and the README --------------------------------------------------------------------------------

@pytest.mark.parametrize("module", ["ga2_cli", "ga2_hdl.commands", "synth.__main__"])
def test_help_texts_name_only_options_that_exist(module, capsys):
    """Each subcommand's --help (usage, description, every option's help with its defaults filled in) names
    only options that subcommand has."""
    import importlib
    mod = importlib.import_module(module)
    parser = mod.build_parser()
    assert mod.main(["--help"]) == EXIT_OK
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    nested = {f"{name} {n}": s for name, group in commands.items() for a in group._actions
              if isinstance(a, argparse._SubParsersAction) for n, s in a.choices.items()}
    commands = {**commands, **nested}       # `ga2 llm` and `ga2 llm generate`
    capsys.readouterr()
    for command, sub in commands.items():
        assert mod.main([*command.split(), "--help"]) == EXIT_OK
        out, err = capsys.readouterr()
        assert out and not err
        options = {o for a in sub._actions for o in a.option_strings}
        named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", out))
        assert named <= options, (command, sorted(named - options))


def test_readme_documents_the_exit_statuses():
    text = README.read_text()
    section = text[text.index("## Exit statuses"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    for status in EXIT_STATUSES:
        assert re.search(rf"^\| {status} \|", section, re.M), status
