"""Mapping of the hierarchical module names Yosys prints for the generated Verilog to GA-2's units.

Amaranth names each submodule by its path: ``ga2``, ``ga2.sequencer`` (and its instruction checker,
``ga2.sequencer.checker.operands`` / ``.ranges``), ``ga2.scratchpad``, ``ga2.dma``, ``ga2.mm``,
``ga2.mm.feeder``, ``ga2.mm.writer``, ``ga2.mm.array``, ``ga2.mm.array.pe_R_C``, ``ga2.rq``, ``ga2.rq.pipeline``,
``ga2.sm``, ``ga2.sm.front``, ``ga2.sm.back``, ``ga2.sm.back.divider``; a module is charged to the unit of its
longest listed prefix (the matrix unit's feeder and writer count as ``matrix_unit``, its array as ``array``)."""

__all__ = ["UNITS", "unit_of_module", "split_by_unit", "IGNORED_CELLS"]


def _execution_units():
    """(submodule name, report name) of every execution unit, read from the chip's own unit table: the top
    names each unit's submodule by its ``ga2_sw.isa.UNITS`` name, and a unit is reported by the file its
    class lives in (``mm`` -> ``matrix_unit``), so a new unit needs no entry here."""
    from ga2_sw.isa import UNITS as UNIT_NAMES
    from ga2_hdl.top import UNIT_CLASSES
    return [(name, UNIT_CLASSES[name].__module__.rsplit(".", 1)[-1]) for name in UNIT_NAMES]


# Display order; "array" is the matrix unit's systolic array, reported on its own; "top" is the glue in module
# ga2 itself (scratchpad port multiplexers, host read port).
UNITS = ["array", *(unit for _, unit in _execution_units()), "sequencer", "scratchpad", "top"]

_PREFIXES = sorted([("ga2.mm.array", "array"), ("ga2.sequencer", "sequencer"), ("ga2.scratchpad", "scratchpad"),
                    *((f"ga2.{name}", unit) for name, unit in _execution_units())],
                   key=lambda p: -len(p[0]))            # longest prefix first

# Bookkeeping cells that are not hardware (Yosys keeps one per flattened Amaranth scope).
IGNORED_CELLS = {"$scopeinfo"}


def unit_of_module(name):
    name = name.lstrip("\\")
    for prefix, unit in _PREFIXES:
        if name == prefix or name.startswith(prefix + "."):
            return unit
    if name == "ga2":
        return "top"
    return "other"


def split_by_unit(stat):
    """(total, units) from Yosys ``stat -json`` output of a hierarchical design with top ``ga2``.

    Each module's own cells (submodule instances excluded) are charged to its unit, times the number of
    times the module is instantiated under ``ga2``; so the units add up to the total exactly."""
    modules = {name.lstrip("\\"): m["num_cells_by_type"] for name, m in stat["modules"].items()}
    count = {}

    def visit(name, times):
        count[name] = count.get(name, 0) + times
        for cell, n in modules[name].items():
            if cell in modules:
                visit(cell, times * n)

    top = "ga2" if "ga2" in modules else next(iter(modules))
    visit(top, 1)
    units = {}
    for name, times in count.items():
        unit = units.setdefault(unit_of_module(name), {})
        for cell, n in modules[name].items():
            if cell in modules or cell in IGNORED_CELLS:
                continue
            unit[cell] = unit.get(cell, 0) + n * times
    total = {}
    for cells in units.values():
        for cell, n in cells.items():
            total[cell] = total.get(cell, 0) + n
    ordered = {u: dict(sorted(units.get(u, {}).items())) for u in UNITS}
    if units.get("other"):
        ordered["other"] = dict(sorted(units["other"].items()))
    return dict(sorted(total.items())), ordered
