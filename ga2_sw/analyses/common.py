"""Output helpers shared by the analyses: tables for people, JSON for machines, PNG plots."""

import json

__all__ = ["table", "write_json", "add_output_arguments", "finish_plot", "emit"]


def table(headers, rows, aligns=None):
    """A plain-text table; numbers right-aligned, text left-aligned."""
    cells = [[str(h) for h in headers]] + [[c if isinstance(c, str) else _fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    if aligns is None:                           # text columns left, numbers right
        aligns = ["<" if rows and all(isinstance(row[i], str) for row in rows) else ">" for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(f"{c:{a}{w}}" for c, a, w in zip(row, aligns, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(v):
    if v is None:
        return "--"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")


def add_output_arguments(parser):
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--plot", metavar="FILE.png", help="draw the figure into a PNG file")


def emit(args, json_obj, plot):
    """After an analysis has printed its report: write ``--json`` and draw ``--plot`` (``plot(path)``)."""
    if args.json:
        write_json(args.json, json_obj)
    if args.plot:
        plot(args.plot)
    return 0


def finish_plot(fig, path):
    import matplotlib
    matplotlib.use("Agg")                        # files only: never needs a display
    import matplotlib.pyplot as plt
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"plot: {path}")
