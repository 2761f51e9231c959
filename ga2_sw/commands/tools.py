"""``ga2 asm``, ``ga2 disasm`` and ``ga2 run``: the assembler, the disassembler, and a program file run on the
reference machine or any simulator of ``sim.backends`` (formats in docs/FILES.md)."""

import json
import os
import sys

from .. import asm, isa
from ..cli import add_config_arguments, config_from_args

__all__ = ["register", "load_program"]


def register(sub):
    from sim.backends import DEFAULT_CYCLE_LIMIT, backend_names
    p = sub.add_parser("asm", help="assemble FILE.s into a program image, validated against the configuration")
    p.add_argument("source", metavar="FILE.s")
    p.add_argument("-o", "--output", required=True, metavar="FILE.hex", help="program image to write")
    add_config_arguments(p)
    p.set_defaults(func=_asm)

    p = sub.add_parser("disasm", help="print a program image as assembly")
    p.add_argument("image", metavar="FILE.hex")
    p.add_argument("--addresses", action="store_true", help="end each line with its address as a comment")
    p.set_defaults(func=_disasm)

    p = sub.add_parser("run", help="run a program (assembly or image) on the reference machine or a simulator")
    p.add_argument("program", metavar="FILE.s|FILE.hex")
    p.add_argument("--ext", metavar="MEM.hex", help="initial external memory image (default: all zero)")
    p.add_argument("--ext-out", metavar="OUT.hex", help="write the external memory after the run")
    p.add_argument("--json", metavar="FILE", help="write the counters, error and pc as JSON")
    p.add_argument("--sim", default="model", metavar="NAME",
                   help=f"simulator: {', '.join(backend_names())} (default %(default)s)")
    p.add_argument("--vcd", metavar="FILE.vcd", help="with --sim pysim: write a waveform of the run")
    p.add_argument("--cycle-limit", type=int, default=DEFAULT_CYCLE_LIMIT, metavar="N",
                   help="stop a simulation that has not halted after N cycles (default %(default)s)")
    add_config_arguments(p)
    p.set_defaults(func=_run)


def load_program(path):
    """A program file as a list of Instr (assembly) or of 128-bit words (an image, ending in .hex)."""
    if path.endswith(".hex"):
        return asm.load_image(path)
    try:
        with open(path) as f:
            text = f.read()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return asm.parse(text, filename=path)


def _asm(args):
    config = config_from_args(args)
    try:
        with open(args.source) as f:
            text = f.read()
    except OSError as exc:
        raise ValueError(f"{args.source}: cannot read: {exc.strerror or exc}") from None
    program = asm.parse(text, config, filename=args.source)
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
    from sim.jobs import HangError
    config = config_from_args(args)
    backend = get_backend(args.sim)
    program = load_program(args.program)
    ext = asm.load_mem(args.ext, config.ext_words) if args.ext else None
    if args.vcd and args.sim != "pysim":
        raise ValueError("--vcd needs --sim pysim")
    options = {"vcd": args.vcd} if args.vcd else {}
    try:
        r = backend.run(config, program, ext, cycle_limit=args.cycle_limit, **options)
    except HangError as exc:
        raise ValueError(str(exc)) from None
    if args.vcd:
        print(f"waveform: {args.vcd}")
    c = r.counters
    print(f"cycles {c.cycles}  mm {c.mm}  dma {c.dma}  vec {c.vec}  instructions {c.instructions}")
    line = f"error {r.error.name}  pc {r.pc}"
    if not r.ok and r.pc < len(program):
        instr, err = program[r.pc], r.error
        if isinstance(instr, int):
            instr, _ = isa.decode(instr)
        if instr is not None:
            line += f": {asm.format_instr(instr)}: {isa.explain(instr, config)}"
    print(line)
    if args.ext_out:
        _write(asm.save_mem, args.ext_out, r.ext)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"counters": {"cycles": c.cycles, "mm": c.mm, "dma": c.dma, "vec": c.vec,
                                    "instructions": c.instructions},
                       "error": r.error.name, "pc": r.pc}, f, indent=2)
            f.write("\n")
    return 0 if r.ok else 1


def _write(save, path, words):
    try:
        save(path, words)
    except OSError as exc:
        raise ValueError(f"{path}: cannot write: {exc.strerror or exc}") from None
