"""Static against continuous batching on GA-2 (``ga2 serving``; the chapter's running example B).

Requests that want different numbers of output tokens are served with room for ``capacity`` sequences
per decode step (by default the array's rows, 4):

* STATIC batching takes ``capacity`` requests in arrival order and runs the group until its longest request
  ends. A finished request keeps its slot (padding): the step is rebuilt for the whole group at the group's
  token count, so the finished ones are computed and thrown away.
* CONTINUOUS batching refills a slot, in arrival order, the moment its request ends; each sequence of a step
  is at its own token count (a ragged batch), and a step contains only live requests.

The cost of every step is the total-cycle counter of the REAL batched program (``decode.program``) for the
sequences present, from ``cycles.cycle_counts``: the same figures the circuit's counters show. Step costs
are cached by the tuple of token counts; they do not depend on the data, so the requantisation
parameters of any workload serve. A request's completion time is the end of the step that produced its
last token.
"""

from .. import cycles, decode
from ..cli import add_config_arguments, config_from_args
from ..isa import Err
from ..config import Config
from ..options import Int, IntList
from .common import add_output_arguments, emit, finish_plot, table

__all__ = ["DEFAULT_REQUESTS", "StepCost", "static_schedule", "continuous_schedule", "serve", "to_json", "register"]

DEFAULT_REQUESTS = (14, 3, 9, 5, 12, 2, 7, 10)


class StepCost:
    """Cycles of one decode step with sequences at token counts ``ts`` (batch slot j at ts[j]), from the
    cycle model of the real program; memoised, since the schedules repeat the same shapes."""

    def __init__(self, config):
        self.config = config
        # Only the requantisation multipliers/shifts are needed to build the program; any workload's do.
        self.P = decode.rq_params(decode.make_workload(config, 1, 1, 0))
        self.cache = {}

    def __call__(self, ts):
        key = tuple(ts)
        if key not in self.cache:
            prog = decode.program(self.config, list(range(len(key))), list(key), self.P)
            counters, err, pc = cycles.cycle_counts(prog, self.config)
            if err != Err.NONE:
                raise RuntimeError(f"decode step {list(key)} faults with {err.name} at pc {pc}")
            self.cache[key] = counters.cycles
        return self.cache[key]


def _validate(config, requests, capacity):
    if not requests:
        raise ValueError("--requests: give at least one request")
    for r in requests:
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise ValueError(f"--requests: every request must want at least 1 token, not {r!r}")
        if r > config.max_ctx:
            # A request of r tokens reaches context r; the decode layout holds max_ctx tokens per sequence.
            raise ValueError(f"--requests: a request of {r} tokens exceeds config field 'max_ctx' "
                             f"({config.max_ctx}); raise --max-ctx (and --sp-words/--ext-words to fit)")
    if isinstance(capacity, bool) or not isinstance(capacity, int) or not 1 <= capacity <= config.rows:
        raise ValueError(f"--capacity {capacity!r}: must be 1..{config.rows}, the batch the array's rows hold "
                         f"(config field 'rows'; raise --rows, and --sp-words to fit the caches)")


def static_schedule(requests, capacity, cost):
    """Groups of ``capacity`` in arrival order, each run for as many steps as its longest request.

    Returns (steps, completion): steps = [{"start", "cycles", "slots": [(request, token, live)]}], where
    a slot with live=False is a finished request riding along; completion[i] = cycle request i ended."""
    t, steps, completion = 0, [], [None] * len(requests)
    for g in range(0, len(requests), capacity):
        group = list(range(g, min(g + capacity, len(requests))))
        for s in range(1, max(requests[i] for i in group) + 1):
            c = cost([s] * len(group))        # the whole group is rebuilt at step s, padded ones included
            steps.append({"start": t, "cycles": c, "slots": [(i, s, s <= requests[i]) for i in group]})
            t += c
            for i in group:
                if s == requests[i]:
                    completion[i] = t
    return steps, completion


def continuous_schedule(requests, capacity, cost):
    """Refill a freed slot with the next waiting request before the next step; only live requests run.

    Same return shape as ``static_schedule``; slots keep fixed positions (a request stays in the slot it
    took), and slot k of ``slots`` is the k-th occupied position, in position order."""
    t, steps, completion = 0, [], [None] * len(requests)
    waiting = list(range(len(requests)))
    position = [None] * capacity          # request held by each slot position
    done = [0] * len(requests)            # tokens produced so far
    while waiting or any(p is not None for p in position):
        for k in range(capacity):
            if position[k] is None and waiting:
                position[k] = waiting.pop(0)
        live = [(k, i) for k, i in enumerate(position) if i is not None]
        for _, i in live:
            done[i] += 1
        c = cost([done[i] for _, i in live])
        steps.append({"start": t, "cycles": c, "slots": [(i, done[i], True) for _, i in live],
                      "positions": [k for k, _ in live]})
        t += c
        for k, i in live:
            if done[i] == requests[i]:
                completion[i] = t
                position[k] = None
    return steps, completion


def _summary(steps, completion, requests):
    total = sum(s["cycles"] for s in steps)
    slots = sum(len(s["slots"]) for s in steps)
    useful = sum(live for s in steps for _, _, live in s["slots"])
    return {"total_cycles": total, "steps": len(steps), "slots": slots, "useful_slots": useful,
            "tokens": sum(requests), "cycles_per_token": total / sum(requests),
            "mean_completion": sum(completion) / len(completion), "worst_completion": max(completion),
            "completion": completion, "schedule": steps}


def serve(config, requests=DEFAULT_REQUESTS, capacity=None, cost=None):
    """Run both policies. Returns {"static": summary, "continuous": summary, "requests", "capacity",
    "step_costs": {ts tuple: cycles}}; a summary has total_cycles, steps, slots, useful_slots, tokens,
    cycles_per_token, mean_completion, worst_completion, completion (per request) and schedule."""
    requests = list(requests)
    capacity = config.rows if capacity is None else capacity
    _validate(config, requests, capacity)
    cost = cost or StepCost(config)
    st = _summary(*static_schedule(requests, capacity, cost), requests)
    co = _summary(*continuous_schedule(requests, capacity, cost), requests)
    return {"static": st, "continuous": co, "requests": requests, "capacity": capacity,
            "step_costs": dict(getattr(cost, "cache", {}))}


def to_json(result):
    """The documented JSON: {"static": {...}, "continuous": {...}, "requests", "capacity"}."""
    keys = ("total_cycles", "steps", "slots", "useful_slots")
    return {"static": {k: result["static"][k] for k in keys},
            "continuous": {k: result["continuous"][k] for k in keys},
            "requests": list(result["requests"]), "capacity": result["capacity"]}


def format_report(config, result, cost):
    st, co, cap = result["static"], result["continuous"], result["capacity"]
    lines = [f"requests (tokens each): {result['requests']}; capacity {cap}; {st['tokens']} tokens in all",
             f"step cost = cycles of the real batched program (cycle_counts), {config.rows}x{config.cols} array",
             ""]
    mid = max(1, min(8, config.max_ctx // 2))
    shapes = [[n, f"{cost([mid] * n):,}", f"{cost([mid] * n) / n:,.0f}"] for n in range(1, cap + 1)]
    lines.append(table([f"sequences at token {mid}", "cycles", "per token"], shapes, [">", ">", ">"]))
    lines.append("")
    rows = []
    for name, s in (("static", st), ("continuous", co)):
        rows.append([name, f"{s['steps']}", f"{s['total_cycles']:,}", f"{s['cycles_per_token']:,.0f}",
                     f"{s['mean_completion']:,.0f}", f"{s['worst_completion']:,}", f"{s['slots']}",
                     f"{s['useful_slots']}", f"{s['slots'] - s['useful_slots']}"])
    lines.append(table(["policy", "steps", "total cycles", "cycles/token", "mean completion", "worst completion",
                        "slots", "useful", "wasted"], rows, ["<"] + [">"] * 8))
    lines += ["",
              f"continuous finishes the same work {st['total_cycles'] / co['total_cycles']:.2f}x faster; the mean "
              f"request completes {st['mean_completion'] / co['mean_completion']:.2f}x sooner",
              f"static spends {st['slots'] - st['useful_slots']} of {st['slots']} sequence-slots on finished requests "
              f"({100 * (st['slots'] - st['useful_slots']) / st['slots']:.0f}%); continuous spends "
              f"{co['slots'] - co['useful_slots']}",
              "live sequences per step, static (live/slots): "
              + " ".join(f"{sum(l for *_, l in s['slots'])}/{len(s['slots'])}" for s in st["schedule"]),
              "live sequences per step, continuous:          "
              + " ".join(str(len(s["slots"])) for s in co["schedule"])]
    return "\n".join(lines)


def plot(result, path):
    """Gantt chart of the slots over time for both policies; padded (finished) slots in grey hatching."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    cap, n = result["capacity"], len(result["requests"])
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    end = max(result["static"]["total_cycles"], result["continuous"]["total_cycles"])
    fig, axes = plt.subplots(2, 1, figsize=(10, 1.4 + 1.1 * cap), sharex=True)
    for ax, name in zip(axes, ("static", "continuous")):
        s = result[name]
        for step in s["schedule"]:
            positions = step.get("positions", range(len(step["slots"])))
            for k, (i, tok, live) in zip(positions, step["slots"]):
                ax.barh(k, step["cycles"], left=step["start"], height=0.8,
                        color=cmap(i % cmap.N) if live else "#dddddd", hatch=None if live else "///",
                        edgecolor="white" if live else "#999999", linewidth=0.3)
                if tok == 1:      # name the request where it starts
                    ax.text(step["start"] + end * 0.004, k, f"r{i} ({result['requests'][i]})", va="center", fontsize=7)
        ax.axvline(s["total_cycles"], color="black", linewidth=1)
        ax.set_yticks(range(cap))
        ax.set_yticklabels([f"slot {k}" for k in range(cap)])
        ax.invert_yaxis()
        ax.set_xlim(0, end * 1.02)
        wasted = s["slots"] - s["useful_slots"]
        ax.set_title(f"{name}: {s['total_cycles']:,} cycles, {s['steps']} steps, "
                     f"{wasted} of {s['slots']} sequence-slots wasted", fontsize=10)
    axes[-1].set_xlabel("time (GA-2 cycles, step costs from cycle_counts of the batched programs)")
    handles = [Patch(color=cmap(i % cmap.N), label=f"r{i}: {t} tokens") for i, t in enumerate(result["requests"])]
    handles.append(Patch(facecolor="#dddddd", edgecolor="#999999", hatch="///", label="idle: finished, padded"))
    # The continuous run is normally the shorter one, so the right of its panel is free for the legend.
    axes[1].legend(handles=handles, loc="center right", ncol=2, fontsize=7, title="request (tokens)",
                   title_fontsize=7)
    axes[-1].xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    fig.suptitle(f"Static against continuous batching on GA-2 ({result['capacity']} slots)", fontsize=11)
    finish_plot(fig, path)


# What the options take; the configuration narrows both (``_check``: max_ctx and rows).
REQUESTS = IntList(1, Config.field_range("max_ctx")[1], max_items=4096)
CAPACITY = Int(1, Config.field_range("rows")[1])


def _check(args):
    config = config_from_args(args)
    _validate(config, list(args.requests), config.rows if args.capacity is None else args.capacity)


def _run(args):
    config = config_from_args(args)
    cost = StepCost(config)
    result = serve(config, list(args.requests), args.capacity, cost)
    print(format_report(config, result, cost))
    return emit(args, to_json(result), lambda path: plot(result, path))


def register(sub):
    p = sub.add_parser("serving", help="static against continuous batching, step costs from the real programs",
                       description="Serve requests with static and with continuous batching; every decode step "
                                   "costs the cycles of the real batched program for the sequences present.")
    p.add_argument("--requests", default=",".join(map(str, DEFAULT_REQUESTS)), metavar="N,N,...", type=REQUESTS,
                   help="output tokens each request wants, in arrival order, each 1..--max-ctx (default %(default)s)")
    p.add_argument("--capacity", type=CAPACITY, default=None, metavar="N",
                   help="sequences per decode step, 1..--rows (default: --rows)")
    add_config_arguments(p)
    add_output_arguments(p)
    p.set_defaults(func=_run, check=_check)
