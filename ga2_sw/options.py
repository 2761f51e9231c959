"""What the three command lines share (``ga2``, ``python -m ga2_hdl``, ``python -m synth``): the option
validators, the parser, atomic output files, the exit statuses and the one ``main`` that runs a command.

* **Validators** are argparse ``type=`` callables, so every option is checked while the command line is
  parsed, before any work starts: ``Int`` and ``Float`` (a range, given in the message), ``IntList`` (comma
  lists), ``Identifier`` (a Verilog identifier), ``InputFile`` (a regular file, readable, decodable as text
  or by a decoder of the caller's, the file named in the message), ``OutputFile`` (its folder exists and
  takes a new file, the path is not a directory), ``OutputDir``, ``Names`` and ``Parsed`` (any parse
  function that raises ``ValueError``). Each carries ``kind`` (what it checks: "int", "float", "int_list",
  "identifier", "input", "output", "output_dir", "name", "text"); tests/test_hostile_cli.py reads it.
* ``Parser`` (an ``argparse.ArgumentParser``; subparsers inherit it) reports a usage error as exactly one
  line, ``PROG: error: MESSAGE``, with no usage dump, and exit status 2.
* ``atomic_write(path)`` and ``atomic_path(path)``: every output file is written to a temporary file in its
  folder and renamed onto its name only when complete, so a failure leaves no partial file behind.
* ``run_main(parser, argv)`` parses, runs the cross-option checks (the configuration, outputs distinct from
  each other and from the inputs, then the command's own ``check``), runs the command and turns every
  exception into one line on stderr and an exit status of ``EXIT_STATUSES`` (README, "Exit statuses").
"""

import argparse
import contextlib
import math
import os
import re
import stat
import sys
import tempfile
import textwrap

__all__ = ["EXIT_OK", "EXIT_FAULT", "EXIT_USAGE", "EXIT_HANG", "EXIT_NO_TOOL", "EXIT_STATUSES", "ToolMissing", "Hang",
           "Parser", "Int", "Float", "IntList", "Text", "Identifier", "InputFile", "OutputFile", "OutputDir", "Names",
           "Parsed", "SEED", "validator_of", "need_matplotlib", "atomic_write", "atomic_path", "savefig", "one_line", "run_main"]

# -- exit statuses --------------------------------------------------------------------------------------------

EXIT_OK = 0         # done; a check found nothing
EXIT_FAULT = 1      # a check found a difference, a simulated program faulted, or the program itself failed
EXIT_USAGE = 2      # bad usage or input: an option, a value, an input file, an output path
EXIT_HANG = 3       # a simulation reached its cycle limit before the program halted
EXIT_NO_TOOL = 4    # a tool the command needs is not installed here (Verilator, Icarus, a C++ compiler, ...)

EXIT_STATUSES = {
    EXIT_OK: "success (and every check passed)",
    EXIT_FAULT: "a check found a difference, a simulated program faulted, or an internal fault",
    EXIT_USAGE: "bad usage or input (an option, a value, an input file or an output path)",
    EXIT_HANG: "a simulation reached its cycle limit before the program halted",
    EXIT_NO_TOOL: "a tool the command needs is not installed",
}


class ToolMissing(RuntimeError):
    """A tool a command needs (a simulator, a compiler, Yosys, matplotlib) is not installed: exit status 4."""


# A seed: every consumer (numpy, random, nextpnr's 32-bit int) takes this range.
SEED = (0, 2**31 - 1)


def one_line(text):
    """``text`` as one line: its lines joined with ' | ', long texts cut (a log tail must not flood)."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    text = " | ".join(lines)
    return text if len(text) <= 1000 else text[:997] + "..."


# -- the parser -----------------------------------------------------------------------------------------------

class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, without breaking lines at hyphens (which cut '--macs-per-s' in two)."""

    def _split_lines(self, text, width):
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.wrap(text, width, break_on_hyphens=False)

    def _fill_text(self, text, width, indent):
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line, ``PROG: error: MESSAGE``, exit status 2, and
    whose help never splits an option's name across lines, and which takes no option by a prefix of its name (a
    misspelt or missing option is an error, never another one that starts alike). Subparsers are of this class
    too."""

    def __init__(self, *args, formatter_class=_Formatter, allow_abbrev=False, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, allow_abbrev=allow_abbrev, **kwargs)

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}\n")

    def _get_values(self, action, arg_strings):
        # argparse (3.11) drops a '--' given as an option's value, so '--count=--' would silently be an empty
        # list (and '--only=--' no selection at all): refuse it.
        if action.option_strings and action.nargs != 0 and list(arg_strings) == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings)}: expected a value, not '--'")
        return super()._get_values(action, arg_strings)


def _bad(message):
    return argparse.ArgumentTypeError(message)


def _fmt(x):
    if isinstance(x, float):
        return f"{x:g}"
    return str(x)


class _Validator:
    kind = "text"

    def __repr__(self):                          # argparse names a type by repr in some messages
        return f"{type(self).__name__}({self.describe()})"

    def describe(self):
        return ""


def validator_of(action):
    """The ``_Validator`` of an argparse action, or None (a plain ``type=`` or none)."""
    return action.type if isinstance(action.type, _Validator) else None


class Text(_Validator):
    """Free text of 1..``max_chars`` characters, not only white space, without NUL bytes (a prompt)."""
    kind = "prompt"

    def __init__(self, max_chars):
        self.max_chars = max_chars

    def describe(self):
        return f"1..{self.max_chars:,} characters"

    def __call__(self, text):
        text = str(text)
        if not text.strip():
            raise _bad("must be some text, not nothing or only white space")
        if "\0" in text:
            raise _bad("must not hold a NUL byte")
        if len(text) > self.max_chars:
            raise _bad(f"must be at most {self.max_chars:,} characters, not {len(text):,}")
        return text


# -- numbers --------------------------------------------------------------------------------------------------

_INT = re.compile(r"[+-]?[0-9]+")


class Int(_Validator):
    """A whole number in ``lo..hi`` (decimal digits only)."""
    kind = "int"

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    def describe(self):
        return f"{self.lo}..{self.hi}"

    def __call__(self, text):
        text = str(text)
        value = None
        if _INT.fullmatch(text.strip()) and len(text.strip()) <= 40:
            value = int(text.strip())
        if value is None or not self.lo <= value <= self.hi:
            raise _bad(f"must be a whole number in {self.describe()}, not {text!r}")
        return value


class Float(_Validator):
    """A finite number in ``lo..hi``; ``lo_open`` excludes ``lo`` itself (e.g. a positive quantity)."""
    kind = "float"

    def __init__(self, lo, hi, lo_open=False):
        self.lo, self.hi, self.lo_open = lo, hi, lo_open

    def describe(self):
        return f"{_fmt(self.lo)} {'<' if self.lo_open else '<='} x <= {_fmt(self.hi)}"

    def __call__(self, text):
        text = str(text)
        try:
            value = float(text.strip()) if len(text) <= 60 else None
        except ValueError:
            value = None
        if (value is None or not math.isfinite(value) or value > self.hi
                or value < self.lo or (self.lo_open and value == self.lo)):
            raise _bad(f"must be a number with {self.describe()}, not {text!r}")
        return value


class IntList(_Validator):
    """Comma-separated whole numbers, each in ``lo..hi``; at least one, at most ``max_items``: a tuple."""
    kind = "int_list"

    def __init__(self, lo, hi, max_items=256):
        self.item, self.max_items = Int(lo, hi), max_items

    def describe(self):
        return f"{self.item.lo}..{self.item.hi}"

    def __call__(self, text):
        text = str(text)
        parts = [p.strip() for p in text.split(",")]
        if parts and parts[-1] == "":              # a trailing comma is harmless
            parts.pop()
        if not parts or any(p == "" for p in parts):
            raise _bad(f"must be comma-separated whole numbers in {self.describe()}, not {text!r}")
        if len(parts) > self.max_items:
            raise _bad(f"must be at most {self.max_items} numbers, not {len(parts)}")
        values = []
        for p in parts:
            try:
                values.append(self.item(p))
            except argparse.ArgumentTypeError:
                raise _bad(f"must be comma-separated whole numbers in {self.describe()}, not {text!r} "
                           f"({p!r})") from None
        return tuple(values)


# -- names ----------------------------------------------------------------------------------------------------

# Verilog-2005 and SystemVerilog keywords: a module must not be called one of them.
_VERILOG_KEYWORDS = frozenset("""
    always and assign automatic begin buf bufif0 bufif1 case casex casez cell cmos config deassign default
    defparam design disable edge else end endcase endconfig endfunction endgenerate endmodule endprimitive
    endspecify endtable endtask event for force forever fork function generate genvar highz0 highz1 if ifnone
    incdir include initial inout input instance integer join large liblist library localparam macromodule
    medium module nand negedge nmos nor noshowcancelled not notif0 notif1 or output parameter pmos posedge
    primitive pull0 pull1 pulldown pullup pulsestyle_ondetect pulsestyle_onevent rcmos real realtime reg
    release repeat rnmos rpmos rtran rtranif0 rtranif1 scalared showcancelled signed small specify specparam
    strong0 strong1 supply0 supply1 table task time tran tranif0 tranif1 tri tri0 tri1 triand trior trireg
    unsigned use uwire vectored wait wand weak0 weak1 while wire wor xnor xor
    alias always_comb always_ff always_latch assert assume before bind bins binsof bit break byte chandle
    class clocking const constraint context continue cover covergroup coverpoint cross dist do endclass
    endclocking endgroup endinterface endpackage endprogram endproperty endsequence enum expect export extends
    extern final first_match foreach forkjoin iff ignore_bins illegal_bins import inside int interface
    intersect join_any join_none local logic longint matches modport new null package packed priority program
    property protected pure rand randc randcase randsequence ref return sequence shortint shortreal solve
    static string struct super tagged this throughout timeprecision timeunit type typedef union unique var
    virtual void wait_order wildcard with within
""".split())
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Identifier(_Validator):
    """A name usable as a Verilog identifier: a letter or _, then letters, digits and _; not a keyword."""
    kind = "identifier"

    def __init__(self, max_len=64):
        self.max_len = max_len

    def describe(self):
        return f"[A-Za-z_][A-Za-z0-9_]*, at most {self.max_len} characters, not a Verilog keyword"

    def __call__(self, text):
        text = str(text)
        if not _IDENT.fullmatch(text) or len(text) > self.max_len:
            raise _bad(f"must be a Verilog identifier (a letter or _, then letters, digits or _; at most "
                       f"{self.max_len} characters), not {text!r}")
        if text in _VERILOG_KEYWORDS:
            raise _bad(f"must not be a Verilog keyword, not {text!r}")
        return text


class Names(_Validator):
    """One name, or with ``many`` a comma-separated list, out of ``names()`` (a callable, so that the list can
    come from a registry that is imported only when the command line is parsed)."""
    kind = "name"

    def __init__(self, names, many=False, what="name"):
        self.names, self.many, self.what = names, many, what

    def describe(self):
        return ", ".join(self.names())

    def __call__(self, text):
        text = str(text)
        known = tuple(self.names())
        items = [t.strip() for t in text.split(",")] if self.many else [text]
        if not items or any(not t for t in items):
            raise _bad(f"must be {'comma-separated ' if self.many else 'a '}{self.what}{'s' if self.many else ''} "
                       f"out of {', '.join(known)}, not {text!r}")
        for t in items:
            if t not in known:
                raise _bad(f"Unknown {self.what} {t!r}; known: {', '.join(known)}")
        if self.many and len(set(items)) != len(items):
            raise _bad(f"names a {self.what} twice: {text!r}")
        return tuple(items) if self.many else text


class Parsed(_Validator):
    """``parse(text)`` (raising ``ValueError`` with a message) as a validator, for the values a module
    parses itself (``planner --chip NAME:GB:TBPS``)."""

    def __init__(self, parse, kind="text", what=""):
        self.parse, self.kind, self.what = parse, kind, what

    def describe(self):
        return self.what

    def __call__(self, text):
        try:
            return self.parse(str(text))
        except (ValueError, TypeError) as exc:
            raise _bad(one_line(exc)) from None


# -- files ----------------------------------------------------------------------------------------------------

def _either(items):
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _stat(path):
    try:
        return os.stat(path)
    except (OSError, ValueError):                # ValueError: a NUL byte in the name
        return None


def _why_not(exc):
    return getattr(exc, "strerror", None) or str(exc)


class InputFile(_Validator):
    """An existing regular file that can be read and decoded: as UTF-8 text (``text=True``, the default) or by
    ``decode(path)``, a function that raises ``ValueError`` naming the file (an image loader, a TOML
    reader). A device or a FIFO is refused (reading one could block or never end)."""
    kind = "input"

    def __init__(self, decode=None, text=True, max_bytes=256 << 20):
        self.decode, self.text, self.max_bytes = decode, text, max_bytes

    def __call__(self, path):
        path = str(path)
        if not path:
            raise _bad("needs a file name, not ''")
        st = _stat(path)
        if st is None:
            raise _bad(f"{path}: no such file")
        if stat.S_ISDIR(st.st_mode):
            raise _bad(f"{path}: is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise _bad(f"{path}: not a regular file")
        if st.st_size > self.max_bytes:
            raise _bad(f"{path}: {st.st_size:,} bytes, more than the {self.max_bytes:,} an input file may have")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise _bad(f"{path}: cannot read: {_why_not(exc)}") from None
        if self.text:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise _bad(f"{path}: not a text file (not UTF-8)") from None
            if "\0" in text:
                raise _bad(f"{path}: not a text file (NUL bytes)")
        if self.decode is not None:
            try:
                self.decode(path)
            except (ValueError, OSError) as exc:
                message = one_line(exc)
                raise _bad(message if path in message else f"{path}: {message}") from None
        return path


def _probe_folder(folder):
    """None when a new file can be created in ``folder``, else why not."""
    st = _stat(folder)
    if st is None:
        return "no such folder"
    if not stat.S_ISDIR(st.st_mode):
        return "not a folder"
    try:
        fd, probe = tempfile.mkstemp(prefix=".ga2-probe-", dir=folder)
    except OSError as exc:
        return f"cannot create a file there: {_why_not(exc)}"
    os.close(fd)
    os.unlink(probe)
    return None


class OutputFile(_Validator):
    """A file that can be written: not a directory, in an existing folder that takes a new file (tried by
    creating and removing a probe file), and, with ``suffixes``, ending in one of them. ``"-"`` is standard
    output when ``stdout`` is allowed."""
    kind = "output"

    def __init__(self, suffixes=None, stdout=False, needs=None):
        self.suffixes, self.stdout, self.needs = suffixes, stdout, needs

    def describe(self):
        return ", ".join(self.suffixes or ())

    def __call__(self, path):
        path = str(path)
        if self.stdout and path == "-":
            return path
        if not path:
            raise _bad("needs a file name, not ''")
        if "\0" in path:
            raise _bad(f"{path!r}: a file name cannot hold a NUL byte")
        if path.endswith(("/", os.sep)) or os.path.isdir(path):
            raise _bad(f"{path}: is a directory; give a file name")
        if self.suffixes and not path.lower().endswith(tuple(self.suffixes)):
            raise _bad(f"{path}: must end in {_either(self.suffixes)}")
        st = _stat(path)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise _bad(f"{path}: exists and is not a regular file")
        folder = os.path.dirname(path) or "."
        why = _probe_folder(folder)
        if why:
            raise _bad(f"{path}: cannot be written: {folder}: {why}")
        if st is not None and not os.access(path, os.W_OK):
            raise _bad(f"{path}: cannot be written: permission denied")
        if self.needs:
            self.needs()
        return path


class OutputDir(_Validator):
    """A folder to write files into: an existing folder that takes new files, or a new one, with any folders
    above it that are missing, under the nearest existing folder, which must take them (the command creates
    them, as ``mkdir -p`` does: ``build/soc-ulx3s`` in a fresh clone)."""
    kind = "output_dir"

    def __init__(self, needs=None):
        self.needs = needs

    def __call__(self, path):
        path = str(path)
        if not path:
            raise _bad("needs a folder name, not ''")
        if "\0" in path:
            raise _bad(f"{path!r}: a folder name cannot hold a NUL byte")
        st = _stat(path)
        if st is not None:
            why = _probe_folder(path)
            if why:
                raise _bad(f"{path}: cannot be written into: {why}")
        else:
            parent = os.path.dirname(os.path.normpath(path)) or "."
            while _stat(parent) is None:                    # the nearest folder above it that exists
                parent = os.path.dirname(parent) or "."
            why = _probe_folder(parent)
            if why:
                raise _bad(f"{path}: cannot be created: {parent}: {why}")
        if self.needs:
            self.needs()
        return path


def need_matplotlib():
    """``ToolMissing`` unless matplotlib can be imported (checked while parsing ``--plot``, before any work)."""
    import importlib.util
    if importlib.util.find_spec("matplotlib") is None:
        raise ToolMissing("matplotlib is not installed (pip install matplotlib); --plot needs it")


# -- atomic outputs -------------------------------------------------------------------------------------------

def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _remove(path):
    with contextlib.suppress(OSError):
        os.unlink(path)


@contextlib.contextmanager
def atomic_path(path):
    """A temporary path in the folder of ``path`` to write into; renamed onto ``path`` when the block ends
    normally, removed when it raises, so ``path`` is either the whole new file or untouched."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".part", dir=folder)
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())         # the permissions an ordinary open(path, "w") gives
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_write(path, mode="w", **kwargs):
    """``open(path, mode)`` that leaves no partial file: the file is written beside ``path`` and renamed onto
    it only when the block ends normally."""
    with atomic_path(path) as tmp:
        with open(tmp, mode, **kwargs) as f:
            yield f


def savefig(fig, path, **kwargs):
    """``fig.savefig(path)`` through ``atomic_path``; the format comes from the suffix of ``path``."""
    fmt = os.path.splitext(os.fspath(path))[1][1:].lower() or None
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, **kwargs)


# -- running a command ----------------------------------------------------------------------------------------

def _say(prog, message):
    print(f"{prog}: error: {one_line(message)}", file=sys.stderr)


class Hang(RuntimeError):
    """A run that did not halt within its cycle limit (the simulators' ``sim.jobs.HangError``): exit status
    ``EXIT_HANG``."""


def classify(exc):
    """(exit status, message) of an exception that ended a command."""
    if isinstance(exc, Hang):
        return EXIT_HANG, str(exc)
    if isinstance(exc, ToolMissing):
        return EXIT_NO_TOOL, str(exc)
    if isinstance(exc, ValueError):              # bad input (AsmError, a configuration, ...)
        return EXIT_USAGE, str(exc)
    if isinstance(exc, OSError):
        name = f"{exc.filename}: " if exc.filename else ""
        return EXIT_FAULT, f"{name}{exc.strerror or exc}"
    if isinstance(exc, (RuntimeError, AssertionError)):
        return EXIT_FAULT, str(exc) or type(exc).__name__
    return EXIT_FAULT, (f"internal error: {type(exc).__name__}: {exc} (GA2_TRACEBACK=1 shows where)")


def _command_parser(parser, args):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(getattr(args, action.dest, None))
    return None


def _check_files(sub, args):
    """Two outputs must not be one file, nor an output an input of the same command."""
    seen = {}
    inputs = {}
    for action in sub._actions:
        v = validator_of(action)
        value = getattr(args, action.dest, None)
        if v is None or value in (None, "-") or not isinstance(value, str):
            continue
        name = "/".join(action.option_strings) or action.metavar or action.dest
        key = os.path.realpath(value)
        if v.kind == "input":
            inputs[key] = name
        elif v.kind == "output":
            if key in seen:
                raise ValueError(f"{seen[key]} and {name} name the same file {value!r}")
            seen[key] = name
    for key, name in seen.items():
        if key in inputs:
            raise ValueError(f"{name} would overwrite the input file of {inputs[key]}")


def run_main(parser, argv=None):
    """Parse ``argv``, check it, run the command; return the exit status (``EXIT_STATUSES``). Every failure
    is one line on stderr, ``PROG COMMAND: error: MESSAGE``; ``GA2_TRACEBACK=1`` also prints the traceback
    of an exception (for debugging the tools themselves)."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:                    # --help (0), or a usage error already printed (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except Exception as exc:                     # a validator found a missing tool (matplotlib for --plot)
        status, message = classify(exc)
        _say(parser.prog, message)
        return status
    sub = _command_parser(parser, args)
    if sub is None or not getattr(args, "func", None):
        group = _command_parser(sub, args) if sub is not None else None
        nested = sub is not None and any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
        if nested and group is None:             # `ga2 llm`: a group of commands without one of them
            names = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices
            _say(sub.prog, f"a command is required: {', '.join(names)} ({sub.prog} --help)")
        else:
            _say(parser.prog, f"a command is required: {parser.prog} --help lists them")
        return EXIT_USAGE
    prog = sub.prog
    try:
        _check_files(sub, args)
        check = getattr(args, "check", None)
        if check is not None:                    # the command's own checks first: they name its options
            check(args)
        configure = getattr(args, "configure", None)
        if configure is not None:
            configure(args)                      # a field combination the configuration refuses
    except Exception as exc:
        status, message = classify(exc)
        _say(prog, message)
        return status
    try:
        status = args.func(args)
        return EXIT_OK if status is None else int(status)
    except BrokenPipeError:                      # `ga2 ... | head`: the reader left, nothing is wrong
        with contextlib.suppress(Exception):     # and Python's last flush must not complain either
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        _say(prog, "interrupted")
        return 130
    except Exception as exc:
        if os.environ.get("GA2_TRACEBACK"):
            import traceback
            traceback.print_exc()
        status, message = classify(exc)
        _say(prog, message)
        return status
