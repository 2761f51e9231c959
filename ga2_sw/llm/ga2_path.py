"""SmolLM2-135M with every attention block on GA-2's integer numerics (issue 15, deliverable 2).

Per block and token, what the chip computes and what the host keeps (docs/LLM.md has the table and the
measured effect of each choice):

* host: RMSNorm in float, divided by per-channel smoothing factors (folded into the weights' columns), then
  quantised to int8 with its own scale (max |h| / 127 per token: the host has just computed it);
* chip, MM: the q, k and v projections, int8 weights times the int8 input, int32 sums; RQ turns v's into the
  value cache's int8 (one multiplier m / 2**s per key/value head, at a scale calibrated on fixed prompts);
* host: q's and k's int32 sums back to float (a scale per weight row), RoPE, then q to int8 per head and token
  and k to the key cache's calibrated int8;
* chip, the long-context path (docs/LONG_CONTEXT.md): scores q.k in int32 scaled to 16-bit 1/64-logit scores,
  the chunked online softmax's 12-bit weights, P V from their two int8 digits, one normalisation to int8 at
  the attention output's calibrated scale (with one bit of headroom, OUT_HEADROOM);
* host: the int8 output back to float, the output projection, SwiGLU, residuals and the LM head in float.

The integer steps are ``vector_numerics`` (numpy; proven equal to ``ga2_sw.numerics``, the functions the
reference machine runs, in tests/test_llm_ga2.py)."""

import math

import numpy as np

from ..numerics import SCORE_UNIT, mantissa_shift
from . import vector_numerics as V
from .float_model import FloatModel
from .scores import PROMPTS

__all__ = ["WEIGHT_SCALES", "KEY_SCALES", "SMOOTHING", "Calibration", "calibrate", "Ga2Model"]

WEIGHT_SCALES = ("per-row", "per-head", "per-tensor")
KEY_SCALES = ("per-head", "per-channel")
SMOOTHING = 0.5             # SmoothQuant's alpha: the input's and the weights' ranges shared evenly
CHUNK = 64                  # tokens per online-softmax chunk: the softmax unit's default sm_max_len
# The attention output's int8 scale is twice its calibrated peak over 127 (one bit of headroom): the calibration
# prompts are short, and over the 518-token eval text 9,574 outputs reached the int8 limit without it (344
# with it; docs/LLM.md has the effect on the eval's figures).
OUT_HEADROOM = 2


def _scale(peak):
    """The symmetric int8 scale of a tensor whose largest magnitude is ``peak`` (1.0 for all-zero)."""
    return np.where(peak > 0, peak / 127, 1.0)


class Calibration:
    """What the GA-2 path calibrates, per block, as the largest magnitude the float model produced on the
    calibration prompts (``peaks``) and the int8 scale that maps it to 127 (the attribute of the same name):
    ``x`` the normalised input per channel (for the smoothing factors), ``v_proj`` the values per key/value
    head, ``k_cache`` the keys per key/value head and channel (after RoPE; a channel's peak is its RoPE pair's
    length), ``out`` the attention output per query head."""

    FIELDS = {"x": ("d_model",), "v_proj": ("kv_heads",), "k_cache": ("kv_heads", "head_dim"), "out": ("heads",)}

    def __init__(self, peaks, prompts):
        self.peaks, self.prompts = peaks, prompts
        for name, peak in peaks.items():
            setattr(self, name, _scale(peak))


class _Recorder(FloatModel):
    """The float reference, noting the largest magnitude of each quantity the GA-2 path holds in int8."""

    def __init__(self, model):
        super().__init__(model)
        c = self.c
        self.peaks = {name: np.zeros((c.blocks,) + tuple(getattr(c, d) for d in dims))
                      for name, dims in Calibration.FIELDS.items()}

    def attention_block(self, b, h, pos, cache, attend):
        c, w, p, pk = self.c, self.w, f"blk.{b}.", self.peaks
        pk["x"][b] = np.maximum(pk["x"][b], np.abs(h))
        v = (w[p + "attn_v.weight"] @ h).reshape(-1, c.head_dim)
        pk["v_proj"][b] = np.maximum(pk["v_proj"][b], np.abs(v).max(axis=1))
        out = super().attention_block(b, h, pos, cache, attend)
        # a key channel's peak is its RoPE pair's length: the rotation moves magnitude between the two channels
        # of a pair with the position, and the calibration prompts are shorter than the contexts that follow
        k = cache[0][-1]
        pair = np.sqrt(k[:, 0::2] ** 2 + k[:, 1::2] ** 2)
        pk["k_cache"][b] = np.maximum(pk["k_cache"][b], np.repeat(pair, 2, axis=1))
        pk["out"][b] = np.maximum(pk["out"][b], np.abs(out).max(axis=1))
        return out


def calibrate(model, prompts=PROMPTS):
    """Run the float reference over ``prompts`` (the ``ga2 llm scores`` prompts by default, none of them the
    evaluation's text) and return the ``Calibration`` of what it saw."""
    rec = _Recorder(model)
    for text in prompts:
        rec.prefill(model.encode(text))
    return Calibration(rec.peaks, tuple(prompts))


class Ga2Model(FloatModel):
    """The float reference with ``attention_block`` on GA-2's integer numerics. Its cache holds int8 keys and
    values (kv_heads, head_dim) per token, as the chip's external memory would. ``at_limit`` counts the int8
    values that ended at a limit of their range (most of them clamped: beyond the calibrated range).

    ``weight_scales``: "per-row" gives each row of the q and k weights its own scale (their int32 sums go to the
    host, which can undo any scale per row) and v one per head (its requantisation has one multiplier);
    "per-head" one per head's 64 rows, "per-tensor" one per matrix. ``smoothing``: the exponent alpha of the
    per-channel factors s_j = max|x_j|^alpha / max|W_:j|^(1-alpha) folded into the weights' columns and divided
    out of the input before it is quantised (SmoothQuant; None for none), so that a few large input channels do
    not take the int8 range from the rest. ``key_scales``: the key cache's int8 scale per key/value head, or per
    channel with each channel's scale folded into the queries (then q.k is still one int8 dot product times one
    scale per head)."""

    def __init__(self, model, calibration, weight_scales="per-row", key_scales="per-head", chunk=CHUNK,
                 smoothing=SMOOTHING):
        super().__init__(model)
        if weight_scales not in WEIGHT_SCALES:
            raise ValueError(f"weight_scales must be one of {', '.join(WEIGHT_SCALES)}, not {weight_scales!r}")
        if key_scales not in KEY_SCALES:
            raise ValueError(f"key_scales must be one of {', '.join(KEY_SCALES)}, not {key_scales!r}")
        self.cal, self.weight_scales, self.key_scales, self.chunk = calibration, weight_scales, key_scales, chunk
        self.smoothing = smoothing
        c = self.c
        k = calibration.k_cache
        self.k_scale = k if key_scales == "per-channel" else np.broadcast_to(k.max(axis=-1, keepdims=True), k.shape)
        self.w8, self.w_scale, self.smooth = {}, {}, {}
        for b in range(c.blocks):
            ws = {n: self.w[f"blk.{b}.attn_{n}.weight"] for n in "qkv"}
            if smoothing is None:
                self.smooth[b] = np.ones(c.d_model)
            else:
                w_peak = np.max([np.abs(w).max(axis=0) for w in ws.values()], axis=0)
                x_peak = np.maximum(calibration.peaks["x"][b], 1e-6)
                self.smooth[b] = x_peak ** smoothing / np.maximum(w_peak, 1e-6) ** (1 - smoothing)
            for n in "qkv":
                w = (ws[n] * self.smooth[b]).reshape(-1, c.head_dim, c.d_model)     # (heads, rows, cols)
                peak = np.abs(w).max(axis=2)                                       # (heads, rows)
                if weight_scales == "per-head" or (weight_scales == "per-row" and n == "v"):
                    peak = np.broadcast_to(peak.max(axis=1, keepdims=True), peak.shape)
                elif weight_scales == "per-tensor":
                    peak = np.full_like(peak, peak.max())
                scale = _scale(peak)
                self.w8[b, n] = V.quantize(w, scale[:, :, None])
                self.w_scale[b, n] = scale
        self.at_limit = {"v_proj": 0, "k_cache": 0, "out": 0}
        self.group = c.heads // c.kv_heads
        # Called with every block's attention step when set (ga2_sw.llm.chip_steps runs sampled steps as chip
        # programs): on_attention(block, pos, q8, K8, V8, score, norm, out8), K8 and V8 per key/value head.
        self.on_attention = None

    def _sums(self, b, n, x8):
        """MM: block ``b``'s projection ``n`` of the int8 input, the int32 sums (heads, head_dim)."""
        return V.int_matmul(self.w8[b, n], x8)

    def quantised_input(self, b, h):
        """The host's step before the chip's: block ``b``'s normalised input ``h`` divided by the smoothing
        factors, to int8 at its own scale (max |h| / 127: the host has just computed h). (x8, scale)."""
        h = h / self.smooth[b]
        x_scale = float(_scale(np.abs(h).max()))
        return V.quantize(h, x_scale), x_scale

    def value_requant(self, b, x_scale):
        """The (m, s) of each key/value head's RQ, which writes the value cache's int8 at its calibrated scale."""
        return [mantissa_shift(float(ws[0] * x_scale / vs))          # v's rows share their head's scale
                for ws, vs in zip(self.w_scale[b, "v"], self.cal.v_proj[b])]

    def values(self, b, x8, x_scale):
        """MM + RQ: the int8 values (kv_heads, head_dim) of block ``b`` for the int8 input ``x8``."""
        m, s = (np.array(v, dtype=np.int64)[:, None] for v in zip(*self.value_requant(b, x_scale)))
        return V.requant(self._sums(b, "v", x8), m, s)

    def attention_block(self, b, h, pos, cache, attend):
        c, cal = self.c, self.cal
        x8, x_scale = self.quantised_input(b, h)
        # q and k: the int32 sums to the host, which undoes the scales and applies RoPE in float
        q = self._rope(self._sums(b, "q", x8) * self.w_scale[b, "q"] * x_scale, pos)
        k = self._rope(self._sums(b, "k", x8) * self.w_scale[b, "k"] * x_scale, pos)
        v8 = self.values(b, x8, x_scale)
        # keys at the cache's per-channel scales; each channel's scale folded into the queries that meet it, so
        # that q.k = q_scale * (q8 . k8) with one score multiplier per head
        k8 = V.quantize(k, self.k_scale[b])
        shared = np.arange(c.heads) // self.group                     # the key/value head of each query head
        q = q * self.k_scale[b][shared]
        q_scale = _scale(np.abs(q).max(axis=1))                      # per head and token
        q8 = V.quantize(q, q_scale[:, None])
        self.at_limit["v_proj"] += int(np.sum((v8 == 127) | (v8 == -128)))
        self.at_limit["k_cache"] += int(np.sum(np.abs(k8) == 127))
        keys, vals = cache
        keys.append(k8)
        vals.append(v8)
        K8 = np.stack(keys).transpose(1, 0, 2)[shared]               # (heads, tokens, head_dim)
        V8 = np.stack(vals).transpose(1, 0, 2)[shared]
        v_scale, o_scale = cal.v_proj[b][shared], cal.out[b] * OUT_HEADROOM
        score = [mantissa_shift(float(qs / math.sqrt(c.head_dim) * SCORE_UNIT)) for qs in q_scale]
        norm = [mantissa_shift(float(vs / os)) for vs, os in zip(v_scale, o_scale)]
        out8 = V.online_attention(q8, K8, V8, *zip(*score), *zip(*norm), self.chunk)
        self.at_limit["out"] += int(np.sum((out8 == 127) | (out8 == -128)))
        if self.on_attention is not None:
            self.on_attention(b, pos, q8, np.stack(keys).transpose(1, 0, 2), np.stack(vals).transpose(1, 0, 2),
                              score, norm, out8)
        return (out8 * o_scale[:, None]).astype(np.float32)
