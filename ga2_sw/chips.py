"""The catalogue of named GA-2 chips: every configuration the project measures, names and places.

A chip is a ``Config`` with a name, a one-line purpose and the ECP5 device it is placed on. Each one is derived
from another where it is one (``decoupled`` is ``chapter`` run decoupled; ``fast`` is ``decoupled`` with the
4-byte port and the lanes that win its decode step), so the catalogue reads as a family tree, as Gemmini's
``GemminiConfigs`` does. Every command takes ``--chip NAME`` (default ``decoupled``, ``DEFAULT_CHIP``), and an
option given beside it overrides that one field; the Python API gives the same chip: ``chip("fast").config``,
or ``config_of("fast", rows=8)`` for the same request as ``--chip fast --rows 8``.

A chip's ``config`` holds both the hardware (the fields that reach the RTL: ``Config.hardware()``, which alone
determine its Verilog) and the workload it is measured on (head shape, context, the memory model and the clock
the reports use: ``WORKLOAD_FIELDS``). Its datasheet (area, the Fmax of placement seeds 1, 2 and 3, its decode
steps, tokens per second) is measured by ``python -m synth datasheet --chip NAME`` and recorded in
``ga2_sw/datasheets.json`` (``load_datasheets``); ``ga2 chips`` lists them and docs/CHIPS.md is generated from the records.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from .config import Config, WORKLOAD_FIELDS

__all__ = ["Chip", "CATALOGUE", "CHIP_NAMES", "DEFAULT_CHIP", "DATASHEETS", "chip", "config_of", "name_of",
           "load_datasheets", "measured_fmax", "configuration_changes"]

# The recorded datasheets, written by ``python -m synth datasheet`` and read here and by ``ga2 chips``.
DATASHEETS = Path(__file__).with_name("datasheets.json")


@dataclass(frozen=True)
class Chip:
    """A named configuration: ``name``, a one-line ``purpose``, the nextpnr-ecp5 ``device`` it is placed on
    (``"25k"``, ``"45k"`` or ``"85k"``: an LFE5U-25F, -45F or -85F), the ``config``, and ``base``, the chip it
    is derived from (None for a root)."""
    name: str
    purpose: str
    device: str
    config: Config
    base: str | None = None

    @property
    def device_name(self):
        """The device as its vendor names it: ``LFE5U-25F``."""
        return f"LFE5U-{self.device[:-1].upper()}F"

    def derive(self, name, purpose, device=None, **changes):
        """A chip of this one with ``changes`` to its configuration, on ``device`` (default: this one's)."""
        return Chip(name, purpose, device or self.device, self.config.replace(**changes), base=self.name)

    def to_dict(self):
        return {"name": self.name, "purpose": self.purpose, "device": self.device_name, "base": self.base,
                "config": self.config.to_dict(), "workload": {k: getattr(self.config, k) for k in WORKLOAD_FIELDS}}


def _catalogue():
    chapter = Chip("chapter", "the chapter's chip: a 4 x 4 array, one instruction at a time, a word a cycle from "
                   "memory", "25k", Config())
    decoupled = chapter.derive("decoupled", "the default: the chapter's chip with the DMA beside the compute units "
                               "under a scoreboard, on 8 banks, near its memory bound", "45k", mode="decoupled")
    fast = decoupled.derive("fast", "the fastest decode step on 8 banks: a 4-byte port, a row of results a cycle, "
                            "overlapped loads and requantisations, a tile a row, 2 requantiser and 2 softmax lanes",
                            "85k", bus_bytes=4, row_writes=1, rq_overlap=1, ld_overlap=1, row_b=1,
                            rq_lanes=2, sm_lanes=2)
    axi = decoupled.derive("axi", "an AXI4 manager of 4 bytes a beat, measured against a DDR3-1600 device's "
                           "timing: the chip an SoC can hold", bus_bytes=4, axi=1, memory="ddr3-1600")
    long = decoupled.derive("long", "the online unit: attention over contexts to 4,096 tokens with KV caches "
                            "streamed in 64-token chunks, head dimension 64", "85k", online_unit=1,
                            sp_words=32768, imem_words=4096, ext_words=131072, d=64, d_model=256, max_ctx=4096)
    llm = decoupled.derive("llm", "SmolLM2-135M's weights streamed from a DDR3-800 at 16 bytes a beat into an "
                           "8 x 16 array over AXI4, with the online unit and wide scores for its attention and int32 "
                           "sums stored whole", "85k",
                           rows=8, cols=16, sp_banks=32, bus_bytes=16, axi=1, row_writes=1, online_unit=1, st_words=1,
                           wide_scores=1,
                           sp_words=65536, imem_words=4096, ext_words=1 << 22, d=64, d_model=576, max_ctx=4096,
                           memory="ddr3-800")
    prefill8 = decoupled.derive("prefill8", "an 8 x 8 array on 32 banks with a 4-byte port and a row of results "
                                "a cycle: prefill near its 64 MACs a cycle", "85k", rows=8, cols=8, sp_banks=32,
                                bus_bytes=4, row_writes=1, sp_words=65536, ext_words=131072, d=64,
                                d_model=256, max_ctx=64)
    # The chapter's argument on two chips: four times the MACs leave the decoupled chip's step where its memory
    # puts it, and take less than a tenth off the in-order chip's (`ga2 decode-table --chip chapter8`).
    # On an 85F: on the 45F its 64 PEs' multipliers took 69 of the 72 and the routes between neighbours set the
    # clock (82.11 MHz, docs/SYNTH.md).
    chapter8 = chapter.derive("chapter8", "the chapter's chip with an 8 x 8 array: four times the MACs, one "
                              "instruction at a time, batches to 8", "85k", rows=8, cols=8, sp_words=8192,
                              ext_words=16384)
    # On an 85F for chapter8's reason: 64 PEs would take 69 of the 45F's 72 multipliers.
    decoupled8 = decoupled.derive("decoupled8", "the default chip with an 8 x 8 array: four times the MACs and "
                                  "the same memory-bound step, batches to 8", "85k", rows=8, cols=8, sp_words=8192,
                                  ext_words=16384)
    chapter2 = chapter.derive("chapter2", "the chapter's chip with a 2 x 2 array: the smallest GA-2, the quickest "
                              "to simulate", rows=2, cols=2)
    return {c.name: c for c in (chapter, decoupled, fast, axi, long, llm, prefill8, chapter8, decoupled8, chapter2)}


CATALOGUE = _catalogue()
CHIP_NAMES = tuple(CATALOGUE)

# The chip every command builds unless told: the chapter's decode steps in 2.78 x fewer cycles than the chapter's
# chip at B = 4, near its memory bound (docs/CHIPS.md).
DEFAULT_CHIP = "decoupled"


def chip(name):
    """The catalogue's chip ``name``; ValueError naming the known chips for any other name."""
    try:
        return CATALOGUE[name]
    except (KeyError, TypeError):
        raise ValueError(f"Unknown chip {name!r}; known: {', '.join(CHIP_NAMES)}") from None


def config_of(name=DEFAULT_CHIP, **changes):
    """The configuration of chip ``name`` with ``changes``: what ``--chip NAME --field value ...`` builds."""
    return chip(name).config.replace(**changes)


def name_of(config):
    """The name of the catalogue chip whose hardware ``config`` is (``Config.hardware()``), or None."""
    hardware = config.hardware()
    return next((c.name for c in CATALOGUE.values() if c.config.hardware() == hardware), None)


def load_datasheets(path=DATASHEETS):
    """The recorded datasheets, ``{name: record}`` (empty when the file does not exist); ValueError naming the
    file when it is not a record file. A record: ``{"name", "purpose", "device", "config", "datasheet": {...}}``."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        records = json.loads(path.read_text())["chips"]
        assert isinstance(records, dict) and all(isinstance(r["datasheet"], dict) for r in records.values())
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
        raise ValueError(f"{path}: not a datasheet record file ({type(exc).__name__}: {exc})") from None
    return records


def configuration_changes(recorded, config):
    """``{field: [recorded value, the catalogue's]}`` of the fields in which a record's configuration differs from
    the catalogue's chip ``config``: a datasheet of an earlier chip. (A record holds the fields there were when it
    was made: a field added since is at its default.)"""
    then, now = Config.from_dict(recorded).to_dict(), config.to_dict()
    return {k: [then[k], now[k]] for k in now if then[k] != now[k]}


def measured_fmax(name, path=DATASHEETS):
    """The median Fmax (MHz) of chip ``name``'s recorded datasheet, or None: not measured, not today's chip
    configuration (``configuration_changes``), or a seed that did not route."""
    record = load_datasheets(path).get(name)
    if record is None or configuration_changes(record["config"], chip(name).config):
        return None
    return record["datasheet"]["fmax_mhz"]
