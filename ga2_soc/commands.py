"""``ga2 soc sim|build``: GA-2 in a LiteX SoC with a VexRiscv CPU and LiteDRAM (docs/SOC.md).

``sim`` runs the chip's decode step from firmware on the Verilated SoC: the step's outputs must equal the integer
reference, its whole memory, error, pc and memory-free counters the reference machine's and the cycle model's,
and a second program's fault must be read back (exit status 1 otherwise). ``build --board ulx3s`` makes the
SoC's bitstream with the YoWASP tools and reports its Fmax and resources (exit status 1 when timing fails).

Registered by ``ga2_cli``, the command line above every package; LiteX is imported only when a command runs."""

import json
import sys

from ga2_sw.cli import add_config_arguments, config_from_args
from ga2_sw.options import EXIT_FAULT, Int, OutputDir, OutputFile, ToolMissing, atomic_write

from .payload import PAYLOAD_OFFSET, ROM_BYTES, decode_step_payload

__all__ = ["register", "SOC_CHIP", "BOARDS"]

SOC_CHIP = "axi"                    # the catalogue's chip for an SoC: AXI4 at 4 bytes a beat
BOARDS = ("ulx3s",)
COUNTERS = ("cycles", "mm_cycles", "dma_cycles", "vec_cycles", "instructions", "stall_cycles")


def _need_litex():
    try:
        import litex  # noqa: F401
        import litedram  # noqa: F401
        import pythondata_cpu_vexriscv  # noqa: F401
    except ImportError as exc:
        raise ToolMissing(f"the SoC needs LiteX ({exc.name} is missing): pip install -e '.[soc]'") from None


def _config(args):
    config = config_from_args(args)
    if not config.axi:
        raise ValueError(f"--chip {args.chip}: the SoC takes a chip with an AXI4 port (axi = 1), such as {SOC_CHIP}")
    element = 1 if config.bus_bytes > 1 else 4
    room = (ROM_BYTES - PAYLOAD_OFFSET) // 2        # the image, and as much again for the programs
    if config.ext_words * element > room:
        raise ValueError(f"--chip {args.chip}: its external memory of {config.ext_words * element:,} bytes does "
                         f"not fit the SoC's ROM (--ext-words at most {room // element:,})")
    if getattr(args, "batch", None) is not None and args.batch > config.rows:
        raise ValueError(f"--batch {args.batch}: 1..{config.rows} (the chip's rows)")
    return config


def _sim(args):
    _need_litex()
    from dataclasses import replace
    from ga2_sw.cycles import cycle_counts
    from . import simulate
    from .soc import CPU, SDRAM_MODULE
    config = _config(args)
    payload = decode_step_payload(args.chip, config, args.batch or config.rows)
    soc = simulate.build(config, progress=lambda text: print(text, file=sys.stderr))
    programs, soc_cycles = simulate.parse(simulate.run(soc, payload.table(), args.max_cycles, keep=args.keep))
    problems = simulate.check(payload, programs)
    step, fault = payload.programs
    outputs = payload.step_outputs(programs[0]["ext"]) if programs and programs[0].get("ext") else None
    if outputs != payload.reference:
        problems.append("the decode step's outputs differ from the integer reference's")
    got = [{name: p.get(name) for name in COUNTERS} for p in programs]
    ideal = cycle_counts(list(step.instrs), replace(config, memory="ideal"))[0]
    modelled = cycle_counts(list(step.instrs), config)[0]
    result = {"chip": args.chip, "cpu": CPU, "dram": f"LiteDRAM controller, {SDRAM_MODULE} SDR SDRAM model",
              "program": step.name, "batch": payload.batch,
              "cycles": got[0]["cycles"] if got else None, "model_cycles": ideal.cycles,
              "model_cycles_memory": {"memory": config.memory, "cycles": modelled.cycles},
              "counters": got[0] if got else None, "matches_reference": not problems,
              "outputs": [list(o) for o in outputs] if outputs else None,
              "error_program": {"program": fault.name, "error_code": programs[1].get("error") if len(programs) > 1
                                else None, "pc": programs[1].get("pc") if len(programs) > 1 else None,
                                "expected_error_code": fault.error, "expected_pc": fault.pc},
              "soc_cycles": soc_cycles, "differences": problems}
    print(f"GA-2 ({args.chip}) in a LiteX SoC: {CPU} firmware, the LiteDRAM controller on its {SDRAM_MODULE} model")
    print(f"{step.name}: {result['cycles']:,} cycles on the SoC's DRAM; the cycle model's {ideal.cycles:,} with an "
          f"ideal memory, {modelled.cycles:,} with its {config.memory}")
    c = got[0] if got else dict.fromkeys(COUNTERS)
    print(f"  outputs {'equal' if outputs == payload.reference else 'DIFFER from'} the integer reference "
          f"({payload.batch} sequences x {config.d}); counters: mm {c['mm_cycles']}, dma {c['dma_cycles']} "
          f"(stalled {c['stall_cycles']}), vec {c['vec_cycles']}, instructions {c['instructions']}")
    print(f"{fault.name}: error {result['error_program']['error_code']} at pc {result['error_program']['pc']} "
          f"(the reference machine's: {fault.error} at pc {fault.pc})")
    for problem in problems:
        print(f"difference: {problem}")
    if not problems:
        print("memory, outputs, error, pc and the memory-free counters equal the reference machine's and the "
              "cycle model's")
    if args.json:
        with atomic_write(args.json) as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return EXIT_FAULT if problems else 0


def _build(args):
    _need_litex()
    from .board import build_ulx3s
    config = _config(args)
    r = build_ulx3s(config, args.output, sys_clk_mhz=args.sys_clk_mhz, seed=args.seed, chip=args.chip)
    result = {"board": args.board, "device": r["device"], "chip": args.chip, "clock_mhz": args.sys_clk_mhz,
              "fmax_mhz": r["fmax_mhz"], "timing_met": r["passed"], "clocks": r["clocks"], "seed": args.seed,
              "bitstream": r["bitstream"],
              "resources": {"lut4": r["luts"], "dp16kd": r["brams"], "mult18x18d": r["multipliers"]}}
    print(f"{args.board} ({r['device']}) with GA-2 ({args.chip}): {r['bitstream']}")
    print(f"Fmax {r['fmax_mhz']} MHz at {args.sys_clk_mhz} MHz ({'met' if r['passed'] else 'NOT MET'}; seed "
          f"{args.seed}); {r['luts']:,} LUT4, {r['brams']} DP16KD, {r['multipliers']} MULT18X18D")
    for name, clock in r["clocks"].items():
        print(f"  clock {name}: {clock['fmax_mhz']} MHz at {clock['target_mhz']:g} MHz "
              f"({'met' if clock['passed'] else 'NOT MET'})")
    if args.json:
        with atomic_write(args.json) as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return 0 if r["passed"] else EXIT_FAULT


def register(sub):
    p = sub.add_parser("soc", help="GA-2 in a LiteX SoC (VexRiscv, LiteDRAM): simulate it, or build a bitstream")
    soc = p.add_subparsers(dest="soc_command", metavar="COMMAND")
    s = soc.add_parser("sim", help="the chip's decode step from firmware on the Verilated SoC, checked")
    s.add_argument("--batch", type=Int(1, 64), default=None,
                   help="sequences of the decode step, 1..the chip's rows (default: its rows)")
    s.add_argument("--max-cycles", type=Int(10_000, 2_000_000_000), default=20_000_000,
                   help="SoC cycles before the run is a hang, exit status 3 (default %(default)s)")
    s.add_argument("--keep", metavar="DIR", type=OutputDir(), default=None,
                   help="leave the run's ROM and memory images in DIR")
    s.add_argument("--json", metavar="FILE", type=OutputFile(), default=None, help="write the result as JSON")
    add_config_arguments(s, chip=SOC_CHIP)
    s.set_defaults(func=_sim, check=_config)
    b = soc.add_parser("build", help="the SoC's bitstream for a board, with the YoWASP tools (minutes)")
    b.add_argument("--board", choices=BOARDS, default="ulx3s", help="ulx3s: a ULX3S with an LFE5U-85F (default)")
    b.add_argument("-o", "--output", metavar="DIR", type=OutputDir(), default="build/soc-ulx3s",
                   help="the build folder (default %(default)s)")
    b.add_argument("--sys-clk-mhz", type=Int(10, 100), default=50,
                   help="the SoC's clock in MHz, 10..100 (default 50)")
    b.add_argument("--seed", type=Int(1, 2**31 - 1), default=1, help="nextpnr's placement seed (default 1)")
    b.add_argument("--json", metavar="FILE", type=OutputFile(), default=None, help="write the report as JSON")
    add_config_arguments(b, chip=SOC_CHIP)
    b.set_defaults(func=_build, check=_config)
