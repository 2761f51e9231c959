"""``ga2 matrix-lane``: where the matrix lane's cycles go in the chapter's decode steps on the decoupled chip. Once
the port packs bytes the matrix lane is the bound (``ga2 bus-width``); this splits every cycle of a step, from
the first fetch to the last counted cycle, into what the lane did or waited for, from the cycle model
(``ga2_sw.cycles.DecoupledTimer``, which every simulator matches)."""

from ..cycles import DecoupledTimer, conflict, lane_of
from ..isa import Op
from ..timing import MM_PLAN_CYCLES
from .common import chip_options, emit, finish_plot, json_option, plot_option, table

__all__ = ["CATEGORIES", "matrix_lane_cycles", "register"]

# The categories, in the order a step's cycles are told (docs/ARCHITECTURE.md, "Where the matrix lane's cycles
# go"). Each MM's share runs from the cycle after the previous MM's last read to its own last read; the tail
# from the last MM's last read to the step's last counted cycle.
CATEGORIES = {
    "slices": "the MMs' k-slices, one a cycle: the lane's useful work (K per MM)",
    "held": "slices held back on port B: operands sharing a bank, the vector lane's or the result writer's "
            "requests, the last slice waiting for the previous tile's writes",
    "issue": "each MM's start and plan cycles (1 + MM_PLAN_CYCLES) before its first read",
    "wait dma": "idle, the MM's operands still loading (an LD it conflicts with not finished)",
    "wait vector": "idle, waiting for an RQ, SM or online instruction it conflicts with",
    "wait matrix": "idle, waiting for an earlier MM's results",
    "in order": "idle with the lane free and the operands ready: an earlier instruction, waiting itself, held "
                "the in-order issue (before the first MM, also the first fetch and decode)",
    "tail": "after the last MM's last read: its results, the RQs, SMs and STs behind it, HALT",
}


def matrix_lane_cycles(program, config):
    """``{category: cycles}`` (``CATEGORIES``) of one decoupled program on ``config``, summing to its cycle count,
    and the per-MM records ``[{index, start, last_read, K, held, idle, waited_for}]``.

    An MM's idle cycles (from the lane's free cycle, for the first MM cycle 0, the first fetch, to its start)
    are split at the cycle its operands were ready: the lane free and every earlier instruction it conflicts with
    finished (``cycles.conflict``; with in-order issue they all started earlier). Before it, the MM waits for
    the lane of the last of those to finish; after it, for its own turn in program order."""
    timer = DecoupledTimer(config)
    for instr in program:
        if instr.op == Op.HALT:
            break
        timer.issue(instr)
    total = timer.stop(True).cycles
    # Told from the final schedules: a vector instruction that starts beside an MM's reads works that MM's
    # schedule out again (DecoupledTimer.issue), so an MM's last read is known only once the program has run.
    counts = dict.fromkeys(CATEGORIES, 0)
    records, lane_free = [], 0
    for index, (instr, start, _) in enumerate(timer.starts):
        if instr.op != Op.MM:
            continue
        ready, cause = lane_free, None
        for other, _, end in timer.starts[:index]:
            if conflict(instr, other) and end + 1 > ready:
                ready, cause = end + 1, other
        schedule = timer.schedules[index]
        first_read = start + 1 + MM_PLAN_CYCLES
        held = schedule.last_read - first_read + 1 - instr.K
        assert start >= ready >= lane_free and held >= 0, "the timer starts no MM before its operands"
        waited = lane_of(cause.op) if cause is not None and ready > lane_free else None
        if waited is not None:
            counts[f"wait {waited}"] += min(start, ready) - lane_free
        counts["in order"] += start - max(ready, lane_free)
        counts["issue"] += first_read - start
        counts["slices"] += instr.K
        counts["held"] += held
        records.append({"index": index, "start": start, "last_read": schedule.last_read, "K": instr.K,
                        "held": held, "idle": start - lane_free, "waited_for": waited})
        lane_free = schedule.last_read + 1
    counts["tail"] = total - lane_free
    assert sum(counts.values()) == total
    return counts, records


def lane_rows(config, seed=4242):
    """One row per decode-table program: its name, cycles, beats and ``matrix_lane_cycles``."""
    from ..decode import beats_moved
    from ..workloads import decode_table_programs
    rows = []
    for p in decode_table_programs(config, seed):
        counts, records = matrix_lane_cycles(p.program, config)
        rows.append({"name": p.name, "batch": p.batch, "cycles": sum(counts.values()),
                     "beats": beats_moved(p.program, config), "mms": len(records), "matrix_lane": counts,
                     "mm_records": records})
    return rows


def _run(args):
    from ..cli import config_from_args
    config = config_from_args(args)
    rows = lane_rows(config, args.seed)
    print(f"where the matrix lane's cycles go: the decoupled {config.rows}x{config.cols} chip, {config.sp_banks} "
          f"banks, {_bytes(config)} a beat{chip_options(config)} (cycle model)")
    names = list(CATEGORIES)
    body = [[r["name"], r["cycles"], r["beats"], r["mms"], *(r["matrix_lane"][c] for c in names)] for r in rows]
    print(table(["program", "cycles", "beats", "MMs", *names], body, ["<"] + [">"] * (3 + len(names))))
    for name, what in CATEGORIES.items():
        print(f"  {name:>11}: {what}")
    step = next((r for r in rows if r["batch"] == config.rows and "ragged" not in r["name"]), None)
    if step is not None:
        lane = step["matrix_lane"]
        lost = {c: lane[c] for c in names if c != "slices"}
        worst = sorted(lost, key=lost.get, reverse=True)[:3]
        print(f"the B = {config.rows} step: {step['cycles']:,} cycles, {lane['slices']:,} of them slices "
              f"({lane['slices'] / step['beats']:.2f} x its {step['beats']:,} beats); most lost to "
              + ", ".join(f"{c} ({lane[c]:,})" for c in worst))
    plot = (lambda path: _plot(path, rows, config)) if args.plot else None
    return emit(args, {"config": config.to_dict(), "categories": CATEGORIES, "rows": rows}, plot)


def _bytes(config):
    return "a 32-bit word" if config.bus_bytes == 1 else f"{config.bus_bytes} bytes"


def _plot(path, rows, config):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(CATEGORIES)
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(rows) + 2.2))
    colours = plt.get_cmap("tab10").colors
    for y, r in enumerate(rows):
        left = 0
        for n, c in enumerate(names):
            width = r["matrix_lane"][c]
            ax.barh(y, width, left=left, color=colours[n % len(colours)], label=c if y == 0 else None)
            left += width
        ax.plot([r["beats"]] * 2, [y - 0.4, y + 0.4], color="black", linewidth=2,
                label="memory bound (beats)" if y == 0 else None)
    ax.set_yticks(range(len(rows)), [r["name"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("cycles")
    ax.set_title(f"Where the matrix lane's cycles go: decoupled {config.rows}x{config.cols}, {_bytes(config)} a "
                 f"beat, {config.sp_banks} banks", fontsize="medium")
    ax.legend(fontsize="small", ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.3 / len(rows)))
    finish_plot(fig, path)


def register(sub):
    from ..cli import add_config_arguments
    from ..options import SEED, Int
    p = sub.add_parser("matrix-lane", help="where the matrix lane's cycles go in the decode steps (decoupled, "
                       "cycle model)", description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=Int(*SEED), default=4242, help="workload seed (default %(default)s)")
    p.add_argument("--json", metavar="FILE", type=json_option(), help="write the rows as JSON")
    p.add_argument("--plot", metavar="FILE.png", type=plot_option(), help="draw each step's cycles, stacked")
    add_config_arguments(p, mode=False)
    p.set_defaults(func=_run, cfg_mode="decoupled")
