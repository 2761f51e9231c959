"""Decode-step programs for one attention head: one sequence or a (ragged) batch of sequences.

The B new tokens of a batch share ONE projection per weight matrix (a matrix product with M = B rows), so
the weights are loaded once; attention stays per sequence, over each sequence's own K and V caches, at its
own length. Layouts come from ``Layout(config)``; MM tiles are sized to the array."""

import math

import numpy as np

from . import isa
from .layout import Layout
from .schedule import reorder
from .packing import beats
from .numerics import DIGIT_BITS, quantize, scale_for, mantissa_shift, requant, softmax_q16, s8, u32

__all__ = ["Workload", "make_workload", "rq_params", "ext_image", "program", "outputs", "int_reference", "beats_moved",
           "float_reference", "traffic"]


class Workload:
    """Float weights and hidden states of ``nseq`` sequences of ``L`` tokens, and ONE set of scales for
    the whole batch (a model has one set of scales, not one per request)."""

    def __init__(self, config, nseq, L, seed):
        if L > config.max_ctx:
            raise ValueError(f"Context length {L} exceeds config field 'max_ctx' ({config.max_ctx})")
        self.config, self.nseq, self.L, self.seed = config, nseq, L, seed
        dm, d = config.d_model, config.d
        rng = np.random.default_rng(seed)
        self.W = [rng.normal(0.0, 1.0 / math.sqrt(dm), (dm, d)) for _ in range(3)]
        self.X = [rng.normal(0.0, 1.0, (L, dm)) for _ in range(nseq)]
        self.out = [self.float_attention(b) for b in range(nseq)]    # float outputs at every token
        Q = [x @ self.W[0] for x in self.X]
        K = [x @ self.W[1] for x in self.X]
        V = [x @ self.W[2] for x in self.X]
        flat = lambda arrays: [float(v) for a in arrays for v in np.ravel(a)]
        self.scales = {"x": scale_for(flat(self.X)), "wq": scale_for(flat([self.W[0]])),
                       "wk": scale_for(flat([self.W[1]])), "wv": scale_for(flat([self.W[2]])),
                       "q": scale_for(flat(Q)), "k": scale_for(flat(K)), "v": scale_for(flat(V)),
                       "o": scale_for(flat(self.out))}

    def float_attention(self, b):
        """Float attention outputs of sequence b at tokens 1..L (row t-1 is the output at token t)."""
        x = self.X[b]
        q, k, v = x @ self.W[0], x @ self.W[1], x @ self.W[2]
        rows = []
        for t in range(1, len(x) + 1):
            sc = k[:t] @ q[t - 1] / math.sqrt(self.config.d)
            p = np.exp(sc - sc.max())
            rows.append((p / p.sum()) @ v[:t])
        return np.array(rows)


def make_workload(config, nseq, L, seed):
    return Workload(config, nseq, L, seed)


def rq_params(w, key_digits=1):
    """(m, s) of every requantisation of the step, from the batch's scales. On a chip with the online unit
    (``online_decode``) the scores are in 1/64 logits and NRM divides by the weights' sum, so the output's
    multiplier is ``s_v / s_o``; on the chapter's path the scores are in 1/16 logits, the Q16 probabilities
    become 7-bit weights and the output is scaled by ``s_v / (127 s_o)``. Wide keys (``key_digits = 2``, online
    unit only): the keys are the projection's sums over ``2**s_w`` (``"k" = (1, s_w)``), the smallest power of two
    that brings them within 128 times the int8 keys' range, and the scores' scale follows."""
    s, d = w.scales, w.config.d
    ms = mantissa_shift
    projections = {"q": ms(s["x"] * s["wq"] / s["q"]), "k": ms(s["x"] * s["wk"] / s["k"]),
                   "v": ms(s["x"] * s["wv"] / s["v"])}
    if key_digits != 1 and not (key_digits == 2 and w.config.online_unit):
        raise ValueError(f"key_digits {key_digits}: 1, or 2 (wide keys) on a chip with the online unit")
    if w.config.online_unit:
        s_k = s["k"]
        if key_digits == 2:
            unit = s["x"] * s["wk"]                       # the scale of one unit of the int32 sums
            shift = max(0, math.ceil(math.log2(s["k"] / (2 ** DIGIT_BITS * unit))))
            projections["k"], s_k = (1, shift), unit * 2 ** shift
        return {**projections, "scores": ms(s["q"] * s_k / math.sqrt(d) * 64), "out": ms(s["v"] / s["o"])}
    return {**projections, "scores": ms(s["q"] * s["k"] / math.sqrt(d) * 16), "weights": ms(127 / 65536),
            "out": ms(s["v"] / (127 * s["o"]))}


def ext_image(w):
    """External memory before the first step: quantised weights and hidden states, empty caches."""
    lay, s = Layout(w.config), w.scales
    img = [0] * w.config.ext_words
    dm, d = w.config.d_model, w.config.d
    for wi, name in enumerate(("wq", "wk", "wv")):
        for r in range(dm):
            for c in range(d):
                img[lay.ex_w + wi * dm * d + lay.w_at(r, c)] = u32(quantize(float(w.W[wi][r, c]), s[name]))
    for b in range(w.nseq):
        for t in range(w.L):
            for c in range(dm):
                img[lay.ex_x(b) + t * dm + c] = u32(quantize(float(w.X[b][t, c]), s["x"]))
    return img


def program(config, seqs, ts, P, key_digits=1):
    """One decode step for the sequences ``seqs`` (indices into the external layout) at ``ts[j]`` tokens
    each, the new one included. Batch slot j holds sequence seqs[j]. A chip with the online unit decodes
    over caches streamed from external memory (``ga2_sw.online_decode``), with keys of ``key_digits`` int8
    digits."""
    if config.online_unit:
        from .online_decode import program as online
        return online(config, seqs, ts, P, key_digits)
    if key_digits != 1:
        raise ValueError("wide keys (key_digits = 2) are a long-context step's: the chip needs the online unit")
    lay = Layout(config)
    n, DM, D, C = len(seqs), config.d_model, config.d, config.cols
    G = lay.v_block                    # V-cache columns per block (D in order)
    if not 1 <= n <= config.rows:
        raise ValueError(f"Batch of {n} sequences: must be 1..{config.rows} (config field 'rows')")
    if len(ts) != n or any(not 1 <= t <= config.max_ctx for t in ts):
        raise ValueError(f"Token positions {list(ts)} must be one per sequence, each in 1..{config.max_ctx}")
    prog = []
    for j, b in enumerate(seqs):
        prog.append(isa.ld(dst=lay.X + j * DM, src=lay.ex_x(b) + (ts[j] - 1) * DM, len=DM))
    if config.decoupled and config.bus_bytes > 1:
        # A packed port leaves the matrix lane the bound, and it waits for its first MM's weights: a load per
        # column tile of each matrix (stored transposed, a tile's weights are contiguous), so the first projection
        # starts on X and one tile. At a word a beat the port is the bound and each load costs it ext_latency.
        prog.extend(isa.ld(dst=lay.W + wi * DM * D + c0 * DM, src=lay.ex_w + wi * DM * D + c0 * DM,
                           len=DM * min(C, D - c0))
                    for wi in range(3) for c0 in range(0, D, C))
    elif config.decoupled:     # one load per matrix, so the Q projection can start on Wq alone
        prog.extend(isa.ld(dst=lay.W + wi * DM * D, src=lay.ex_w + wi * DM * D, len=DM * D) for wi in range(3))
    else:
        prog.append(isa.ld(dst=lay.W, src=lay.ex_w, len=3 * DM * D))
    for j, b in enumerate(seqs):
        if ts[j] > 1:
            prog.append(isa.ld(dst=lay.KC(j), src=lay.ex_kc(b), len=(ts[j] - 1) * D))
            for _, v0 in lay.v_blocks:          # a load per block: P V can start on the first
                prog.append(isa.ld(dst=lay.VC(j) + v0, src=lay.ex_vc(b) + v0, len=(ts[j] - 1) * G))
    # The projections: one matrix product with M = n rows per column tile, so the weights serve the batch
    # (decoupled, each matrix is stored transposed and read with tb = 1: Layout.w_transposed).
    tw = int(lay.w_transposed)
    for wi, acc in enumerate((lay.QA, lay.KA, lay.VA)):
        for c0 in range(0, D, C):
            prog.append(isa.mm(dst=acc + c0, A=lay.X, B=lay.W + wi * DM * D + lay.w_at(0, c0), M=n, K=DM, N=min(C, D - c0), tb=tw, lda=DM, ldb=DM if tw else D, ldc=D))
    prog.append(isa.rq(dst=lay.Q8, src=lay.QA, len=n * D, m=P["q"][0], s=P["q"][1]))
    for j, b in enumerate(seqs):
        r = (ts[j] - 1) * D
        prog.append(isa.rq(dst=lay.KC(j) + r, src=lay.KA + j * D, len=D, m=P["k"][0], s=P["k"][1]))
        rows_v = [(c0, lay.v_at(ts[j] - 1, c0)) for c0, _ in lay.v_blocks]     # the new value row, per block
        for c0, rv in rows_v:
            prog.append(isa.rq(dst=lay.VC(j) + rv, src=lay.VA + j * D + c0, len=G, m=P["v"][0], s=P["v"][1]))
        prog.append(isa.st(src=lay.KC(j) + r, dst=lay.ex_kc(b) + r, len=D))
        for _, rv in rows_v:
            prog.append(isa.st(src=lay.VC(j) + rv, dst=lay.ex_vc(b) + rv, len=G))
    # Attention, one sequence at a time, each over its own cache at its own length (in buffers of its own where
    # the layout has a set per slot, Layout.attention_sets): its query against the key cache's column tiles (a
    # tile is C keys, each a row of D words), its weights against the value cache's (a tile is C columns of a
    # V block).
    for j, b in enumerate(seqs):
        L, buf = ts[j], lay.attention(j)
        prog += column_tiles(config, dst=buf["S"], A=lay.Q8 + j * D, B=lay.KC(j), K=D, width=L, tb=1, ldb=D,
                             column_words=D, lda=D)
        prog.append(isa.rq(dst=buf["S8"], src=buf["S"], len=L, m=P["scores"][0], s=P["scores"][1]))
        prog.append(isa.sm(dst=buf["P"], src=buf["S8"], len=L))
        prog.append(isa.rq(dst=buf["WT"], src=buf["P"], len=L, m=P["weights"][0], s=P["weights"][1]))
        for c0, v0 in lay.v_blocks:
            prog += column_tiles(config, dst=buf["O"] + c0, A=buf["WT"], B=lay.VC(j) + v0, K=L,
                                 width=min(G, D - c0), tb=0, ldb=G, column_words=1, lda=L)
        prog.append(isa.rq(dst=buf["O8"], src=buf["O"], len=D, m=P["out"][0], s=P["out"][1]))
        prog.append(isa.st(src=buf["O8"], dst=lay.ex_out(b), len=D))
    prog.append(isa.halt())
    # Decoupled, the same instructions go out in an order that overlaps the DMA with compute; every pair
    # that shares a word keeps its order, so the step computes exactly what the in-order program does.
    return reorder(prog, config) if config.decoupled else prog


def column_tiles(config, dst, A, B, K, width, tb, ldb, column_words, lda):
    """The MMs of one row of A (``K`` words at ``A``) against ``width`` columns of B, column ``c`` starting
    ``c * column_words`` words past ``B``, the results at ``dst + c``: a tile of ``cols`` columns an MM of
    ``M = 1`` (``lda`` is then unused), or on a ``row_b`` chip up to ``rows`` whole tiles an MM, a tile a row:
    ``sa`` gives every row A's row 0, ``rb`` row ``i`` the tile ``i * cols`` columns on (docs/ISA.md)."""
    C = config.cols
    tile_words = C * column_words
    whole = width // C if config.row_b and tile_words <= isa.field_range(isa.Op.MM, "lda")[1] else 0
    out = []
    for t0 in range(0, whole, config.rows):
        rows = min(config.rows, whole - t0)
        c0 = t0 * C
        out.append(isa.mm(dst=dst + c0, A=A, B=B + c0 * column_words, M=rows, K=K, N=C, tb=tb, lda=tile_words,
                          ldb=ldb, ldc=C, rb=1, sa=1))
    for c0 in range(whole * C, width, C):
        out.append(isa.mm(dst=dst + c0, A=A, B=B + c0 * column_words, M=1, K=K, N=min(C, width - c0), tb=tb,
                          lda=lda, ldb=ldb, ldc=C))
    return out


def outputs(config, ext, b, key_digits=1):
    """Sequence b's int8 output of its latest step, read from external memory."""
    if config.online_unit:
        from .online_decode import outputs as online
        return online(config, ext, b, key_digits)
    base = Layout(config).ex_out(b)
    return [s8(ext[base + i]) for i in range(config.d)]


def row_major_ext(config, ext):
    """``ext`` with the weight matrices and every sequence's V cache rewritten as plain rows (row r's column c
    at r * d + c, the in-order layout), so that images of the two modes compare word for word when they hold
    the same values."""
    lay = Layout(config)
    out = list(ext)
    dm, d = config.d_model, config.d
    for wi in range(3):
        base = lay.ex_w + wi * dm * d
        for r in range(dm):
            for c in range(d):
                out[base + r * d + c] = ext[base + lay.w_at(r, c)]
    for b in range(lay.ext_seqs):
        base = lay.ex_vc(b)
        for t in range(lay.lmax):
            for c in range(lay.d):
                out[base + t * lay.d + c] = ext[base + lay.v_at(t, c)]
    return out


def caches(config, ext, b):
    """Sequence b's K and V cache regions in external memory."""
    lay = Layout(config)
    return ext[lay.ex_kc(b):lay.ex_kc(b) + lay.cache_words], ext[lay.ex_vc(b):lay.ex_vc(b) + lay.cache_words]


def int_reference(w, b, t):
    """Sequence b's int8 output at token t, in plain Python integers: no instructions, no addresses."""
    s, P, D = w.scales, rq_params(w), w.config.d
    xq = [[quantize(float(v), s["x"]) for v in row] for row in w.X[b][:t]]
    wq = [[[quantize(float(v), s[name]) for v in row] for row in w.W[i]] for i, name in enumerate(("wq", "wk", "wv"))]

    def project(x, wmat, key):
        return [requant(sum(x[i] * wmat[i][c] for i in range(len(x))), *P[key]) for c in range(D)]

    q = project(xq[-1], wq[0], "q")
    keys = [project(x, wq[1], "k") for x in xq]
    values = [project(x, wq[2], "v") for x in xq]
    scores = [requant(sum(q[i] * keys[p][i] for i in range(D)), *P["scores"]) for p in range(t)]
    weights = [requant(p, *P["weights"]) for p in softmax_q16(scores)]
    return [requant(sum(weights[p] * values[p][c] for p in range(t)), *P["out"]) for c in range(D)]


def float_reference(w, b, t):
    """Sequence b's float attention output at token t (unquantised model)."""
    return w.out[b][t - 1]


def beats_moved(prog, config):
    """Beats the external port moves for a program's LD and ST (``ga2_sw.packing.beats``): its memory bound
    in cycles, a beat per cycle; the words moved when a beat is one word."""
    return sum(beats(lo, hi - lo + 1, config) for i in prog for lo, hi in isa.footprints(i)[1])


def traffic(prog):
    """(MACs, words moved to or from external memory) of a program; one word carries one int8 element."""
    macs = sum(i.M * i.K * i.N for i in prog if i.op == isa.Op.MM)
    words = sum(i.len for i in prog if i.op in (isa.Op.LD, isa.Op.ST))
    return macs, words
