"""SmolLM2-135M's whole decode step as GA-2 programs: every matrix product of every block and the LM head streamed
from external memory once for the batch, the attention over the KV caches in external memory, and the host's
elementwise work between them counted as round trips.

A step of ``B`` sequences is a list of **phases**, each one chip program and the host's round trip around it:

* per block (30, all alike): ``qkv`` (960 weight rows of 576: q, k and v of every head, which share their
  input), the attention (``ga2_sw.online_program.grouped_program``: each sequence's key/value heads streamed
  once for the three query heads that share them), ``o`` (576 x 576), ``gate`` and ``up`` (1,536 x 576 each:
  each its own input, as each has its own smoothing factors) and ``down`` (576 x 1,536);
* the LM head (49,152 x 576, tied to the embedding), in as many programs as the instruction memory and the
  external window take.

A product is :func:`linear_program`: the B tokens' inputs loaded once, then the weights' tiles of ``cols`` rows
double-buffered, each tile one LD (the rows ``weight_pitch`` apart in external memory, as in the scratchpad) issued
before the MMs of the tile before it finish, one MM per ``rows`` input rows, and the results stored a group of
tiles at a time while the next tiles stream. On a chip built with ``st_words`` (the llm
chip) a token's input is two int8 digit rows of its 15-bit integer and each tile's int32 sums leave the chip
whole (ST ``wd``), which the host combines: the numerics ``ga2 llm eval`` measures (``ga2_path.ChipLinear``;
``step_numerics``). Elsewhere the packed port stores bytes (docs/ISA.md, "Packed external memory"): one int8
input row a token and the sums requantised to int8 (RQ, one ``(m, s)`` per product).

The host's part of a phase (RMSNorm, RoPE, SiLU x up, the residual adds, the caches' new rows, the argmax) is
not a chip program; its cost is counted as the phase's round trip (:class:`Host`): a stated latency per
synchronisation, the phase's program written into the instruction memory over a control bus, and the bytes the
host writes before and reads after the program, over the same external memory at its peak rate.

Every program runs on the cycle model (exact: the circuit's counters, ``ga2_sw.cycles``) at the start of its own
window of external memory (weights at 0): a matrix placed at a multiple of 16 KiB (the DRAM model's 8 banks of
2 KiB rows) meets the same banks and row changes wherever it lies, so every block's programs take the same cycles
and one block is counted for all. Each program is counted from an idle DRAM (every bank precharged), as the
simulators run it."""

from dataclasses import dataclass
from functools import lru_cache

from ..banking import operand_start, operand_stride
from ..cycles import busy_cycles, cycle_counts
from ..dram import GRADES, peak_bytes_per_cycle
from ..isa import INSTR_BITS, EncodingError, Op, footprints, halt, mm, rows_moved, rq, st
from ..packing import WORD_BYTES
from ..online_program import Group, grouped_layout, grouped_program
from ..schedule import reorder
from .step_cycles import SMOLLM2

__all__ = ["Product", "head_product", "rescore_product", "RESCORE", "MODEL", "Host", "Phase", "linear_program",
           "linear_pieces", "attention_pieces", "step_phases", "step_cost", "bounds", "PRODUCT_MN",
           "memory_bytes_per_cycle", "throughput_rows", "phase_count", "block_products", "linear_image",
           "linear_outputs", "output_base", "attention_layout", "StepTimer", "weight_pitch", "GROUP_WORDS", "GROUPS",
           "step_numerics", "output_window", "window_outputs", "program_counters", "PHASE_FIELDS", "clear_caches"]

# SmolLM2-135M (docs/LLM.md): its attention's shape (``step_cycles.SMOLLM2``), the MLP's width and the
# vocabulary of the tied LM head.
MODEL = {**SMOLLM2, "d_ff": 1536, "vocab": 49152}


@dataclass(frozen=True)
class Product:
    """A weight matrix ``W`` (``rows`` x ``cols`` int8, as the chip streams it) and its product ``W x`` for each
    token of a batch; ``planes``: the int8 digit planes each of the model's weights takes (2: wide weights,
    ``ga2_path.ChipLinear``), so the model's matrix has ``rows / planes`` rows."""
    name: str
    rows: int
    cols: int
    planes: int = 1

    @property
    def weights(self):
        return self.rows * self.cols


def block_products(model=MODEL, weight_digits=1):
    """The products of one block, in the order a step runs them (the attention comes after ``qkv``); those after
    the attention with weights of ``weight_digits`` int8 planes (``ga2_path.WEIGHT_DIGITS``)."""
    d, dm, ff, w = model["d"], model["d_model"], model["d_ff"], weight_digits
    return (Product("qkv", (model["heads"] + 2 * model["kv_heads"]) * d, dm),
            Product("o", model["heads"] * d * w, dm, w), Product("gate", ff * w, dm, w), Product("up", ff * w, dm, w),
            Product("down", dm * w, ff, w))


def head_product(model=MODEL, weight_digits=1):
    """The LM head, tied to the embedding: a row of ``d_model`` per vocabulary entry (``weight_digits`` planes)."""
    return Product("head", model["vocab"] * weight_digits, model["d_model"], weight_digits)


RESCORE = "rescore"


def rescore_product(batch, candidates, model=MODEL):
    """The LM head's second product (``ga2_path.RescoredHead``): ``candidates`` rows of its residual plane for each
    of a batch's ``batch`` sequences, one matrix of all of them (each sequence takes the sums of its own rows)."""
    return Product(RESCORE, batch * candidates, model["d_model"])


# The requantisation of a product's sums to int8 (m, s): the cycles do not depend on it (an RQ takes its length's
# cycles whatever it computes); the tests choose their own.
PRODUCT_MN = (1, 12)


@dataclass(frozen=True)
class Host:
    """What a round trip between the chip and the host costs, in chip cycles: ``sync_cycles`` per
    synchronisation (the chip's done seen, the host's elementwise work and the next start: a stated figure, not a
    measurement), the program's instructions written at ``load_bytes_per_cycle`` (a 32-bit control bus), and the
    host's bytes over the external memory at its peak (``peak_bytes_per_cycle``)."""
    sync_cycles: int = 500
    load_bytes_per_cycle: int = 4

    def cycles(self, config, program, bytes_in, bytes_out):
        load = -(-len(program) * INSTR_BITS // 8 // self.load_bytes_per_cycle)
        data = -(-int(bytes_in + bytes_out) // memory_bytes_per_cycle(config))
        return self.sync_cycles + load + data


def memory_bytes_per_cycle(config):
    """The external memory's peak bytes per chip cycle: a DRAM grade's at ``clock_mhz``, capped by the port's
    beat; the ideal memory's is the beat."""
    if config.memory in GRADES:
        return min(config.bus_bytes, peak_bytes_per_cycle(GRADES[config.memory], config.clock_mhz))
    return config.bus_bytes


def weight_pitch(cols, config):
    """Bytes a weight row takes in external memory: the scratchpad's operand stride for rows of ``cols``
    (``banking.operand_stride``), so that a tile's rows lie in external memory as they lie in the scratchpad and
    one LD moves the whole tile (a row of 1,536 on the llm chip takes 1,600 bytes, the last 64 unused)."""
    return operand_stride(cols, config)


# Results a store takes at most: a group of tiles' results leaves the chip in one ST, which costs the external
# memory one turn from reading to writing and back instead of one a tile (the ring of two groups' results in the
# scratchpad is ``2 x group x input rows x cols`` words).
GROUP_WORDS = 512
GROUPS = (16, 8, 4, 2, 1)


def linear_program(config, batch, product, mn=PRODUCT_MN, first=0, count=None, digits=1, sums=False, group=1,
                   buffers=2):
    """``W x`` of ``batch`` tokens for rows ``first .. first + count`` of ``product``'s weights (all of them by
    default), each token's input ``digits`` int8 rows (2: the 15-bit input's high and low digits,
    ``ga2_path.input_digits``; the rows of a token next to each other). The program reads the weights' rows from
    external address 0 on (``weight_pitch`` bytes a row) and the inputs' ``batch x digits`` rows of ``cols``
    bytes after them, and stores the results after those (``output_base``), ``group`` tiles of them at a time:
    with ``sums`` (a chip built with ``st_words``) the int32 sums whole (ST ``wd``, four bytes each), else
    requantised to int8 (RQ with ``mn``). The tile of weight rows ``r0 .. r0 + n`` (``n`` at most the array's
    columns) holds input row ``a``'s ``n`` results at result ``r0 A + a n`` (``A = batch x digits``). With
    ``buffers`` = 1 (where two tiles and the inputs do not fit the scratchpad) one tile buffer: each tile's load
    waits for the MMs of the tile before it, which read the same buffer."""
    if buffers not in (1, 2):
        raise ValueError(f"a product's weight tiles take 1 or 2 buffers, not {buffers!r}")
    if sums and not config.st_words:
        raise ValueError("int32 sums leave the chip only through an ST of whole words (a chip built with st_words)")
    R, C = config.rows, config.cols
    count = product.rows - first if count is None else count
    K, A = product.cols, batch * digits
    lx, pitch = operand_stride(K, config), weight_pitch(K, config)
    X = 0
    W = operand_start(X + A * lx, "B", config)
    OUT = W + buffers * C * lx               # then a ring of two groups' results
    ex_w, ex_x = 0, count * pitch
    ex_out, size = output_base(count, K, A, config, sums), WORD_BYTES if sums else 1
    starts = range(0, count, C)

    def width(k):
        return min(C, count - starts[k])

    def load(k):
        return rows_moved("LD", W + (k % buffers) * C * lx, lx, ex_w + starts[k] * pitch, pitch, width(k), pitch)

    def slot(k):
        return OUT + (k % (2 * group)) * A * C

    def drain(k):                            # the results of the group ending with tile k out
        k0 = k - k % group
        n, at = A * (starts[k] + width(k) - starts[k0]), ex_out + starts[k0] * A * size
        if sums:
            return [st(src=slot(k0), dst=at, len=n, wd=1)]
        return [rq(dst=slot(k0), src=slot(k0), len=n, m=mn[0], s=mn[1]), st(src=slot(k0), dst=at, len=n)]
    program = [*rows_moved("LD", X, lx, ex_x, K, A, K), *load(0)]
    behind = []
    for k in range(len(starts)):
        # the next tile's load before this tile's MMs (it issues once the tile before's MMs are done with its
        # buffer; with one buffer, after them), then the results of the group before out, which wait for its
        # MMs' writes
        following = load(k + 1) if k + 1 < len(starts) else []
        mms = [mm(dst=slot(k) + a0 * width(k), A=X + a0 * lx, B=W + (k % buffers) * C * lx, M=min(R, A - a0),
                  K=K, N=width(k), tb=1, lda=lx, ldb=lx, ldc=width(k)) for a0 in range(0, A, R)]
        program += following + mms if buffers == 2 else mms + following
        program += behind
        behind = drain(k) if k % group == group - 1 or k == len(starts) - 1 else []
    return program + behind + [halt()]


def output_base(rows, cols, input_rows, config, sums=False):
    """Where ``linear_program`` stores its results: right after the weights (``weight_pitch`` bytes a row) and the
    inputs; its int32 ``sums`` from the next beat (an ST of whole words starts word-aligned)."""
    w = max(config.bus_bytes, WORD_BYTES) if sums else 1
    return -(-(rows * weight_pitch(cols, config) + input_rows * cols) // w) * w


def linear_image(W, X, config):
    """The external memory ``linear_program`` reads on ``config`` for int8 weights ``W`` (rows x cols) and input
    rows ``X`` (batch x digits rows of cols): the weights row by row from 0, ``weight_pitch`` bytes apart (zeros
    between), the inputs after them; a list of int8 values (a packed port holds bytes), to be padded to the
    chip's memory by whoever runs it."""
    import numpy as np
    W = np.asarray(W)
    rows = np.zeros((W.shape[0], weight_pitch(W.shape[1], config)), dtype=np.int64)
    rows[:, :W.shape[1]] = W
    flat = np.concatenate([rows.reshape(-1), np.asarray(X).reshape(-1)]).astype(np.int64)
    return (flat & 0xFF).tolist()


def output_window(rows, cols, input_rows, config, sums=False):
    """``(first, count)``: the external memory (bytes) ``linear_program`` stores its results in."""
    return output_base(rows, cols, input_rows, config, sums), input_rows * rows * (WORD_BYTES if sums else 1)


def linear_outputs(ext, config, input_rows, rows, cols, sums=False):
    """The results ``linear_program`` stored for ``rows`` weight rows of ``cols`` and ``input_rows`` input rows:
    an (input_rows, rows) int64 array of the int32 sums (``sums``) or the int8 outputs."""
    base, count = output_window(rows, cols, input_rows, config, sums)
    return window_outputs(ext[base:base + count], config, input_rows, rows, sums)


def window_outputs(data, config, input_rows, rows, sums=False):
    """``linear_outputs`` from the stored bytes alone (``output_window``'s, as a harness returns them)."""
    import numpy as np
    C = config.cols
    data = (np.asarray(data, dtype=np.int64) & 0xFF).astype(np.uint8)
    values = data.view("<i4" if sums else "i1").astype(np.int64)      # little-endian words, or int8
    out = np.zeros((input_rows, rows), dtype=np.int64)
    for r0 in range(0, rows, C):
        n = min(C, rows - r0)
        out[:, r0:r0 + n] = values[r0 * input_rows:(r0 + n) * input_rows].reshape(input_rows, n)
    return out


def _fits(config, build):
    """Whether the program ``build()`` makes fits the chip; a program whose addresses do not even encode (past
    a field's range) does not."""
    try:
        program = build()
    except EncodingError:
        return False
    sp = max(hi for i in program for _, hi in footprints(i)[0])
    ext = max(hi for i in program for _, hi in footprints(i)[1])
    return len(program) <= config.imem_words and sp < config.sp_words and ext < config.ext_words


@lru_cache(maxsize=256)
def linear_pieces(config, batch, product, mn=PRODUCT_MN, digits=1):
    """``product`` as programs that each fit the chip (instruction memory, scratchpad, external window): the
    weights' rows split into runs of whole tiles, as few as fit, each storing its results in groups of as many
    tiles as fit too (``GROUPS``, ``GROUP_WORDS``), the tiles double-buffered unless only one buffer fits (down at
    B = 8 on the llm chip). ``[(first row, rows, program)]``; ValueError when not even one tile fits. A chip built
    with ``st_words`` stores the int32 sums (``step_numerics``)."""
    _, sums = step_numerics(config, digits)
    A = batch * digits
    groups = [g for g in GROUPS if g * A * config.cols <= GROUP_WORDS] or [1]
    found = next(((buffers, *fit) for buffers in (2, 1)
                  if (fit := _fewest_programs(config, batch, product, mn, digits, sums, groups, buffers))), None)
    if found is None:
        raise ValueError(f"{product.name} ({product.rows} x {product.cols}) for a batch of {batch} does not fit "
                         f"the chip's memories (sp_words {config.sp_words}, ext_words {config.ext_words})")
    buffers, per, group = found
    step = per * config.cols
    return [(r0, min(step, product.rows - r0), linear_program(config, batch, product, mn, r0,
                                                              min(step, product.rows - r0), digits, sums, group,
                                                              buffers))
            for r0 in range(0, product.rows, step)]


def _fewest_programs(config, batch, product, mn, digits, sums, groups, buffers):
    """``(tiles a program, tiles a store)`` of ``linear_pieces``' programs with ``buffers`` tile buffers: the most
    tiles a program that fit, each with the largest store group that fits; None when not even one tile fits."""
    per = -(-product.rows // config.cols)
    while per:
        rows = min(product.rows, per * config.cols)
        group = next((g for g in groups if _fits(config, lambda: linear_program(
            config, batch, product, mn, 0, rows, digits, sums, g, buffers))), None)
        if group:
            return per, group
        per = per * 3 // 4 if per > 4 else per - 1
    return None


def step_numerics(config, digits=None):
    """``(digits, sums)`` of the products of a step on ``config``: a chip built with ``st_words`` stores each
    product's int32 sums and takes the 15-bit input in two digit rows a token (the numerics ``ga2 llm eval``
    measures: ``ga2_path.ChipLinear``) unless ``digits`` = 1 (an int8 input); elsewhere one int8 input row and int8
    outputs (RQ on the chip). ValueError for two digits on a chip that cannot store their sums."""
    if digits is None:
        digits = 2 if config.st_words else 1
    if digits not in (1, 2):
        raise ValueError(f"input digits must be 1 or 2, not {digits!r}")
    if digits == 2 and not config.st_words:
        raise ValueError("two input digits need their int32 sums stored whole: a chip built with st_words = 1 "
                         "(the llm chip)")
    return digits, bool(config.st_words)


def attention_layout(config, contexts, model=MODEL, key_digits=1, kv_heads=None):
    """The grouped attention of sequences at ``contexts``: each sequence's key/value heads a group of the query
    heads that share it, chunks of 64 tokens, every output read twice (coarse and fine, as the GA-2 path reads
    it), keys of ``key_digits`` int8 planes; ``kv_heads`` of each sequence, all by default; in two streams where
    the chip allows (``online_program.grouped_layout``). The scalings are placeholders: the cycles do not depend
    on them."""
    G = model["heads"] // model["kv_heads"]
    kv_heads = range(model["kv_heads"]) if kv_heads is None else kv_heads
    groups = tuple(Group(L, ((1, 0),) * G, ((1, 0),) * G, ((1, 0),) * G) for L in contexts for _ in kv_heads)
    return grouped_layout(config, groups, model["d"], min(64, config.sm_max_len), key_digits)


# The attention's programs are list-scheduled against the cycle model (``ga2_sw.schedule.reorder``), the matrix
# unit's instructions kept in the builder's order: on the llm chip a third fewer cycles than as written (one
# sequence at 1,024 tokens with wide keys: 141,483 cycles as written, 94,604 scheduled).
SCHEDULE = (("matrix",),)
SCHEDULE_WINDOW = 64


def attention_pieces(config, contexts, model=MODEL, key_digits=1):
    """The attention of sequences at ``contexts`` as grouped programs that fit the chip (its memories and its
    instruction memory), scheduled (``SCHEDULE``): all sequences in one where they fit, else split in halves,
    and a sequence that does not fit alone split by its key/value heads (each head's attention is its own).
    ``[(layout, program)]``."""
    return _attention_pieces(config, tuple(contexts), tuple(sorted(model.items())), key_digits)


@lru_cache(maxsize=256)
def _attention_pieces(config, contexts, model_items, key_digits=1, kv_heads=None):
    model = dict(model_items)
    if len(contexts) > 1:       # the longest sequence alone must fit: found before building the batch's programs
        _attention_pieces(config, (max(contexts),), model_items, key_digits)
    try:
        layout = attention_layout(config, contexts, model, key_digits, kv_heads)
        program = grouped_program(layout)
        if len(program) <= config.imem_words:
            return [(layout, reorder(program, config, SCHEDULE, window=SCHEDULE_WINDOW))]
        problem = f"{len(program)} instructions, the chip holds {config.imem_words}"
    except ValueError as exc:
        problem = str(exc)
    if len(contexts) > 1:
        half = len(contexts) // 2
        return (_attention_pieces(config, contexts[:half], model_items, key_digits) +
                _attention_pieces(config, contexts[half:], model_items, key_digits))
    kv_heads = tuple(range(model["kv_heads"])) if kv_heads is None else kv_heads
    if len(kv_heads) == 1:
        raise ValueError(f"the attention of one key/value head of a sequence at {contexts[0]} tokens does not fit: "
                         f"{problem}")
    half = len(kv_heads) // 2
    return (_attention_pieces(config, contexts, model_items, key_digits, kv_heads[:half]) +
            _attention_pieces(config, contexts, model_items, key_digits, kv_heads[half:]))


@dataclass(frozen=True)
class Phase:
    """One chip program of a step and the host's round trip around it: ``bytes_in`` written before it runs,
    ``bytes_out`` read after; ``repeat`` times in a step (30 for a block's phases)."""
    name: str
    program: tuple
    bytes_in: int
    bytes_out: int
    repeat: int = 1
    weights: int = 0        # weight bytes the program streams
    kv: int = 0             # KV-cache bytes it reads
    macs: int = 0           # multiply-accumulates the model asks of it
    layout: object = None   # the attention's GroupedLayout (its external memory image)


def step_phases(config, contexts, model=MODEL, digits=None, weight_digits=1, key_digits=1, head_candidates=0):
    """The phases of one decode step of ``len(contexts)`` sequences, sequence ``n`` at ``contexts[n]`` tokens of
    context, the products' inputs in ``digits`` rows a token (``step_numerics``), the weights after the attention
    of ``weight_digits`` int8 planes, the keys of ``key_digits``, and ``head_candidates`` rows of the LM head's
    residual plane a sequence read again after the head (``ga2_path.RescoredHead``: the ``rescore`` phase, whose
    rows the host gathers into the program's window, so they count as bytes in and as weights read). A phase's
    ``macs`` are the model's (a weight met once by each token), whatever its planes."""
    B = len(contexts)
    digits, sums = step_numerics(config, digits)
    out_bytes = digits * (WORD_BYTES if sums else 1)        # a result's bytes out: its sums, or its int8
    blocks, d, heads, kv_heads = model["blocks"], model["d"], model["heads"], model["kv_heads"]
    products, head = block_products(model, weight_digits), head_product(model, weight_digits)
    phases = []
    # every product's programs before the attention's (those take seconds to build): a batch whose products do
    # not fit is refused at once
    pieces = {p: linear_pieces(config, B, p, digits=digits) for p in (*products, head)}
    for product in products:
        for _, n, program in pieces[product]:
            phases.append(Phase(product.name, tuple(program), B * digits * product.cols, B * n * out_bytes, blocks,
                                n * product.cols, 0, B * n * product.cols // product.planes))
        if product.name == "qkv":
            for layout, program in attention_pieces(config, contexts, model, key_digits):
                # per group (a key/value head of a sequence and its G query heads): in, the queries and the new
                # key (its planes) and value rows; out, both readings of each output; the cache read once
                groups, G = layout.groups, heads // kv_heads
                phases.append(Phase("attention", tuple(program), len(groups) * (G + key_digits + 1) * d,
                                    2 * len(groups) * G * d, blocks, 0,
                                    sum((key_digits + 1) * g.length * d for g in groups),
                                    sum(2 * G * g.length * d for g in groups), layout))
    for _, n, program in pieces[head]:
        phases.append(Phase("head", tuple(program), B * digits * head.cols, B * n * out_bytes, 1, n * head.cols, 0,
                            B * n * head.cols // head.planes))
    if head_candidates:
        rescore = rescore_product(B, head_candidates, model)
        for _, n, program in linear_pieces(config, B, rescore, digits=digits):
            phases.append(Phase(rescore.name, tuple(program), B * digits * rescore.cols + n * rescore.cols,
                                B * n * out_bytes, 1, n * rescore.cols, 0, n * rescore.cols))
    return phases


# What ``step_cost`` counts of each phase.
PHASE_FIELDS = ("cycles", "chip", "host", "programs", "matrix", "mms_alone", "dma", "dram_wait", "vector",
                "weights", "kv")


@lru_cache(maxsize=4096)
def program_counters(program, config):
    """The cycle model's ``(counters, error)`` of a step's program (a tuple of instructions): the same programs
    come back in every block and every step."""
    counters, err, _ = cycle_counts(list(program), config)
    return counters, err


@lru_cache(maxsize=4096)
def _mms_alone(program, config):
    """The busy times (``isa.OPS``) of a program's MMs, each as if it ran alone."""
    return sum(busy_cycles(i, config) for i in program if i.op == Op.MM)


def clear_caches():
    """Forget the step's cached programs and counters (for a cycle model patched for a what-if,
    ``sim.online_whatif``)."""
    for cached in (_attention_pieces, linear_pieces, program_counters, _mms_alone):
        cached.cache_clear()


def _program_cycles(program, config):
    counters, err = program_counters(program, config)
    if err:
        raise ValueError(f"a step program stopped with {err!r} on {config}")
    return counters


def step_cost(config, contexts, model=MODEL, host=Host(), progress=None, digits=None, weight_digits=1,
              key_digits=1, head_candidates=0):
    """``{"cycles", "chip", "host", "phases": {name: {PHASE_FIELDS}}, "weights", "kv", "macs", "bytes"}`` of
    one decode step (``step_phases``' numerics): each phase's program on the cycle model plus its round trip,
    times its repeats; a phase's ``matrix``, ``dma`` and ``vector`` are its programs' busy counters (where its
    chip cycles go): the matrix unit's beside ``mms_alone``, what its MMs would take each alone (``isa.OPS``:
    more where its slices wait for banks the vector lane takes, ``cycles.mm_schedule``; less where MMs follow
    each other back to back), the DMA's with ``dram_wait``, the cycles it waited on the DRAM (the stall
    counter); its ``weights`` and ``kv`` are the bytes it must read."""
    out = {"cycles": 0, "chip": 0, "host": 0, "weights": 0, "kv": 0, "macs": 0, "bytes": 0, "phases": {}}
    for phase in step_phases(config, contexts, model, digits, weight_digits, key_digits, head_candidates):
        counters = _program_cycles(phase.program, config)
        chip = counters.cycles
        trip = host.cycles(config, phase.program, phase.bytes_in, phase.bytes_out)
        row = out["phases"].setdefault(phase.name, dict.fromkeys(PHASE_FIELDS, 0))
        for target in (row, out):
            target["cycles"] += phase.repeat * (chip + trip)
            target["chip"] += phase.repeat * chip
            target["host"] += phase.repeat * trip
        row["programs"] += phase.repeat
        for field, value in (("matrix", counters.mm), ("mms_alone", _mms_alone(phase.program, config)),
                             ("dma", counters.dma), ("dram_wait", counters.stall), ("vector", counters.vec),
                             ("weights", phase.weights), ("kv", phase.kv)):
            row[field] += phase.repeat * value
        out["weights"] += phase.repeat * phase.weights
        out["kv"] += phase.repeat * phase.kv
        out["macs"] += phase.repeat * phase.macs
        out["bytes"] += phase.repeat * (phase.weights + phase.kv + phase.bytes_in + phase.bytes_out)
        if progress:
            progress()
    return out


def bounds(config, cost):
    """``(dram, compute)``: the cycles a step cannot beat: the weights and KV caches it must read over the
    memory's peak bytes a cycle, and its MACs over the array's ``rows x cols`` a cycle."""
    dram = (cost["weights"] + cost["kv"]) / memory_bytes_per_cycle(config)
    return round(dram), -(-cost["macs"] // (config.rows * config.cols))



def throughput_rows(config, batches, contexts, fmax_mhz=None, model=MODEL, host=Host(), progress=None, digits=None,
                    weight_digits=1, key_digits=1, head_candidates=0):
    """Rows ``{"batch", "context", "cycles", "chip_cycles", "host_cycles", "tokens_per_s", "dram_bound_cycles",
    "compute_bound_cycles", "fraction_of_bound", "bound", "phases"}`` of a step of every batch at every context
    (all sequences at that context), tokens/s at ``fmax_mhz`` (``config.clock_mhz`` when None)."""
    clock = fmax_mhz or config.clock_mhz
    rows = []
    for B in batches:
        for L in contexts:
            cost = step_cost(config, [L] * B, model, host, progress, digits, weight_digits, key_digits,
                             head_candidates)
            dram, compute = bounds(config, cost)
            rows.append({"batch": B, "context": L, "cycles": cost["cycles"], "chip_cycles": cost["chip"],
                         "host_cycles": cost["host"], "tokens_per_s": round(B * clock * 1e6 / cost["cycles"], 3),
                         "dram_bound_cycles": dram, "compute_bound_cycles": compute,
                         "fraction_of_bound": round(max(dram, compute) / cost["cycles"], 4),
                         "bound": "DRAM" if dram >= compute else "compute",
                         "weights_bytes": cost["weights"], "kv_bytes": cost["kv"], "macs": cost["macs"],
                         "phases": cost["phases"]})
    return rows


def phase_count(config, batch, context, model=MODEL, digits=None, weight_digits=1, key_digits=1, head_candidates=0):
    """Programs in one step (for a progress bar)."""
    return len(step_phases(config, [context] * batch, model, digits, weight_digits, key_digits, head_candidates))


class StepTimer:
    """The cycles of the decode steps of a serving run on ``config``, batch and contexts as they come
    (``ga2_sw.llm.serving``): ``step(contexts)`` gives ``{"cycles", "products", "attention", "host", "words",
    "weights", "kv"}`` of a whole step whose sequences attend over ``contexts[n]`` tokens each: every product
    and the attention as chip programs on the cycle model (each phase with its round trip: ``products`` and
    ``attention`` add up to ``cycles``, ``host`` is the round trips' share), the elements the step moves, and
    the weights and KV-cache bytes it must read at least."""

    def __init__(self, config, model=MODEL, host=Host(), digits=None, weight_digits=1, key_digits=1,
                 head_candidates=0):
        self.config, self.model, self.host, self.digits = config, model, host, digits
        self.weight_digits, self.key_digits, self.head_candidates = weight_digits, key_digits, head_candidates

    def step(self, contexts):
        cost = step_cost(self.config, contexts, self.model, self.host, digits=self.digits,
                         weight_digits=self.weight_digits, key_digits=self.key_digits,
                         head_candidates=self.head_candidates)
        attention = cost["phases"]["attention"]["cycles"]
        return {"cycles": cost["cycles"], "products": cost["cycles"] - attention, "attention": attention,
                "host": cost["host"], "words": cost["bytes"], "weights": cost["weights"], "kv": cost["kv"]}
