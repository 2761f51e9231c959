"""``ga2 asm``, ``ga2 disasm`` and ``ga2 run``: the assembler, the disassembler, and a program file run on the
reference machine or any simulator of ``sim.backends`` (formats in docs/FILES.md)."""

import os
import sys

from ga2_sw import asm, isa
from ga2_sw.analyses.common import write_json
from ga2_sw.cli import add_config_arguments, config_from_args
from ga2_sw.options import InputFile, Int, Names, OutputFile, atomic_path

__all__ = ["register", "load_program"]


def register(sub):
    from sim.backends import DEFAULT_CYCLE_LIMIT, backend_names
    p = sub.add_parser("asm", help="assemble FILE.s into a program image, validated against the configuration")
    p.add_argument("source", metavar="FILE.s", type=InputFile(), help="assembly source (docs/FILES.md)")
    p.add_argument("-o", "--output", required=True, metavar="FILE.hex", type=OutputFile(),
                   help="program image to write")
    add_config_arguments(p)
    p.set_defaults(func=_asm)

    p = sub.add_parser("disasm", help="print a program image as assembly")
    p.add_argument("image", metavar="FILE.hex", type=InputFile(decode=asm.load_image),
                   help="program image (docs/FILES.md)")
    p.add_argument("--addresses", action="store_true", help="end each line with its address as a comment")
    p.set_defaults(func=_disasm)

    p = sub.add_parser("run", help="run a program (assembly or image) on the reference machine or a simulator")
    p.add_argument("program", metavar="FILE.s|FILE.hex", type=InputFile(decode=_load_if_image),
                   help="the program: assembly, or a program image if the name ends in .hex")
    p.add_argument("--ext", metavar="MEM.hex", type=InputFile(),
                   help="initial external memory image (default: all zero)")
    p.add_argument("--ext-out", metavar="OUT.hex", type=OutputFile(), help="write the external memory after the run")
    p.add_argument("--json", metavar="FILE", type=OutputFile(), help="write the counters, error and pc as JSON")
    p.add_argument("--sim", default="model", metavar="NAME", type=Names(backend_names, what="simulator"),
                   help=f"simulator: {', '.join(backend_names())} (default %(default)s)")
    p.add_argument("--vcd", metavar="FILE.vcd", type=OutputFile(),
                   help="with --sim pysim: write a waveform of the run (kept up to the limit if it hangs)")
    p.add_argument("--cycle-limit", type=Int(*CYCLE_LIMIT), default=DEFAULT_CYCLE_LIMIT, metavar="N",
                   help=f"stop a simulation that has not halted after N cycles, exit status 3 "
                        f"({CYCLE_LIMIT[0]}..{CYCLE_LIMIT[1]}; default %(default)s)")
    add_config_arguments(p)
    p.set_defaults(func=_run, check=_check_run)


# The cycle limits ``ga2 run`` takes: the harnesses count in 64 bits; 10^12 cycles is days of simulation.
CYCLE_LIMIT = (1, 10**12)


def _load_if_image(path):
    if path.endswith(".hex"):
        asm.load_image(path)


def _check_run(args):
    if args.vcd and args.sim != "pysim":
        raise ValueError("--vcd needs --sim pysim")
    config = config_from_args(args)
    load_program(args.program)                   # not against the configuration: a faulting program runs too
    if args.ext:
        asm.load_mem(args.ext, config.ext_words)


def load_program(path, config=None):
    """A program file as a list of Instr (assembly, checked against ``config`` if given) or of 128-bit words
    (an image, ending in .hex)."""
    if path.endswith(".hex"):
        return asm.load_image(path)
    return asm.parse(_read(path), config, filename=path)


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text file (not UTF-8)") from None


def _asm(args):
    config = config_from_args(args)
    program = asm.parse(_read(args.source), config, filename=args.source)
    if len(program) > config.imem_words:
        raise ValueError(f"{args.source}: {len(program)} instructions, but the instruction memory holds "
                         f"{config.imem_words} (imem_words)")
    if not program or program[-1].op != isa.Op.HALT:
        print(f"warning: {args.source} does not end with HALT")
    _write(asm.save_image, args.output, asm.to_words(program))
    print(f"{args.output}: {len(program)} instructions")
    return 0


def _disasm(args):
    lines = []
    for pc, word in enumerate(asm.load_image(args.image)):
        instr, err = isa.decode(word)
        line = asm.format_instr(instr) if err == isa.Err.NONE else f"# illegal: 0x{word:032x}"
        lines.append(f"{line:<80} # {pc}" if args.addresses else line)
    try:
        if lines:
            print("\n".join(lines))
    except BrokenPipeError:                      # `ga2 disasm x.hex | head`
        sys.stdout = open(os.devnull, "w")
    return 0


def _run(args):
    from sim.backends import get_backend
    config = config_from_args(args)
    backend = get_backend(args.sim)
    program = load_program(args.program)
    ext = asm.load_mem(args.ext, config.ext_words) if args.ext else None
    r = _simulate(backend, config, program, ext, args)
    if args.vcd:
        print(f"waveform: {args.vcd}")
    c = r.counters
    print(f"cycles {c.cycles}  mm {c.mm}  dma {c.dma}  vec {c.vec}  instructions {c.instructions}")
    line = f"error {r.error.name}  pc {r.pc}"
    if not r.ok and r.pc < len(program):
        instr = program[r.pc]
        if isinstance(instr, int):
            instr, _ = isa.decode(instr)
        if instr is not None:
            line += f": {asm.format_instr(instr)}: {isa.explain(instr, config)}"
    print(line)
    if args.ext_out:
        _write(asm.save_mem, args.ext_out, r.ext)
    if args.json:
        write_json(args.json, {"counters": {"cycles": c.cycles, "mm": c.mm, "dma": c.dma, "vec": c.vec,
                                            "instructions": c.instructions},
                               "error": r.error.name, "pc": r.pc})
    return 0 if r.ok else 1


def _simulate(backend, config, program, ext, args):
    """The run; with --vcd the waveform goes to a temporary file renamed onto its name at the end, also after
    a hang (the waveform up to the cycle limit is what shows why), and removed after any other failure."""
    if not args.vcd:
        return backend.run(config, program, ext, cycle_limit=args.cycle_limit)
    from sim.jobs import HangError
    with atomic_path(args.vcd) as tmp:
        try:
            return backend.run(config, program, ext, cycle_limit=args.cycle_limit, vcd=tmp)
        except HangError as exc:
            exc.args = (f"{exc}; waveform up to the limit: {args.vcd}",)
            hang = exc
    raise hang


def _write(save, path, words):
    try:
        save(path, words)
    except OSError as exc:
        raise ValueError(f"{path}: cannot write: {exc.strerror or exc}") from None
