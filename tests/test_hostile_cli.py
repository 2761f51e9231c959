"""Every subcommand of the three command lines (``ga2``, ``python -m ga2_hdl``, ``python -m synth``) against
hostile arguments: no command ends in a traceback.

The commands and their options are not listed here: they are read from the parsers the three ``main``
functions build (the parser is caught as ``main`` hands it the command line). Each option of each
subcommand in turn gets each hostile value (zero, negative, huge, non-numeric, empty, a missing folder, a
directory, a binary file, a missing file, an unwritable path; a value given to a flag), the other options
keeping their defaults, and ``main(argv)`` runs in-process in an empty working folder under a time limit.
A refused value must end in exactly one line on stderr (``PROG COMMAND: error: ...``), nothing on stdout,
exit status 2 (README, "Exit statuses"), no traceback, no file left behind, within the time limit.

A value the option's own validator accepts (a valid seed of 0, a writable output name) would start real
work, so it is skipped; but each kind of validator must refuse the values that are never valid for it
(``MUST_REFUSE``), so a validator that lets them through fails here too. An option without a validator of
``ga2_sw.options`` (a bare ``type=int``, or none) gets every hostile value and must refuse them all.

Every simulator of the registry is also given a cycle limit too small for its program (exit status 3), made
to look missing (4) and given a program longer than its instruction memory (2): one line naming it.

The default tier (the ten core values on every option where it first appears, three of them on one in eight of
the places where the same option repeats on another subcommand, such as the configuration options) takes well
under a minute; ``-m slow`` gives every repeat its three, every option the rest of the core values and more
(floats, NaN, infinities, hex, full-width digits, NUL bytes, newlines, a FIFO, a device, a path through a file,
...) and runs one hostile call of every subcommand as a real process. ``GA2_HOSTILE_TIMEOUT`` sets the time
limit per call (default 20 s); ``GA2_HOSTILE_STATS=FILE`` counts the calls.
"""

import argparse
import contextlib
import functools
import importlib
import io
import os
import re
import signal
import subprocess
import sys
import traceback

import pytest

ENTRY_POINTS = {                             # prog: module with main(argv)
    "ga2": "ga2_cli",
    "python -m ga2_hdl": "ga2_hdl.commands",
    "python -m synth": "synth.__main__",
}
PROCESS = {                                  # how each entry point runs as a process
    "ga2": [sys.executable, "-m", "ga2_cli"],
    "python -m ga2_hdl": [sys.executable, "-m", "ga2_hdl"],
    "python -m synth": [sys.executable, "-m", "synth"],
}
TIMEOUT = float(os.environ.get("GA2_HOSTILE_TIMEOUT", "20"))      # seconds per call; a hang fails
EXIT_USAGE = 2                               # README, "Exit statuses"

# -- the hostile values ---------------------------------------------------------------------------------------

CORE = {
    "zero": "0",
    "negative": "-1",
    "huge": "1" + "0" * 30,
    "non-numeric": "abc",
    "empty": "",
    "missing folder": "no_such_folder/out.json",
    "directory": "a-folder",
    "binary file": "binary.bin",
    "missing file": "no_such_file.txt",
    "unwritable": "/proc/ga2-hostile.json",
}
EXTRA = {
    "fraction": "1.5",
    "nan": "nan",
    "infinity": "inf",
    "overflow": "1e400",
    "negative float": "-0.5",
    "hex": "0x10",
    "full-width digits": "\uff11\uff12",
    "underscores": "1_000",
    "very long": "9" * 5000,
    "NUL byte": "a\0b",
    "newline": "bad\nvalue",
    "dash": "-",
    "double dash": "--",
    "path through a file": "binary.bin/out.json",
    "trailing slash": "new-folder/",
    "FIFO": "a-fifo",
    "device": "/dev/zero",
    "empty file": "empty.txt",
    "proc file": "/proc/version",
}
FLAG_VALUE = "flag given a value"

# What each kind of validator (``ga2_sw.options``, its ``kind``) must refuse whatever its range: these
# values are never valid for it. (A seed may be 0 and an output may be called 'abc': range-dependent
# values are left to the validator.)
_NOT_A_NUMBER = set(CORE) - {"zero"} | set(EXTRA) - {"fraction", "negative float", "dash", "double dash"}
MUST_REFUSE = {
    "prompt": {"empty", "NUL byte", "very long"},
    "int": _NOT_A_NUMBER | {"fraction", "negative float", "dash", "double dash"},
    "int_list": _NOT_A_NUMBER | {"fraction", "negative float", "dash", "double dash"},
    "float": set(CORE) - {"zero", "negative", "huge"} | {"nan", "infinity", "overflow", "NUL byte", "hex",
                                                       "very long", "newline", "dash", "double dash"},
    "input": set(CORE) | set(EXTRA) - {"empty file", "proc file"},
    "output": {"empty", "missing folder", "directory", "unwritable", "NUL byte", "path through a file",
               "trailing slash", "FIFO", "device", "proc file"},
    # (a folder under a missing one is made with it, as mkdir -p makes it: a valid output folder)
    "output_dir": {"empty", "binary file", "unwritable", "NUL byte", "path through a file",
                   "FIFO", "device", "proc file", "empty file"},
    "identifier": set(CORE) - {"non-numeric"} | set(EXTRA) - {"nan", "infinity"},
    "name": set(CORE) | set(EXTRA),
}


def _fixtures(folder):
    """What the hostile values name, in the working folder of a call."""
    os.makedirs(os.path.join(folder, "a-folder"), exist_ok=True)
    with open(os.path.join(folder, "binary.bin"), "wb") as f:
        f.write(bytes(range(256)) * 4)
    open(os.path.join(folder, "empty.txt"), "w").close()
    if not os.path.exists(os.path.join(folder, "a-fifo")):
        os.mkfifo(os.path.join(folder, "a-fifo"))


# -- the parsers, caught from main ----------------------------------------------------------------------------

class _Caught(BaseException):
    pass


@functools.lru_cache(maxsize=None)
def _parser_of(prog):
    """The parser ``main`` builds, caught when it is asked to parse."""
    module = importlib.import_module(ENTRY_POINTS[prog])
    original = argparse.ArgumentParser.parse_args

    def catch(self, *args, **kwargs):
        raise _Caught(self)
    argparse.ArgumentParser.parse_args = catch
    try:
        module.main(["--help"])
    except _Caught as caught:
        return caught.args[0]
    finally:
        argparse.ArgumentParser.parse_args = original
    raise AssertionError(f"{prog}: main() never parsed its command line")


def _subcommands(parser):
    """Every subcommand by its words ("run", "llm generate"): a command with commands of its own is their group,
    not one of them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            out = {}
            for name, sub in action.choices.items():
                nested = _subcommands(sub)
                out.update({f"{name} {n}": s for n, s in nested.items()} if nested else {name: sub})
            return out
    return {}


def _options(sub):
    """The actions of a subcommand a user can give a value (or a flag) to."""
    return [a for a in sub._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def _name(action):
    return max(action.option_strings, key=len) if action.option_strings else action.metavar or action.dest


def _signature(prog, action):
    """Options with one signature (name, type, range, choices, help) are one option given to several
    subcommands (the configuration options, most --json); the default tier sweeps each one fully once."""
    v = action.type
    return (prog, _name(action), action.dest, action.nargs, getattr(v, "kind", getattr(v, "__name__", None)),
            v.describe() if hasattr(v, "describe") else None, tuple(action.choices or ()), action.help)


def _collect():
    """(prog, command, option, first): ``first`` is false for an option whose signature an earlier
    subcommand of the same entry point already has."""
    out, seen = [], set()
    for prog in ENTRY_POINTS:
        for command, sub in _subcommands(_parser_of(prog)).items():
            for action in _options(sub):
                sig = _signature(prog, action)
                out.append((prog, command, _name(action), sig not in seen))
                seen.add(sig)
    return out


COMBOS = _collect()
# The default tier gives an option seen before on another subcommand only these values; the slow tier the rest.
SAMPLE = ("huge", "missing folder", "empty")


# -- one call -------------------------------------------------------------------------------------------------

class _Timeout(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Timeout()


def _files(folder):
    found = set()
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            found.add(os.path.relpath(os.path.join(root, name), folder))
    return found


def run_main(prog, argv):
    """(status, stdout, stderr, problem) of ``main(argv)`` in this process; problem: a traceback or a hang."""
    module = importlib.import_module(ENTRY_POINTS[prog])
    out, err = io.StringIO(), io.StringIO()
    status, problem = None, None
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = module.main(argv)
    except SystemExit as exc:
        status = exc.code
    except _Timeout:
        problem = f"no answer within {TIMEOUT:g} s (a hang, or real work started)"
    except BaseException as exc:             # what would have been a traceback
        problem = "traceback: " + "".join(traceback.format_exception_only(type(exc), exc)).strip()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return status, out.getvalue(), err.getvalue(), problem


def _benign(action):
    """A value for a required argument that is not under test: an empty file of the kind its metavar names
    for an input, a fresh name for an output."""
    ext = re.search(r"\.\w+", action.metavar or "")
    ext = ext.group(0) if ext else ".txt"
    kind = getattr(action.type, "kind", None)
    if kind == "output" or "output" in action.dest or "out" in (action.metavar or "").lower():
        return f"benign-out{ext}"
    open(f"benign{ext}", "w").close()
    return f"benign{ext}"


def _argv(command, sub, action, value):
    """The command line: the value under test, then the required arguments with benign values."""
    argv = command.split()
    if action.option_strings:
        argv.append(f"{_name(action)}={value}")
    for other in _options(sub):
        if other is action or not (other.required or not other.option_strings):
            continue
        if other.option_strings:
            argv.append(f"{_name(other)}={_benign(other)}")
    positionals = [o for o in _options(sub) if not o.option_strings]
    if positionals:
        argv.append("--")
        argv += [value if o is action else _benign(o) for o in positionals]
    return argv


def _accepts(action, value):
    """True when the option's validator (and choices) take ``value``, False when they refuse it, None when
    the option has no validator to ask."""
    if action.nargs == 0:
        return False
    if getattr(action.type, "kind", None) is None and action.choices is None:
        return None
    try:
        converted = action.type(value) if action.type else value
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return False
    except BaseException:                    # a tool missing here: refused too, with another status
        return False
    return action.choices is None or converted in action.choices


def _one(prog, command, sub, action, category, value):
    """None when the call behaves, else what went wrong."""
    kind = getattr(action.type, "kind", None)
    accepted = _accepts(action, value)
    if accepted and category in MUST_REFUSE.get(kind, ()):
        return f"the {kind} validator accepts a {category} value {value!r}"
    if accepted:
        return "skipped"                     # a valid value: real work would start
    argv = _argv(command, sub, action, value)
    before = _files(".")
    status, out, err, problem = run_main(prog, argv)
    left = sorted(_files(".") - before)
    for path in left:                        # clean up for the next call
        full = os.path.join(".", path)
        if os.path.isfile(full):
            os.unlink(full)
    where = f"{prog} {' '.join(map(repr, argv))}"
    if problem:
        return f"{where}: {problem}"
    lines = err.splitlines()
    if "Traceback" in err:
        return f"{where}: a traceback on stderr: {err[-300:]!r}"
    if len(lines) != 1:
        return f"{where}: {len(lines)} lines on stderr, not one: {err[:300]!r}"
    if not re.fullmatch(rf"{re.escape(prog)}( {re.escape(command)})?: error: \S.*", lines[0]):
        return f"{where}: the error line is not 'PROG COMMAND: error: MESSAGE': {lines[0][:200]!r}"
    if status != EXIT_USAGE:
        return f"{where}: exit status {status!r}, not {EXIT_USAGE}: {lines[0][:200]!r}"
    if out:
        return f"{where}: output on stdout (work started): {out[:200]!r}"
    if left:
        return f"{where}: files left behind: {left}"
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", lines[0])) - {o for a in _options(sub) for o in a.option_strings}
    if named:
        return f"{where}: the error names options the command does not have: {sorted(named)}"
    return None


def _sweep(prog, command, option, values, tmp_path, monkeypatch):
    sub = _subcommands(_parser_of(prog))[command]
    action = next(a for a in _options(sub) if _name(a) == option)
    monkeypatch.chdir(tmp_path)
    _fixtures(tmp_path)
    if action.nargs == 0:                    # a flag: the only hostile thing is to give it a value
        values = {FLAG_VALUE: "abc"}
    failures, tried, skipped = [], 0, 0
    for category, value in values.items():
        if action.nargs == 0:
            argv = [*command.split(), f"{_name(action)}=abc"]
            status, out, err, problem = run_main(prog, argv)
            tried += 1
            if problem or status != EXIT_USAGE or len(err.splitlines()) != 1 or out:
                failures.append(f"{prog} {argv}: status {status!r}, problem {problem}, stderr {err[:300]!r}")
            continue
        result = _one(prog, command, sub, action, category, value)
        if result == "skipped":
            skipped += 1
            continue
        tried += 1
        if result:
            failures.append(f"[{category}] {result}")
    return failures, tried, skipped


def _record(tier, tried, skipped):
    """With GA2_HOSTILE_STATS=FILE, one line per test: tier, calls made, values skipped as valid."""
    path = os.environ.get("GA2_HOSTILE_STATS")
    if path:
        with open(path, "a") as f:
            f.write(f"{tier} {tried} {skipped}\n")


IDS = [f"{p.split()[-1]}-{c}-{o}" for p, c, o, _ in COMBOS]
# The default tier runs every option where it first appears and one in REPEAT_SAMPLE of its repeats on other
# subcommands (the same validator, so a sample shows the subcommand passes it on); the slow tier all of them.
REPEAT_SAMPLE = 8
DEFAULT_TIER = [pytest.param(*combo, id=name, marks=() if combo[3] or k % REPEAT_SAMPLE == 0 else pytest.mark.slow)
                for k, (combo, name) in enumerate(zip(COMBOS, IDS))]


@pytest.mark.parametrize("prog, command, option, first", DEFAULT_TIER)
def test_hostile_option(prog, command, option, first, tmp_path, monkeypatch):
    """Every option: all the core values where it first appears, a sample of them where it repeats (in the
    default tier one repeat in REPEAT_SAMPLE, in the slow tier every one)."""
    values = CORE if first else {k: CORE[k] for k in SAMPLE}
    failures, tried, skipped = _sweep(prog, command, option, values, tmp_path, monkeypatch)
    _record("default", tried, skipped)
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("prog, command, option, first", COMBOS, ids=IDS)
def test_hostile_option_every_value(prog, command, option, first, tmp_path, monkeypatch):
    """Every option: the core values the default tier leaves out, and the extra ones."""
    values = {**({} if first else {k: v for k, v in CORE.items() if k not in SAMPLE}), **EXTRA}
    failures, tried, skipped = _sweep(prog, command, option, values, tmp_path, monkeypatch)
    _record("slow", tried, skipped)
    assert not failures, "\n".join(failures)


def test_the_sweep_covers_every_subcommand():
    """The three entry points and every subcommand are in the sweep (a parser that could not be caught, or a
    subcommand without options, would silently drop out of it)."""
    commands = {(p, c) for p, c, _, _ in COMBOS}
    for prog in ENTRY_POINTS:
        subs = _subcommands(_parser_of(prog))
        assert subs, prog
        assert {(prog, c) for c in subs} <= commands


def test_every_option_has_a_validator():
    """Every option that takes a value is checked while parsing: by a validator of ``ga2_sw.options`` (it has a
    ``kind``) or by its choices. A new option with a bare ``type=int`` fails here before it can start work
    with a value out of range."""
    bare = [f"{p} {c} {o}" for p, c, o, _ in COMBOS
            for a in _options(_subcommands(_parser_of(p))[c]) if _name(a) == o
            if a.nargs != 0 and getattr(a.type, "kind", None) is None and a.choices is None]
    assert not bare, bare


@pytest.mark.parametrize("prog", ENTRY_POINTS)
def test_no_command_and_unknown_options_are_one_line(prog, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argv in ([], ["no-such-command"], ["--no-such-option"]):
        status, out, err, problem = run_main(prog, argv)
        assert problem is None and status == EXIT_USAGE and len(err.splitlines()) == 1 and not out, (argv, err)
    for command in _subcommands(_parser_of(prog)):
        status, out, err, problem = run_main(prog, [*command.split(), "--no-such-option"])
        assert problem is None and status == EXIT_USAGE and len(err.splitlines()) == 1 and not out, (command, err)
        assert err.startswith(f"{prog}: error: ") or err.startswith(f"{prog} {command}: error: ")


@pytest.mark.slow
@pytest.mark.parametrize("prog, command", sorted({(p, c) for p, c, _, _ in COMBOS}))
def test_hostile_call_as_a_process(prog, command, tmp_path, monkeypatch):
    """The real entry point as a process (through ``sys.exit(main())``): the first option of the command and
    core value its validator refuses (a command of flags only: its first flag given a value); one line, exit
    status 2, no traceback, nothing on stdout."""
    sub = _subcommands(_parser_of(prog))[command]
    monkeypatch.chdir(tmp_path)
    _fixtures(tmp_path)
    refused = [(a, v) for a in _options(sub) if a.nargs != 0 for v in CORE.values() if _accepts(a, v) is not True]
    if refused:
        argv = _argv(command, sub, *refused[0])
    else:                                    # only flags (`ga2 llm fetch --force`): a flag given a value
        argv = [*command.split(), f"{_name(_options(sub)[0])}=abc"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(PROCESS[prog] + argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == EXIT_USAGE and len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr, \
        (argv, r.returncode, r.stderr)
    assert not r.stdout


# -- every simulator: a cycle limit too small, a tool missing, a program too big --------------------------------
# The simulators come from the registry (sim/backends.py); the statuses are the README's: 3 for a hang, 4 for a
# missing tool, 2 for a bad program or image. Each is one line naming the simulator.

EXIT_HANG, EXIT_NO_TOOL = 3, 4
LONG = "MM dst=0 A=0 B=0 M=4 K=20 N=4 tb=1 lda=0 ldb=0 ldc=4\nHALT\n"       # 189 cycles


def _backends():
    from sim.backends import backend_names
    return backend_names()


def _check_one_line(status, out, err, problem, expected_status, pattern):
    assert problem is None, problem
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert status == expected_status, (status, err)
    assert re.fullmatch(pattern, err.strip()), err
    assert out == ""


def _built(name):
    """Skip when the simulator cannot run here; else build it once outside the time limit of a call: a first
    Verilator build of a new design takes longer than a call may, and what these tests time is the error path,
    not the compiler. The commands build their default chip."""
    from ga2_sw.chips import DEFAULT_CHIP, config_of
    from sim.backends import BACKENDS
    reason = BACKENDS[name].unavailable_reason()
    if reason:
        pytest.skip(reason)
    with BACKENDS[name].open(config_of(DEFAULT_CHIP)):
        pass


@pytest.mark.parametrize("name", _backends())
def test_a_cycle_limit_reached_is_one_line_naming_the_simulator(name, tmp_path, monkeypatch):
    _built(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "long.s").write_text(LONG)
    _check_one_line(*run_main("ga2", ["run", "long.s", "--sim", name, "--cycle-limit", "100"]), EXIT_HANG,
                    rf"ga2 run: error: {name}: program did not halt within 100 cycles \(pc=\d, cycles counter=\d+\)")


@pytest.mark.parametrize("name", _backends())
def test_a_missing_simulator_is_one_line_naming_it(name, tmp_path, monkeypatch):
    """Every simulator through the registry's one availability check, as if its tool were not installed."""
    from sim.backends import BACKENDS
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.s").write_text("HALT\n")
    monkeypatch.setattr(type(BACKENDS[name]), "unavailable_reason", lambda self: "its tool is not installed")
    _check_one_line(*run_main("ga2", ["run", "p.s", "--sim", name]), EXIT_NO_TOOL,
                    rf"ga2 run: error: {name}: its tool is not installed")


def test_simulators_missing_from_an_empty_path(tmp_path, monkeypatch):
    """No iverilog and no C++ compiler on PATH: every command that takes a simulator refuses Icarus and
    Verilator before any work, in one line."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    (tmp_path / "p.s").write_text("HALT\n")
    for argv, name in ((["run", "p.s", "--sim", "icarus"], "icarus"),
                       (["run", "p.s", "--sim", "verilator"], "verilator"),
                       (["decode-table", "--sim", "icarus"], "icarus"),
                       (["decode-table", "--sim", "verilator", "--no-fallback"], "verilator"),
                       (["check-batching", "--sim", "icarus"], "icarus"),
                       (["bench-sim", "--sims", "model,icarus"], "icarus"),
                       (["fuzz", "--sim", "verilator"], "verilator")):
        _check_one_line(*run_main("ga2", argv), EXIT_NO_TOOL, rf"ga2 {argv[0]}: error: {name}: .+")


@pytest.mark.parametrize("name", _backends())
def test_a_program_too_big_is_one_line_naming_the_simulator(name, tmp_path, monkeypatch):
    """1,025 instructions for an instruction memory of 1,024 words."""
    _built(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "big.s").write_text("HALT\n" * 1025)
    _check_one_line(*run_main("ga2", ["run", "big.s", "--sim", name]), EXIT_USAGE,
                    rf"ga2 run: error: {name}: Program has 1025 instructions but instruction memory holds 1024")
