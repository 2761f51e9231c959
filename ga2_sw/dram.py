"""A DRAM behind the AXI4 port (``Config.memory``): the timing of a named DDR3 speed grade, deterministic, so
that the cycle model can include it (docs/ARCHITECTURE.md, "A DRAM behind the port").

The device is one x16 DDR3 SDRAM of 4 Gb (8 banks, 2 KiB rows, burst length 8: 16 bytes a column access),
its timing taken from the speed grade's datasheet columns (Micron MT41K256M16, JEDEC JESD79-3F) and counted
in its clock, tCK. The controller in front of it is the simplest that is still honest:

* **In order, one access at a time, open page.** A request (an AXI burst) becomes one column access per
  16-byte DRAM burst it touches, served in arrival order; each access's commands come no earlier than the last
  access's column command (no reordering, no look-ahead to other banks). A row stays open until another row
  of its bank or a refresh needs the bank.
* **Row hit:** READ or WRITE as soon as tCCD, the bus turnaround (read to write: CL + tCCD + 2 - CWL; write to
  read: the write's data, then tWTR) and the arrival allow. **Row miss:** PRECHARGE (after tRAS from the
  ACTIVATE, tRTP from the last READ, tWR after the last write's data), ACTIVATE tRP later (and tRC after the
  bank's last ACTIVATE, tRRD after any), the column command tRCD after it. **Empty bank:** ACTIVATE at once.
* **Refresh:** every tREFI from time 0, before the first access that comes at or after the due time: all banks
  are precharged (each once its rows may close), then REFRESH for tRFC; every row is closed after it.
* **Addresses** (byte ``a``): column ``a mod 2048``, bank ``(a / 2048) mod 8``, row ``a / 16384``, so a
  stream walks through a row, then the same row of the next bank.
* **Clocks:** a request taken in chip cycle ``c`` reaches the controller ``CONTROLLER_CYCLES`` chip cycles later;
  a read's beat is on R ``CONTROLLER_CYCLES`` chip cycles after the chip cycle in which its DRAM burst's
  data have all crossed the DRAM's pins; a write burst is answered on B likewise after its last data.
  ``clock_mhz`` (the chip's clock) converts between the two clocks exactly, in integers.

Not modelled: the command bus (one command per tCK), tFAW, power-down, ZQ calibration, ODT, a write buffer
or read reordering in the controller. The model is a function of the requests' arrival cycles alone, so the
pysim subordinate (``sim.axi_mem``), the Verilator harness's subordinate (its own C++ rendering, written from
this description) and the cycle model (``ga2_sw.cycles.ExternalPort``) all agree to the cycle."""

from dataclasses import dataclass

__all__ = ["DramGrade", "GRADES", "MEMORIES", "DramTiming", "CONTROLLER_CYCLES", "BURST_BYTES", "ROW_BYTES", "BANKS",
           "peak_bytes_per_cycle"]

# Chip cycles from the AXI handshake to the controller's queue, and from the DRAM's pins back to R or B (the
# controller's pipeline and the PHY, as in a soft controller such as LiteDRAM's, where they are several
# cycles each way).
CONTROLLER_CYCLES = 2

BANKS = 8                   # a 4 Gb x16 device: 8 banks,
ROW_BYTES = 2048            # 1,024 columns of 16 bits in a row (its "page size"),
BURST_BYTES = 16            # BL8 of 16 bits: 16 bytes per column access,
DATA_BYTES_PER_CK = 4       # two transfers of 16 bits per clock.


@dataclass(frozen=True)
class DramGrade:
    """A DDR3 speed grade: tCK in picoseconds and every other timing in tCK (the datasheet's ns rounded up
    to whole clocks, as a controller programs them)."""
    name: str
    tck_ps: int
    cl: int         # READ to first data
    cwl: int        # WRITE to first data
    trcd: int       # ACTIVATE to READ/WRITE
    trp: int        # PRECHARGE to ACTIVATE
    tras: int       # ACTIVATE to PRECHARGE
    trc: int        # ACTIVATE to ACTIVATE, same bank
    trrd: int       # ACTIVATE to ACTIVATE, any two banks
    twr: int        # end of write data to PRECHARGE
    twtr: int       # end of write data to READ
    trtp: int       # READ to PRECHARGE
    tccd: int       # column command to column command
    trfc: int       # REFRESH to the next command (4 Gb)
    trefi: int      # average refresh interval (0..85 C)

    @property
    def burst_ck(self):
        """Clocks a BL8 burst occupies the data pins."""
        return BURST_BYTES // DATA_BYTES_PER_CK


# Micron MT41K256M16 (4 Gb, x16) data sheet, speed grades -125 (DDR3-1600K, 11-11-11) and -25E (DDR3-800E,
# 6-6-6); tRFC 260 ns and tREFI 7.8 us for 4 Gb; tRRD max(4 tCK, 7.5 ns / 10 ns) for a 2 KiB page; tWTR and
# tRTP max(4 tCK, 7.5 ns); tWR 15 ns.
GRADES = {
    "ddr3-1600": DramGrade("ddr3-1600", tck_ps=1250, cl=11, cwl=8, trcd=11, trp=11, tras=28, trc=39, trrd=6,
                           twr=12, twtr=6, trtp=6, tccd=4, trfc=208, trefi=6240),
    "ddr3-800": DramGrade("ddr3-800", tck_ps=2500, cl=6, cwl=5, trcd=6, trp=6, tras=15, trc=21, trrd=4,
                          twr=6, twtr=4, trtp=4, tccd=4, trfc=104, trefi=3120),
}

# Config.memory's values: the ideal memory of the cycle model's formulas, or a DRAM grade.
MEMORIES = ("ideal", *GRADES)


def peak_bytes_per_cycle(grade, clock_mhz):
    """The device's peak bandwidth in bytes per chip cycle (two 16-bit transfers per tCK)."""
    return DATA_BYTES_PER_CK * 1_000_000 / (grade.tck_ps * clock_mhz)


class DramTiming:
    """The controller and device of the module docstring, fed the requests in arrival order.

    ``read(cycle, byte_addr, beats, beat_bytes)`` returns the first chip cycle each beat may be on R;
    ``write(...)`` returns the first chip cycle the burst's answer may be on B. ``cycle`` is the chip cycle the
    request was taken in (a read's AR; a write's AW or its last W beat, whichever is later). Chip cycle 0
    is the DRAM's time 0, at which every bank is precharged and a refresh interval begins."""

    def __init__(self, grade, clock_mhz):
        self.grade = grade if isinstance(grade, DramGrade) else GRADES[grade]
        self.clock_mhz = clock_mhz
        g = self.grade
        self.open_row = [None] * BANKS
        self.activated = [-(1 << 40)] * BANKS      # each bank's last ACTIVATE
        self.may_precharge = [0] * BANKS           # tRAS, tRTP, tWR
        self.may_activate = [0] * BANKS            # tRP after a precharge or a refresh
        self.last_activate = -(1 << 40)
        self.next_column = 0                       # tCCD
        self.next_read = 0                         # write to read
        self.next_write = 0                        # read to write
        self.last_command = 0                      # in order: no command before the last column command
        self.next_refresh = g.trefi
        self.refreshes = 0

    # chip cycles <-> DRAM clocks, exactly: a chip cycle lasts 10^6 / clock_mhz ps
    def _ck_of_cycle(self, cycle):
        """The first DRAM clock at or after the start of chip cycle ``cycle``."""
        return -(-cycle * 1_000_000 // (self.clock_mhz * self.grade.tck_ps))

    def _cycle_of_ck(self, ck):
        """The first chip cycle that starts at or after DRAM clock ``ck``."""
        return -(-ck * self.grade.tck_ps * self.clock_mhz // 1_000_000)

    def _refresh(self, t):
        """Refreshes due at or before clock ``t``; the clock the access may go on from."""
        g = self.grade
        while t >= self.next_refresh:
            start = max([self.next_refresh, self.last_command] +
                        [self.may_precharge[b] for b in range(BANKS) if self.open_row[b] is not None])
            done = start + g.trp + g.trfc
            self.open_row = [None] * BANKS
            self.may_activate = [done] * BANKS
            self.last_command = done
            self.next_refresh += g.trefi
            self.refreshes += 1
            t = max(t, done)
        return t

    def _access(self, t, addr, write):
        """One column access to the 16-byte burst at byte ``addr`` that may begin at clock ``t``: the clock
        its data have all crossed the pins."""
        g = self.grade
        bank, row = addr // ROW_BYTES % BANKS, addr // (ROW_BYTES * BANKS)
        t = self._refresh(max(t, self.last_command))
        if self.open_row[bank] != row:
            if self.open_row[bank] is not None:
                activate = max(t, self.may_precharge[bank]) + g.trp
            else:
                activate = max(t, self.may_activate[bank])
            activate = max(activate, self.activated[bank] + g.trc, self.last_activate + g.trrd)
            self.open_row[bank], self.activated[bank], self.last_activate = row, activate, activate
            self.may_precharge[bank] = activate + g.tras
            t = activate + g.trcd
        column = max(t, self.next_column, self.next_write if write else self.next_read)
        self.last_command, self.next_column = column, column + g.tccd
        if write:
            end = column + g.cwl + g.burst_ck
            self.may_precharge[bank] = max(self.may_precharge[bank], end + g.twr)
            self.next_read = max(self.next_read, end + g.twtr)
        else:
            end = column + g.cl + g.burst_ck
            self.may_precharge[bank] = max(self.may_precharge[bank], column + g.trtp)
            self.next_write = max(self.next_write, column + g.cl + g.tccd + 2 - g.cwl)
        return end

    def _bursts(self, byte_addr, beats, beat_bytes):
        """The DRAM bursts of a request, in order, each with the number of the request's beats in it (a beat is
        never split: beat_bytes divides BURST_BYTES and beats are aligned)."""
        out = []
        for n in range(beats):
            burst = (byte_addr + n * beat_bytes) // BURST_BYTES
            if out and out[-1][0] == burst:
                out[-1][1] += 1
            else:
                out.append([burst, 1])
        return out

    def read(self, cycle, byte_addr, beats, beat_bytes):
        t = self._ck_of_cycle(cycle + CONTROLLER_CYCLES)
        ready = []
        for burst, n in self._bursts(byte_addr, beats, beat_bytes):
            end = self._access(t, burst * BURST_BYTES, write=False)
            ready += [self._cycle_of_ck(end) + CONTROLLER_CYCLES] * n
        return ready

    def write(self, cycle, byte_addr, beats, beat_bytes):
        t = self._ck_of_cycle(cycle + CONTROLLER_CYCLES)
        end = t
        for burst, _ in self._bursts(byte_addr, beats, beat_bytes):
            end = self._access(t, burst * BURST_BYTES, write=True)
        return self._cycle_of_ck(end) + CONTROLLER_CYCLES
