"""GA-2 in a LiteX SoC (docs/SOC.md): a VexRiscv CPU runs the project's firmware, which drives a catalogue chip
with the AXI4 port through its CSRs while the chip reads and writes LiteDRAM's memory.

``payload`` (what the firmware runs and what it must leave; ``ga2_sw`` alone), ``soc`` (the LiteX wrapper and
the simulated system), ``simulate`` (the Verilator build, the firmware, a run and its checks), ``board`` (the
ULX3S bitstream) and ``commands`` (``ga2 soc sim|build``). It imports ``ga2_sw``, ``ga2_hdl`` and ``sim``;
only ``ga2_cli`` (the command line) imports it."""
