"""The decoupled chip's scratchpad: ``sp_banks`` true dual-port block RAM banks, port A for the DMA lane and
port B for the matrix and vector lanes."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import memory
from amaranth.lib.wiring import Out
from amaranth.utils import exact_log2

from ga2_sw.banking import bank_among, row_among
from ga2_sw.timing import (AXI_ST_DATA_DELAY, BANKED_DATA_DELAY, BANKED_READ_DELAY, BANKED_SELECT_DELAY,
                           PORT_B_ANNOUNCE, SP_WRITE_DELAY)

from ..ports import WORD
from .scratchpad import PortGroups, and_or, or_all

__all__ = ["BankedScratchpad", "bank_index"]


def bank_index(addr, banks):
    """The bank of scratchpad address ``addr`` (a Value) among ``banks``: ``(addr + (addr >> b)) mod banks``, the
    RTL of ``ga2_sw.banking.bank_of`` (a test holds the two equal on every address)."""
    b = exact_log2(banks)
    wide = Cat(addr, Const(0, b))           # at least b bits above the bank bits, whatever the address width
    return (wide + (wide >> b))[:b]


class BankedScratchpad(PortGroups):
    """``depth`` words in ``banks`` banks (``ga2_sw.banking``: word ``a`` is row ``a >> b`` of
    bank ``(a + (a >> b)) mod sp_banks``), with the named port groups of :class:`~ga2_hdl.memory.scratchpad.Scratchpad`.

    Each bank is one memory with two ports, each able to read or write a word per cycle: port A serves the
    groups named in ``port_a`` (the DMA lane), port B all others (the matrix and vector lanes). Each requester's
    address is routed to its bank, and a read's data comes back from the bank it addressed. The requesters of one port
    must never reach one bank in the same cycle, and the two ports must never touch one word in the same cycle
    while one of them writes it: the lanes' units and the scoreboard guarantee both (docs/ARCHITECTURE.md,
    "The banked scratchpad"), which is what lets each bank be a block RAM. So the memories carry Yosys'
    ``no_rw_check``: a port's read during its own write, or a collision between the ports, is left undefined
    in the netlist, which is what maps a bank onto an ECP5 DP16KD in true dual-port mode (Yosys cannot map a
    same-clock true dual-port memory otherwise). Simulation returns the old word in both cases.

    Write requests are registered for ``SP_WRITE_DELAY`` cycle, as in the one-memory scratchpad, and so are all
    read requests (``BANKED_READ_DELAY``). Each registered request holds its bank decoded, one bit per bank (a
    read's apart from its enable, which meets them at the banks), so that between the registers and a bank's
    address there is only the bank's AND-OR of its requesters: the units' address and arbitration logic ends at
    the registers, not in 32 block RAMs across the die. The data a
    bank reads for port B's groups is registered at the bank (``BANKED_DATA_DELAY``) before each group selects
    its bank, and the selected word is registered again (``BANKED_SELECT_DELAY``) before the group's units see
    it, so the block RAMs' clock-to-output, the routes across the die, the select and the units' own logic
    each have a cycle: their data comes four cycles after the request. Port A's reads (the DMA lane's, and
    the host's debug reads, which share its group) take their data straight from the banks, two cycles after
    the request; with ``port_a_data_registered`` (a decoupled AXI4 chip's, ``ga2_sw.timing.dma_data_at_banks``)
    through a data register at each bank, three cycles after it, the select among the banks unregistered (the
    AXI4 DMA's data register, ``AXI_ST_DATA_DELAY``, moved to the banks). The requesters of a group (a lane's
    units, which
    run one instruction at a time) are merged before the register, so a bank sees one request per group and
    a write's data fans out from one register without a multiplexer per bank.

    The groups named in ``first`` (the vector lane) have port B before the others: their read and write requests
    pass one more register first (``PORT_B_ANNOUNCE``), so that the other requesters of port B (the matrix unit)
    can keep off their banks in the cycle the requests leave that register, when their own requests enter the
    request registers beside those. ``first_banks_next`` says, one bit per bank, which banks the requests
    entering the announce registers take: decoded, not registered, so that each user registers its own copy
    beside its own logic (the matrix unit's operand arbitration and its result writer). One shared register
    here put the route from the scratchpad to the matrix unit at the head of the decoupled chip's worst paths
    (`vector_announce_banks` -> the feeder's slice registers, 10.28 and 10.57 ns on a 25F).

    A lane set (``lane_reads``, ``lane_writes``: tuples of read or write groups of one port, in lane order) is
    groups whose requests of a cycle ask for consecutive words (the packed DMA's byte lanes, the result writer's
    row of words; ``ga2_hdl.top.lane_sets``): their rows are at most two neighbours, so each bank takes its row
    from the set's even row or its odd row (``_lane_rows``) instead of an AND-OR of every lane's.

    Members
    -------
    rd_<group> : In(SpReadSignature).array(n)
    wr_<group> : In(SpWriteSignature).array(n)
    first_banks_next : Out(sp_banks)
        With ``first`` groups only: the banks their requests take on port B in the cycle after the next (the
        banks of the requests entering the announce registers now); a user's register of it is the banks
        they take in its cycle.
    """

    def __init__(self, *, depth, addr_width, banks, reads, writes, port_a=(), first=(), init=(),
                 port_a_data_registered=False, lane_reads=(), lane_writes=()):
        self._banks = banks
        super().__init__(addr_width=addr_width, reads=reads, writes=writes,
                         members={"first_banks_next": Out(banks)} if first else None)
        for names, what in ((port_a, "Port A"), (first, "First")):
            unknown = set(names) - set(self._reads) - set(self._writes)
            if unknown:
                raise ValueError(f"{what} group(s) {', '.join(sorted(unknown))} are not read or write groups")
        # A write set's words are rotated to their banks where the bank map repeats with the address space: lane
        # 0's word `a` may lie below address 0 (an unaligned LD's first beat), its run then wrapping past the
        # top, where the rows start again at 0 and the banks stay in step only if the rows, 2**addr_width / banks
        # of them, are a multiple of the banks (_lane_data).
        self._rotates = addr_width >= 2 * exact_log2(banks)
        if set(first) & set(port_a):
            raise ValueError("A group on port A cannot go first on port B")
        self._port_a, self._first = tuple(port_a), tuple(first)
        self._lane_sets = {"read": [tuple(x) for x in lane_reads], "write": [tuple(x) for x in lane_writes]}
        for kind, known in (("read", self._reads), ("write", self._writes)):
            for lanes in self._lane_sets[kind]:
                if not set(lanes) <= set(known) or len(set(lanes)) != len(lanes) or len(lanes) < 2:
                    raise ValueError(f"Lane set {lanes} must be two or more distinct {kind} groups")
                if len({g in self._port_a for g in lanes}) != 1:
                    raise ValueError(f"Lane set {lanes} must be on one port")
        self._port_a_data_registered = bool(port_a_data_registered)
        nb, rows = banks, depth // banks
        words = list(init) + [0] * (depth - len(init))
        images = [[0] * rows for _ in range(nb)]
        for addr, word in enumerate(words):
            images[bank_among(addr, nb)][row_among(addr, nb)] = word
        self.collided = Signal()            # see elaborate()
        self.banks = [memory.Memory(shape=WORD, depth=rows, init=images[n], attrs={"no_rw_check": 1})
                      for n in range(nb)]

    def cell(self, addr):
        """The simulator's handle on word ``addr`` (for ``ctx.get``/``ctx.set``)."""
        return self.banks[bank_among(addr, self._banks)].data[row_among(addr, self._banks)]

    def read_latency(self, group):
        """Cycles from a read request of ``group`` to its data."""
        if group in self._port_a:
            return 1 + BANKED_READ_DELAY + (AXI_ST_DATA_DELAY if self._port_a_data_registered else 0)
        return (1 + BANKED_READ_DELAY + BANKED_DATA_DELAY + BANKED_SELECT_DELAY
                + (PORT_B_ANNOUNCE if group in self._first else 0))

    def _registered(self, group):
        """Whether ``group``'s read data is registered at the bank and after its select (port B's groups)."""
        return group not in self._port_a

    def _data_registered(self, group):
        """Whether ``group``'s read data is registered at the bank: port B's groups, and port A's with
        ``port_a_data_registered``."""
        return self._registered(group) or self._port_a_data_registered

    def elaborate(self, platform):
        m = Module()
        accesses = {}                       # (port, bank) -> (any access, write, row)
        # Two requesters of one group asking in one cycle (a lane runs one instruction at a time), two requests
        # on one bank and port, or the ports on one word while one writes it: watched, see below.
        clashes = [sum(Cat(*(r.en for r in group))) > 1
                   for group in [*map(self.read_group, self._reads), *map(self.write_group, self._writes)]
                   if len(group) > 1]
        for n, bank in enumerate(self.banks):
            m.submodules[f"bank{n}"] = bank
        assert SP_WRITE_DELAY == 1, "a write request is registered once before the memory"
        assert BANKED_READ_DELAY == 1 and BANKED_DATA_DELAY == 1 and BANKED_SELECT_DELAY == 1, \
            "a registered read is registered once before the memory, once at the bank and once after the select"
        assert PORT_B_ANNOUNCE == 1, "a first group's requests are registered once more, their banks decoded"
        assert AXI_ST_DATA_DELAY == 1, "port A's data, where registered, is registered once, at the bank"
        self._announced = []                # the bank bits of the requests entering the announce registers
        for port_name in ("a", "b"):
            self._port(m, port_name, clashes, accesses)
        # What the ports' users promise, watched for the simulators: `collided` is sticky and drives nothing, so
        # synthesis drops it.
        for n in range(len(self.banks)):
            (a_any, a_we, a_row), (b_any, b_we, b_row) = accesses["a", n], accesses["b", n]
            clashes.append((a_row == b_row) & (a_we & b_any | b_we & a_any))
        with m.If(Cat(*clashes).any()):
            m.d.sync += self.collided.eq(1)
        if self._first:
            m.d.comb += self.first_banks_next.eq(or_all(self._announced))
        return m

    def _port(self, m, port_name, clashes, accesses):
        """Port ``port_name`` ("a": the groups of ``port_a``; "b": the others) of every bank: its groups' requests,
        a lane set's as one, merged at each bank. Records each bank's (any access, write, row) in ``accesses``."""
        on_port = (lambda g: g in self._port_a) if port_name == "a" else (lambda g: g not in self._port_a)
        # One read-or-write port per bank: a read port and a write port on one address, which Yosys merges.
        ports = [(bank.read_port(), bank.write_port()) for bank in self.banks]
        # Each bank's read data, and its register at the bank for the registered groups (port B's).
        outputs = [rp.data for rp, _ in ports]
        registered = []
        if any(self._data_registered(g) for g in self._reads if on_port(g)):
            registered = [Signal(WORD, name=f"{port_name}{n}_data") for n in range(len(ports))]
            m.d.sync += [reg.eq(out) for reg, out in zip(registered, outputs)]
        reads = {g: self._read_request(m, g, registered if self._data_registered(g) else outputs)
                 for g in self._reads if on_port(g)}
        writes = {g: self._write_request(m, g) for g in self._writes if on_port(g)}
        # A lane set's rows: each bank takes one of the set's two rows by the low bit of its lane's.
        requests = {"read": reads, "write": writes}
        lane_rows = [self._lane_rows(m, clashes, [requests[kind][g][:2] for g in lanes], f"{port_name}_{kind}s{k}")
                     for kind in ("read", "write") for k, lanes in enumerate(self._lane_sets[kind])
                     if lanes[0] in requests[kind]]
        in_sets = {(kind, g) for kind in ("read", "write") for lanes in self._lane_sets[kind] for g in lanes}
        # A write set's data: each bank's word rotated there from its lane.
        rotated = [lanes for lanes in self._lane_sets["write"] if lanes[0] in writes and self._rotates]
        lane_data = [self._lane_data(m, clashes, lanes, [writes[g] for g in lanes], f"{port_name}_writes{k}")
                     for k, lanes in enumerate(rotated)]
        rotated_groups = {g for lanes in rotated for g in lanes}
        for n, (rp, wp) in enumerate(ports):
            read_hits = [(hits[n], row) for hits, row in reads.values()]
            write_hits = [(hits[n], row, data) for hits, row, data in writes.values()]
            row = Signal(len(rp.addr), name=f"{port_name}{n}_row")
            hits = Cat(*(hit for hit, _ in read_hits), *(hit for hit, _, _ in write_hits))
            clashes.append(sum(hits) > 1)
            accesses[port_name, n] = (hits.any(), wp.en, row)
            rows = ([(hits[n], r) for g, (hits, r) in reads.items() if ("read", g) not in in_sets] +
                    [(hits[n], r) for g, (hits, r, _) in writes.items() if ("write", g) not in in_sets] +
                    [lane_row(n) for lane_row in lane_rows])
            m.d.comb += [
                row.eq(and_or(rows)),
                rp.addr.eq(row), wp.addr.eq(row),
                rp.en.eq(Cat(*(hit for hit, _ in read_hits)).any()),
                wp.en.eq(Cat(*(hit for hit, _, _ in write_hits)).any()),
                wp.data.eq(self._bank_data(n, writes, rotated_groups, lane_data)),
            ]

    @staticmethod
    def _bank_data(n, writes, rotated, lane_data):
        """Bank ``n``'s write data: an AND-OR of its write groups' (a lane set's as one, rotated there)."""
        terms = ([(hits[n], data) for g, (hits, _, data) in writes.items() if g not in rotated] +
                 [at_bank(n) for at_bank in lane_data])
        return and_or(terms) if len(terms) > 1 else terms[0][1] if terms else 0

    def _lane_data(self, m, clashes, lanes, requests, name):
        """A write set's data as one requester per bank: a function of the bank ``n`` giving (whether a lane of
        the set writes it, its word).

        Lane ``j`` asks for word ``a + j`` (``a``, lane 0's address, whether lane 0 writes or not), which is on
        bank ``(bank(a) + j + c) mod Nb`` with ``c`` one where ``a mod Nb + j`` passes ``Nb`` (the bank map's
        step at each row, ``ga2_sw.banking``): so the words, a gap opened at that lane and rotated by
        ``bank(a)``, are the banks' (two registers of lane 0's address, ``bank(a)`` and ``a mod Nb``, and
        ``log2(Nb) + 1`` levels of two-way multiplexers in place of an AND-OR of every lane at every bank).
        What it assumes, each lane's word ``a + j``, is watched (``collided``). Addresses wrap at
        ``2**addr_width``: the banks of a run that wraps are still the rotation's when the rows are a multiple of
        the banks (``_rotates``; else the set's data is an AND-OR of its lanes like any group's)."""
        (requester,) = self.write_group(lanes[0])
        b, nb = exact_log2(self._banks), self._banks
        base, low = Signal(b, name=f"{name}_base_bank"), Signal(b, name=f"{name}_base_low")
        m.d.sync += [base.eq(bank_index(requester.addr, nb)), low.eq(requester.addr[:b])]
        words = [data for _, _, data in requests] + [Const(0, WORD)] * (nb - len(requests))
        # Position k of the gap-opened run: lane k before the step, lane k - 1 after it (k = nb - low is none).
        opened = [words[0]] + [Mux(low < nb - k, words[k], words[k - 1]) for k in range(1, nb)]
        for level in range(b):                  # rotated by base: position k to bank (k + base) mod nb
            step = 1 << level
            opened = [Mux(base[level], opened[(k - step) % nb], opened[k]) for k in range(nb)]
        at = [Signal(WORD, name=f"{name}_bank{k}_data") for k in range(nb)]
        m.d.comb += [a.eq(w) for a, w in zip(at, opened)]
        row0 = requests[0][1]
        for j, (hits, row, _) in enumerate(requests):
            past = low >= nb - j if j else Const(0, 1)
            expected = (Cat(base, Const(0, 1)) + j + past)[:b]
            clashes.append(hits.any() & ((hits != Const(1, nb) << expected) | (row != (row0 + past)[:len(row)])))

        def at_bank(n):
            return Cat(*(hits[n] for hits, _, _ in requests)).any(), at[n]
        return at_bank

    def _lane_rows(self, m, clashes, requests, name):
        """The rows of a lane set (``requests``: each lane's registered (bank hits, row)) as one requester per
        bank: a function of the bank ``n`` giving (whether a lane of the set is on it, its row).

        The lanes of a set (the packed DMA's, the result writer's row of words) ask for consecutive words, so
        their rows are at most two neighbours, one even and one odd: the set's even row and its odd row are
        each an AND-OR over the lanes, once, and a bank takes the one the low bit of its lane's row names (an
        AND-OR of one bit), in place of the AND-OR of every lane's row at every bank. What it assumes, two rows
        of different parity at most, is watched (``collided``)."""
        width = len(requests[0][1])
        on = [hits.any() for hits, _ in requests]
        even, odd = Signal(width, name=f"{name}_even_row"), Signal(width, name=f"{name}_odd_row")
        m.d.comb += [even.eq(and_or([(o & ~row[0], row) for o, (_, row) in zip(on, requests)])),
                     odd.eq(and_or([(o & row[0], row) for o, (_, row) in zip(on, requests)]))]
        clashes += [o & (row != Mux(row[0], odd, even)) for o, (_, row) in zip(on, requests)]

        def at_bank(n):
            hit = Cat(*(hits[n] for hits, _ in requests)).any()
            low = Cat(*(hits[n] & row[0] for hits, row in requests)).any()
            return hit, Mux(low, odd, even)
        return at_bank

    def _announce(self, m, group, en, addr, data=None):
        """A first group's request registered once more, its bank decoded one-hot for ``first_banks_next``:
        (en, addr, data) as the request register sees them a cycle later."""
        suffix = "_wr" if data is not None else ""
        en_q = Signal(name=f"{group}{suffix}_announce_en")
        addr_q = Signal(len(addr), name=f"{group}{suffix}_announce_addr")
        hits = Signal(self._banks, name=f"{group}{suffix}_announcing_banks")
        m.d.comb += hits.eq(self._bank_hits(en, bank_index(addr, self._banks)))
        m.d.sync += [en_q.eq(en), addr_q.eq(addr)]
        self._announced.append(hits)
        if data is None:
            return en_q, addr_q, None
        data_q = Signal(WORD, name=f"{group}_wr_announce_data")
        m.d.sync += data_q.eq(data)
        return en_q, addr_q, data_q

    def _bank_hits(self, en, bank):
        """One bit per bank: ``en`` and the bank is ``bank`` (a bank index)."""
        return Mux(en, Const(1, self._banks) << bank, 0)

    def _read_request(self, m, group, bank_data):
        """(bank hits, row) of a read group's request as the banks see it; connects its requesters' data to
        the bank it read (``bank_data``: the banks' outputs, or their data registers). Every read request is
        registered first (``BANKED_READ_DELAY``), its bank decoded; the data of a group on port B comes
        through the bank's data register (``BANKED_DATA_DELAY``) and the group's select register
        (``BANKED_SELECT_DELAY``); a group on port A through the bank's data register only where port A's data
        is registered."""
        requesters = list(self.read_group(group))
        en = Cat(*(r.en for r in requesters)).any()
        addr = and_or([(r.en, r.addr) for r in requesters]) if len(requesters) > 1 else requesters[0].addr
        if group in self._first:
            en, addr, _ = self._announce(m, group, en, addr)
        b = exact_log2(self._banks)
        bank, bank_q = Signal(b, name=f"{group}_bank"), Signal(b, name=f"{group}_bank_q")
        hits, row = Signal(self._banks, name=f"{group}_hits"), Signal(len(addr) - b, name=f"{group}_row")
        # The request's bank is registered apart from its enable, and the two meet at the banks: registered
        # together (the bank's bits reset where the request is off), the matrix unit's arbitration, each operand's
        # read enable, drove the reset inputs of eight bank bits beside the banks (`mm.writer.claim` -> the
        # feeder's arbitration -> `scratchpad.mm6_hits` LSR, 11.0 ns, 8.4 of routing: the AXI chip's worst path,
        # 90.9 MHz on a 25F).
        on_bank, en_q = Signal(self._banks, name=f"{group}_bank_bits"), Signal(name=f"{group}_en")
        index = bank_index(addr, self._banks)
        m.d.sync += [bank.eq(index), on_bank.eq(Const(1, self._banks) << index), en_q.eq(en),
                     row.eq(addr[b:])]
        m.d.comb += hits.eq(Mux(en_q, on_bank, 0))
        m.d.sync += bank_q.eq(bank)         # the data comes from the bank the request register addressed
        if self._registered(group):
            # ... through the bank's data register, and the selected word is registered before the requesters
            # see it.
            bank_read, selected = Signal(b, name=f"{group}_bank_read"), Signal(WORD, name=f"{group}_selected")
            m.d.sync += [bank_read.eq(bank_q), selected.eq(Array(bank_data)[bank_read])]
            m.d.comb += [r.data.eq(selected) for r in requesters]
        elif self._data_registered(group):
            bank_read = Signal(b, name=f"{group}_bank_read")
            m.d.sync += bank_read.eq(bank_q)
            m.d.comb += [r.data.eq(Array(bank_data)[bank_read]) for r in requesters]
        else:
            m.d.comb += [r.data.eq(Array(bank_data)[bank_q]) for r in requesters]
        return hits, row

    def _write_request(self, m, group):
        """(bank hits, row, data) of a write group's request, registered. The group's requesters (a lane's
        units, one instruction at a time) are merged before the register, so that each bank sees one write
        request per port and the write data fans out from one register without a multiplexer per bank."""
        requesters = list(self.write_group(group))
        en = Cat(*(r.en for r in requesters)).any()
        addr = and_or([(r.en, r.addr) for r in requesters]) if len(requesters) > 1 else requesters[0].addr
        wdata = and_or([(r.en, r.data) for r in requesters]) if len(requesters) > 1 else requesters[0].data
        if group in self._first:
            en, addr, wdata = self._announce(m, group, en, addr, wdata)
        b = exact_log2(self._banks)
        hits = Signal(self._banks, name=f"{group}_wr_hits")
        row, data = Signal(len(addr) - b, name=f"{group}_wr_row"), Signal(WORD, name=f"{group}_wr_data")
        m.d.sync += [hits.eq(self._bank_hits(en, bank_index(addr, self._banks))), row.eq(addr[b:]), data.eq(wdata)]
        return hits, row, data
