"""``ga2 weight-stream``: the memory-bound half of a decode step, behind a DRAM. Whatever the batch, every step
streams the weights once: here SmolLM2-135M's q, k and v projections of one block ((9 + 2 x 3) x 64 = 960
weight rows of 576 int8: 540 KiB) for a batch of B tokens, each tile of ``cols`` weight rows loaded once and
met by every token (``ga2_sw.llm.step_cycles.projection_program``, every output requantised to int8 on the
chip), on a decoupled chip whose AXI4 port is answered by the ideal memory or a DRAM model (``ga2_sw.dram``).
Per memory and bus width: cycles, the stall count, bytes on the bus, the fraction of the bus's bound (a beat
per cycle) and of the DRAM's peak bandwidth reached; a simulator's run is checked against the reference machine
(memories and counters), and every run's outputs against numpy.

The chip defaults to the llm chip's 8 x 16 (a batch of up to 8, the default; 16 columns take a 16-byte beat's 16
weights a cycle: the projections' MMs stream a k-slice of ``cols`` weights per cycle, so a tile's MM keeps pace
with its load only when ``cols`` >= ``bus_bytes``) with 32 banks and ``row_writes`` (a tile's 8 x 16 results
written in 23 cycles, not 128: written one a cycle, the MM of a tile outlasts its load); the DRAM's peak is per
chip cycle at ``--clock-mhz``, so a DDR3-800 x16 device (16 bytes a 100 MHz cycle) is one the 16-byte port can
fill, and DDR3-1600 (32) is not."""

import time

from ga2_sw.config import BUS_BYTES, MEMORIES, sized_memories
from ga2_sw.isa import footprints
from ga2_sw.dram import GRADES, peak_bytes_per_cycle
from ga2_sw.options import IntList, Names
from .bus import check_widths
from ga2_sw.analyses.common import emit, finish_plot, json_option, plot_option, table

__all__ = ["register", "stream_config", "stream_workload", "stream_rows", "QK_MN", "V_MN"]

# The requantisations of the outputs (m, s): the sums of 576 products of int8 spread to about +-2^17, so a
# shift of 12 leaves int8 outputs of about +-32 (few saturate, every bit of the RQ exercised).
QK_MN = (1, 12)
V_MN = (3, 13)

WIDTHS = IntList(1, max(BUS_BYTES), max_items=len(BUS_BYTES))


def _shape():
    from ga2_sw.llm.step_cycles import SMOLLM2
    return SMOLLM2


def _rows(shape):
    """(q rows, k or v rows): the block's weight rows of each."""
    return shape["heads"] * shape["d"], shape["kv_heads"] * shape["d"]


# The fields the command sizes to the program unless they are given.
SIZED = ("sp_words", "ext_words", "imem_words")


def stream_config(config, batch, shape=None, given=None):
    """``config`` with its memories (``SIZED``) sized to the program, the smallest powers of two that hold it,
    except those ``given`` (name -> words, or None): ValueError (one line naming the option) if one of those
    is too small."""
    from ga2_sw.llm.step_cycles import projection_program
    shape, given = shape or _shape(), given or {}
    big = config.with_largest_memories()
    q_rows, kv_rows = _rows(shape)
    program = projection_program(big, batch, shape["d_model"], q_rows, kv_rows, V_MN, 1, QK_MN)
    needed = {"sp_words": max(hi for i in program for lo, hi in footprints(i)[0]) + 1,
              "ext_words": max(hi for i in program for lo, hi in footprints(i)[1]) + 1,
              "imem_words": len(program)}
    least = {"sp_words": config.sp_banks * 8, "ext_words": 64, "imem_words": 2}
    return big.replace(**sized_memories(needed, given, least, f"the weight stream of a batch of {batch} on "
                                        f"{config.rows}x{config.cols} at {config.bus_bytes} bytes a beat"))


def stream_workload(config, batch, seed, shape=None):
    """``(program, ext image, expected)``: random int8 weights and inputs, the program, and the int8 outputs
    numpy says, in the order the program stores them (tile by tile, each tile's outputs token by token; a
    token's outputs are q, then k, then v)."""
    import numpy as np
    from ga2_sw.llm.step_cycles import projection_program
    from ga2_sw.numerics import u32
    shape = shape or _shape()
    q_rows, kv_rows = _rows(shape)
    rows, dm = q_rows + 2 * kv_rows, shape["d_model"]
    rng = np.random.default_rng(seed)
    W = rng.integers(-128, 128, (rows, dm), dtype=np.int64)
    X = rng.integers(-128, 128, (batch, dm), dtype=np.int64)
    program = projection_program(config, batch, dm, q_rows, kv_rows, V_MN, 1, QK_MN)
    ext = [u32(int(v)) for v in W.reshape(-1)] + [u32(int(v)) for v in X.reshape(-1)]
    ext += [0] * (config.ext_words - len(ext))
    sums = X @ W.T

    def requantised(a, m, s):          # (a m + 2^(s-1)) >> s, saturated: docs/ISA.md's RQ, in numpy
        return np.clip((a * m + (1 << (s - 1))) >> s, -128, 127)
    outputs = np.concatenate([requantised(sums[:, :q_rows + kv_rows], *QK_MN),
                              requantised(sums[:, q_rows + kv_rows:], *V_MN)], axis=1)
    # stored tile by tile: a tile's cols outputs of token 0, then of token 1, ...
    expected = np.concatenate([outputs[:, r0:r0 + config.cols].reshape(-1) for r0 in range(0, rows, config.cols)])
    return program, ext, expected


def stream_rows(base, batch, widths, memories, sim="model", seed=4242, progress=None, shape=None, given=None):
    """One row per bus width and memory: the block's projections on ``sim``, checked against the reference
    machine and numpy (``shape``: SmolLM2's unless given, as ``llm.step_cycles.SMOLLM2``; ``given``: the
    memories' sizes given, as ``stream_config`` takes them)."""
    import numpy as np
    from sim.backends import get_backend
    from sim.compare import compare_results
    from ga2_sw.decode import beats_moved
    from ga2_sw.machine import Machine
    from ga2_sw.numerics import s8
    from ga2_sw.packing import beat_bytes
    shape = shape or _shape()
    q_rows, kv_rows = _rows(shape)
    rows_out, dm = q_rows + 2 * kv_rows, shape["d_model"]
    out_at = rows_out * dm + batch * dm
    result = []
    for w in widths:
        sized = stream_config(base.replace(bus_bytes=w), batch, shape, given)
        program, ext, expected = stream_workload(sized, batch, seed, shape)
        for memory in memories:
            config = sized.replace(memory=memory)
            t0 = time.perf_counter()
            (got,) = get_backend(sim).run_many(config, [(program, ext)])
            seconds = time.perf_counter() - t0
            if not got.ok:
                raise RuntimeError(f"weight stream: {sim} faulted with {got.error.name} at pc {got.pc}")
            # (on the model the run is the reference machine's own: it is not run twice)
            want = got if sim == "model" else Machine(config).run(program, ext)
            outputs = np.array([s8(v) for v in got.ext[out_at:out_at + batch * rows_out]])
            beats = beats_moved(program, config)
            moved = beats * beat_bytes(config)
            c = got.counters
            peak = peak_bytes_per_cycle(GRADES[memory], config.clock_mhz) if memory != "ideal" else None
            result.append({"bus_bytes": w, "memory": memory, "batch": batch, "rows": config.rows,
                           "cols": config.cols, "clock_mhz": config.clock_mhz, "cycles": c.cycles,
                           "stall_cycles": c.stall, "dma_cycles": c.dma, "mm_cycles": c.mm, "beats": beats,
                           "bytes": moved, "weight_bytes": rows_out * dm,
                           "of_bus_bound": round(beats / c.cycles, 4),
                           "dram_peak_bytes_per_cycle": None if peak is None else round(peak, 4),
                           "dram_bandwidth_fraction": None if peak is None else round(moved / (c.cycles * peak), 4),
                           "matches_reference": not compare_results(want, got),
                           "outputs_match_numpy": bool(np.array_equal(outputs, expected)),
                           "seconds": round(seconds, 2)})
            if progress:
                progress()
    return result


def _run(args):
    from ga2_sw.cli import config_from_args
    from ga2_sw.analyses.common import progress_bar
    base = config_from_args(args, memory="ideal")
    widths, memories = args.widths or [base.bus_bytes], args.memories or list(MEMORIES)
    with progress_bar(len(widths) * len(memories), args.no_progress, "run") as bar:
        rows = stream_rows(base, args.batch or base.rows, widths, memories, args.sim, args.seed,
                           progress=lambda: bar.update(1),
                           given={name: getattr(args, f"cfg_{name}") for name in SIZED})
    r0 = rows[0]
    print(f"SmolLM2-135M's q, k, v projections of one block ({r0['weight_bytes']:,} weight bytes, each loaded once) "
          f"for a batch of {r0['batch']} on the decoupled {r0['rows']}x{r0['cols']} chip, {args.sim}, a "
          f"{r0['clock_mhz']} MHz chip clock")
    body = [[r["bus_bytes"], r["memory"], f"{r['cycles']:,}", f"{r['stall_cycles']:,}", f"{r['bytes']:,}",
             f"{100 * r['of_bus_bound']:.1f}%",
             "--" if r["dram_peak_bytes_per_cycle"] is None else f"{r['dram_peak_bytes_per_cycle']:.1f}",
             "--" if r["dram_bandwidth_fraction"] is None else f"{100 * r['dram_bandwidth_fraction']:.1f}%",
             "yes" if r["matches_reference"] else "NO", "yes" if r["outputs_match_numpy"] else "NO"] for r in rows]
    print(table(["bytes/beat", "memory", "cycles", "stall cycles", "bytes on the bus", "of bus bound",
                 "DRAM peak B/cycle", "of DRAM peak", "= model", "= numpy"], body, [">", "<"] + [">"] * 8))
    print("('of bus bound' = beats / cycles, a beat per cycle; 'of DRAM peak' = bytes / (cycles x the DRAM's peak "
          "bytes per chip cycle); 'stall cycles': the DMA's busy cycles beyond the ideal memory's)")
    plot = (lambda path: _plot(path, rows)) if args.plot else None
    code = emit(args, {"config": base.to_dict(), "sim": args.sim, "rows": rows}, plot)
    bad = [r for r in rows if not (r["matches_reference"] and r["outputs_match_numpy"])]
    for r in bad:
        print(f"ga2 weight-stream: {r['bus_bytes']} bytes/beat, {r['memory']}: differs from the "
              f"{'reference machine' if not r['matches_reference'] else 'numpy outputs'}")
    return 1 if bad else code


def _plot(path, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    widths = sorted({r["bus_bytes"] for r in rows})
    for memory in sorted({r["memory"] for r in rows if r["memory"] != "ideal"}):
        mine = sorted((r for r in rows if r["memory"] == memory), key=lambda r: r["bus_bytes"])
        line, = ax.plot([r["bus_bytes"] for r in mine], [100 * r["dram_bandwidth_fraction"] for r in mine], "o-",
                        label=f"{memory}: reached")
        peak = mine[0]["dram_peak_bytes_per_cycle"]
        ax.plot(widths, [min(100.0, 100 * w / peak) for w in widths], ":", color=line.get_color(),
                label=f"{memory}: the bus's ceiling (a beat per cycle)")
    ax.axhline(80, color="grey", lw=0.8, ls="--", label="80% of the peak")
    ax.set_xscale("log", base=2)
    ax.set_xticks(widths, [str(w) for w in widths])
    ax.set_xlabel("bytes per beat of the AXI4 port")
    ax.set_ylabel("% of the DRAM's peak bandwidth")
    ax.set_ylim(0, 105)
    r0 = rows[0]
    ax.set_title(f"one block's weights streamed, batch {r0['batch']}, decoupled {r0['rows']}x{r0['cols']} at "
                 f"{r0['clock_mhz']} MHz", fontsize="medium")
    ax.legend(fontsize="small")
    finish_plot(fig, path)


def register(sub):
    from ga2_sw.cli import add_config_arguments
    from sim.backends import backend_names
    from ga2_sw.options import SEED, Int
    p = sub.add_parser("weight-stream", help="a decode step's weights streamed from a DRAM: the fraction of its "
                       "peak bandwidth reached", description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=Int(1, 32), metavar="B", help="tokens of the step, 1..rows (default rows)")
    p.add_argument("--widths", metavar="W,W,...", type=WIDTHS,
                   help=f"bytes per beat to run, each one of {', '.join(map(str, BUS_BYTES))} (default --bus-bytes)")
    p.add_argument("--memories", metavar="M,M,...", type=Names(lambda: MEMORIES, what="memory", many=True),
                   help=f"memories to run, of {', '.join(MEMORIES)} (default all)")
    p.add_argument("--sim", choices=backend_names(), default="model", help="simulator (default %(default)s)")
    p.add_argument("--seed", type=Int(*SEED), default=4242, help="workload seed (default %(default)s)")
    p.add_argument("--json", metavar="FILE", type=json_option(), help="write the rows as JSON")
    p.add_argument("--plot", metavar="FILE.png", type=plot_option(),
                   help="draw the fraction of each DRAM's peak against the bus width")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_arguments(p, mode=False, chip="llm")
    # The memories are sized to the program unless given; the memory models are --memories'.
    p.set_defaults(func=_run, check=_check, **{f"cfg_{name}": None for name in SIZED})
    for action in p._actions:
        if action.dest in tuple(f"cfg_{name}" for name in SIZED):
            action.help = action.help.replace("default: the chip's", "default: sized to the program")


def _check(args):
    from ga2_sw.cli import config_from_args
    base = config_from_args(args, memory="ideal")
    batch = args.batch or base.rows
    if batch > base.rows:
        raise ValueError(f"--batch {batch}: at most the array's rows ({base.rows}, --rows)")
    widths = args.widths or [base.bus_bytes]
    check_widths(widths, base.sp_banks)
    if base.axi != 1:
        raise ValueError("--axi: the weight stream runs on the AXI4 port (1), not 0")
    if args.cfg_memory is not None:     # one memory option, not two that could disagree
        raise ValueError(f"--memory: the weight stream runs the memories of --memories; give --memories "
                         f"{args.cfg_memory} instead")
    given = {name: getattr(args, f"cfg_{name}") for name in SIZED}
    for w in widths:
        stream_config(base.replace(bus_bytes=w), batch, given=given)      # a given memory holds the program
    from sim.backends import get_backend
    get_backend(args.sim).require()
