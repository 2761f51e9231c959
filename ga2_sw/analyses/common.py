"""Output helpers shared by the analyses: tables for people, JSON for machines, PNG plots. Files are written
atomically (``ga2_sw.options.atomic_write``): a failure leaves no partial file."""

import json
import sys

from ..options import OutputFile, atomic_write, need_matplotlib, savefig

# What --plot writes: the formats matplotlib draws without extra packages.
PLOT_SUFFIXES = (".png", ".pdf", ".svg")

__all__ = ["table", "write_json", "add_output_arguments", "finish_plot", "emit", "progress_bar", "chip_options"]


def progress_bar(total, disabled, unit):
    """A progress bar on stderr (the tables and JSON go to stdout), gone when it is done."""
    from tqdm import tqdm
    return tqdm(total=total, unit=unit, file=sys.stderr, disable=disabled, dynamic_ncols=True, leave=False)


def chip_options(config):
    """The decoupled chip's options that change its timing, as a table's title names them: ", a row of results a
    cycle, overlapped RQs, ..." (empty without any)."""
    named = [what for field, what in (("row_writes", "a row of results a cycle"), ("row_b", "a B per array row"),
                                      ("rq_overlap", "overlapped RQs"), ("ld_overlap", "overlapped LDs"),
                                      ("axi", "an AXI4 port"))
             if getattr(config, field)]
    if config.rq_lanes > 1:
        named.insert(named.index("overlapped RQs") + 1, f"{config.rq_lanes} RQ lanes")
    return "".join(f", {what}" for what in named)


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
    """``obj`` as indented JSON in ``path``, written atomically (the whole file or none)."""
    text = json.dumps(obj, indent=2, sort_keys=False) + "\n"    # a value JSON cannot hold fails before the file
    with atomic_write(path) as f:
        f.write(text)


def json_option():
    """The validator of a ``--json FILE`` option."""
    return OutputFile()


def plot_option():
    """The validator of a ``--plot FILE.png`` option: a writable file ending in .png, .pdf or .svg, and
    matplotlib installed (else exit status 4 before any work)."""
    return OutputFile(suffixes=PLOT_SUFFIXES, needs=need_matplotlib)


def add_output_arguments(parser):
    parser.add_argument("--json", metavar="FILE", type=json_option(), help="write the results as JSON")
    parser.add_argument("--plot", metavar="FILE.png", type=plot_option(),
                        help="draw the figure into a PNG file (or .pdf, .svg)")


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
    try:
        savefig(fig, path, dpi=120)
    finally:
        plt.close(fig)
    print(f"plot: {path}")
