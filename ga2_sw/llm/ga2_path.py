"""SmolLM2-135M with every matrix product and attention block on GA-2's integer numerics.

Per block and token, what the chip computes and what the host keeps (docs/LLM.md has the table and the
measured effect of each choice):

* host: RMSNorm in float, divided by per-channel smoothing factors (folded into the weights' columns), then
  quantised to a 15-bit integer with its own scale (max |h| / 16,256 per token: the host has just computed it),
  written as two int8 digits (high and low, radix 128: INPUT_RADIX);
* chip, MM: the q, k and v projections, int8 weights times both digit rows of the input (one MM, M = 2 rows a
  token), int32 sums;
* host: the sums of each weight row combined (high x 128 + low, exact), back to float (a scale per weight row),
  RoPE on q and k, then q to int8 per head and token, k to the key cache's calibrated 15-bit wide keys (two
  int8 digits; PATH_KEY_DIGITS) and v to the value cache's calibrated int8;
* chip, the long-context path (docs/LONG_CONTEXT.md): scores q.k in int32 scaled to 16-bit 1/64-logit scores,
  the chunked online softmax's 12-bit weights, P V from their two int8 digits, and two normalisations of the
  same running outputs to int8: a coarse reading at the attention output's calibrated scale (with one bit of
  headroom, OUT_HEADROOM) and a fine one at 1/FINE_RATIO of it; the host takes the fine reading where it is
  inside its range, else the coarse one;
* host: the int8 output back to float;
* chip, MM (``ChipLinear``): the output projection, gate, up, down and the LM head, int8 weights (a scale per
  row) times their input's two digit rows, int32 sums the host combines; the LM head's best HEAD_CANDIDATES
  rows again with 15-bit weights (``RescoredHead``);
* host: SwiGLU, the residuals, RMSNorm, the argmax.

The integer steps are ``vector_numerics`` (numpy; proven equal to ``ga2_sw.numerics``, the functions the
reference machine runs, in tests/test_llm_ga2.py)."""

import hashlib
import math
import os
import sys
from pathlib import Path

import numpy as np

from ..numerics import KEY_DIGITS, KEY_LIMIT, SCORE_UNIT, mantissa_shift
from . import files, vector_numerics as V
from .float_model import FloatModel
from .scores import PROMPTS
from .whole_step import RESCORE

__all__ = ["WEIGHT_SCALES", "KEY_SCALES", "LINEARS", "SMOOTHING", "LINEAR_SMOOTHING", "BY_DIGITS", "FINE_RATIO",
           "INPUT_RADIX", "Calibration", "calibrate", "Ga2Model", "ChipLinear", "read_outputs", "input_digits",
           "fifteen_bit", "smoothing_factors", "quantised_input", "combined", "WEIGHT_DIGITS", "RescoredHead",
           "HEAD_CANDIDATES", "PATH_KEY_DIGITS"]

WEIGHT_SCALES = ("per-row", "per-head", "per-tensor")
# Where the products of FloatModel.linear run (the output projection, the SwiGLU's three, the LM head): "chip",
# on the chip's numerics (ChipLinear); "float", in float32 on the host, the path with only q, k and v on the chip.
LINEARS = ("chip", "float")
KEY_SCALES = ("per-head", "per-channel")
SMOOTHING = 0.5             # SmoothQuant's alpha: the input's and the weights' ranges shared evenly
# The smoothing of the products after the attention (ChipLinear), by their input's digits: a 15-bit input holds
# its large channels in its own 15 bits, so it is quantised unsmoothed, and the int8 weights keep their rows'
# range; an int8 input takes SMOOTHING (docs/LLM.md measures alpha 0.25, 0.5 and 0.75 against none).
LINEAR_SMOOTHING = {2: None, 1: SMOOTHING}
BY_DIGITS = "by digits"     # Ga2Model's linear_smoothing default: LINEAR_SMOOTHING of its input's digits
CHUNK = 64                  # tokens per online-softmax chunk: the softmax unit's default sm_max_len
# The attention output's int8 scale is twice its calibrated peak over 127 (one bit of headroom): the calibration
# prompts are short, and over the 518-token eval text 9,574 outputs reached the int8 limit without it (344
# with it; docs/LLM.md has the effect on the eval's figures).
OUT_HEADROOM = 2
# The fine reading of the attention output: a second NRM of the same running outputs at 1/FINE_RATIO of the
# coarse scale (three more bits for the outputs below an eighth of the coarse range, most of them: an output is
# a weighted mean of values). Measured over the eval text (docs/LLM.md): the output's int8 rounding was the
# largest single source of the path's error.
FINE_RATIO = 8
# The projections' input as two int8 digits, high and low, of a 15-bit integer: x = INPUT_RADIX * high + low with
# |high| <= 127 and |low| <= INPUT_RADIX / 2 (``input_digits``). One MM reads both as two rows of A.
INPUT_RADIX = 128
INPUT_LIMIT = 127 * INPUT_RADIX         # the largest 15-bit input magnitude
# The weights of the products after the attention: 1, int8 with a scale per row; 2, wide weights, 15 bits per
# weight at 1/INPUT_RADIX of that scale, as two int8 digit planes (the same digits as the input's, high and low):
# the chip streams both planes as the rows of one matrix, twice the bytes, and the host combines their sums.
WEIGHT_DIGITS = (1, 2)
# The LM head's best candidates read again at 15-bit weights (RescoredHead): a token's argmax is decided among
# near ties of the int8 logits, which the head's int8 rounding swaps (of the single matrices made wide, the head
# moves the path's error the most: docs/LLM.md).
HEAD_CANDIDATES = 16
# The key cache's int8 digits on the path by default: wide keys (docs/LONG_CONTEXT.md), whose 15 bits keep the
# keys' small channels that one int8 scale per head rounds away (docs/LLM.md measures both).
PATH_KEY_DIGITS = 2


def input_digits(x):
    """The two int8 digits (2, n) of integers ``x`` (|x| <= INPUT_LIMIT): high = x / INPUT_RADIX rounded half
    away from zero, low = x - INPUT_RADIX * high."""
    x = np.asarray(x, dtype=np.int64)
    high = np.sign(x) * ((np.abs(x) + INPUT_RADIX // 2) // INPUT_RADIX)
    return np.stack([high, x - INPUT_RADIX * high])


def fifteen_bit(h):
    """The host's quantisation of a projection's input ``h`` (already divided by the smoothing factors) at its
    own scale (max |h| / INPUT_LIMIT): its digit rows (2, n) and the scale of the integer they stand for."""
    peak = float(np.abs(h).max())
    x_scale = peak / INPUT_LIMIT if peak > 0 else 1.0
    x = np.clip(np.sign(h) * np.floor(np.abs(h / x_scale) + 0.5), -INPUT_LIMIT, INPUT_LIMIT)
    return input_digits(x), x_scale


def smoothing_factors(x_peak, w, alpha):
    """SmoothQuant's per-column factors s_j = max|x_j|^alpha / max|W_:j|^(1-alpha) of the weights ``w`` (a matrix,
    or a list of matrices that share the input) for inputs whose channels peak at ``x_peak`` (ones for
    ``alpha`` None): folded into the weights' columns and divided out of the input before it is quantised, so
    that a few large input channels do not take the int8 range from the rest."""
    if alpha is None:
        return np.ones(np.shape(x_peak))
    w_peak = np.max([np.abs(m).max(axis=0) for m in (w if isinstance(w, (list, tuple)) else [w])], axis=0)
    return np.maximum(x_peak, 1e-6) ** alpha / np.maximum(w_peak, 1e-6) ** (1 - alpha)


class ChipLinear:
    """A weight matrix whose product runs on the chip's numerics: the weights scaled by the smoothing factors
    of their columns and quantised to int8 with a scale per row; the input divided by the same factors and
    quantised to 15 bits (``fifteen_bit``), two int8 digit rows (``digits`` = 1: to int8, one row); the MM's
    int32 sums of the rows (stored whole by the chip: ST's wd, ``whole_step.linear_program``), combined by the
    host (high x INPUT_RADIX + low, exact) and scaled back to float by the row's scale and the input's.

    With ``weight_digits`` = 2 the weights are wide: integers up to INPUT_LIMIT at 1/INPUT_RADIX of the row's
    int8 scale, held as two int8 digit planes (``input_digits``); ``w8`` is what the chip streams, the high
    plane's rows then the low plane's (twice the rows), and the host combines each weight row's two sums as it
    combines the input's digits.

    The int8 weights are held as float32 and multiplied ``K_CHUNK`` columns at a time: every partial sum of
    int8 x int8 products over at most 1,024 columns is an integer below 2^24, so float32 holds it exactly
    whatever order the BLAS adds in, and the chunks are added in int64: the int32 sums the chip computes."""

    K_CHUNK = 1024                      # 1,024 x 127 x 127 < 2^24

    def __init__(self, w, x_peak, smoothing=SMOOTHING, digits=2, weight_digits=1):
        if weight_digits not in WEIGHT_DIGITS:
            raise ValueError(f"weight_digits must be 1 or 2, not {weight_digits!r}")
        self.digits, self.weight_digits = digits, weight_digits
        w = np.asarray(w, dtype=np.float64)
        self.smooth = smoothing_factors(x_peak, w, smoothing)
        ws = w * self.smooth
        self.scale = _scale(np.abs(ws).max(axis=1))
        if weight_digits == 1:
            self.w8 = V.quantize(ws, self.scale[:, None]).astype(np.float32)
        else:
            self.scale = self.scale / INPUT_RADIX
            wide = V.quantize(ws, self.scale[:, None], INPUT_LIMIT)
            self.w8 = np.concatenate(input_digits(wide)).astype(np.float32)

    @property
    def shape(self):
        """The weight matrix's (rows, columns); the chip streams ``weight_digits`` times the rows."""
        return self.w8.shape[0] // self.weight_digits, self.w8.shape[1]

    def weight_sums(self, sums):
        """The sums of the weights' rows from the sums of ``w8``'s rows (..., weight_digits x rows): each row's
        planes combined as the input's digits are (``combined``: high x INPUT_RADIX + low, exact)."""
        return combined(np.split(sums, self.weight_digits, axis=-1))

    def sums(self, rows):
        """The chip's int32 sums of every weight row with each int8 input row of ``rows`` (n, columns):
        (n, weight rows), int64."""
        rows = np.asarray(rows, dtype=np.float32)
        out = 0
        for k in range(0, self.w8.shape[1], self.K_CHUNK):
            out = out + np.rint(self.w8[:, k:k + self.K_CHUNK] @ rows[:, k:k + self.K_CHUNK].T).astype(np.int64)
        return out.T

    def __call__(self, x, sums=None):
        """The product of the vector ``x``; ``sums``: what computes the int32 sums of the input rows in place of
        ``self.sums`` (a simulator of the chip: ``Ga2Model.products``)."""
        rows, x_scale = self.input_rows(x)
        return self.outputs(rows, x_scale, (sums or self.sums)(rows))

    # Vectors ``rows`` multiplies at once: their digit rows' sums as float32 take 4 x ROWS x digits bytes a weight
    # row (the LM head's 49,152 rows: 100 MB), their int64 copy twice that.
    ROWS = 256

    def rows(self, X):
        """``self(x)`` of every row ``x`` of ``X`` (n, columns), exactly: each row's input quantised as it is
        alone, the int32 sums of all their digit rows one product (integers: the same in any order), (n, rows)
        float32. What makes ``Ga2Model.text_logits`` fast."""
        out = []
        for a in range(0, len(X), self.ROWS):
            inputs = [self.input_rows(x) for x in X[a:a + self.ROWS]]
            sums, d = self.sums(np.concatenate([rows for rows, _ in inputs])), len(inputs[0][0])
            out += [self.outputs(rows, x_scale, sums[n * d:(n + 1) * d]) for n, (rows, x_scale) in enumerate(inputs)]
        return np.stack(out)

    def input_rows(self, x):
        """The int8 digit rows the host writes for the vector ``x`` and the scale of the integer they stand for
        (``quantised_input`` of ``x`` divided by the smoothing factors)."""
        return quantised_input(np.asarray(x, dtype=np.float64) / self.smooth, self.digits)

    def outputs(self, rows, x_scale, sums):
        """The float32 products from the int32 ``sums`` of the input's digit ``rows`` (digits, weight rows)."""
        return (combined(self.weight_sums(sums)) * self.scale * x_scale).astype(np.float32)


class RescoredHead(ChipLinear):
    """The LM head on the chip's numerics (int8 weights with a scale per row, ``ChipLinear``), its ``candidates``
    best logits computed again with 15-bit weights. Each weight's rounding error in steps of 1/INPUT_RADIX of its
    row's scale (``residual``, -64..64) is a second int8 plane, held in external memory beside the int8 one; the
    chip multiplies the candidates' rows of it by the same input (the step's small second product, ``rescore``)
    and the host combines each candidate's sums as wide weights' are combined (int8 sums x INPUT_RADIX + residual
    sums, exact): the sums of the weights ``INPUT_RADIX x w8 + residual``, within half a step of 1/INPUT_RADIX of
    the row's scale. The argmax then compares the logits of 15-bit weights where it matters, for ``candidates``
    rows of bytes instead of a second plane of the whole head."""

    def __init__(self, w, x_peak, smoothing=None, digits=2, candidates=HEAD_CANDIDATES):
        super().__init__(w, x_peak, smoothing, digits, 1)
        if not 1 <= candidates <= self.w8.shape[0]:
            raise ValueError(f"candidates must be in 1..{self.w8.shape[0]}, not {candidates!r}")
        self.candidates = candidates
        ws = np.asarray(w, dtype=np.float64) * self.smooth
        error = (ws / self.scale[:, None] - self.w8) * INPUT_RADIX         # within +-INPUT_RADIX / 2
        self.residual = V.quantize(error, 1.0, INPUT_RADIX // 2).astype(np.float32)

    def best(self, logits):
        """The rows of the ``candidates`` largest ``logits``, in increasing order."""
        return np.sort(np.argpartition(-logits, self.candidates - 1)[:self.candidates])

    def __call__(self, x, sums=None, rescore=None):
        """The logits of ``x``: every row's from the int8 weights, the candidates' from the 15-bit weights.
        ``sums`` as ``ChipLinear``'s; ``rescore(w8, rows)``: what computes the int32 sums of the candidates'
        residual rows ``w8`` with the input rows in place of numpy (a simulator of the chip)."""
        rows, x_scale = self.input_rows(x)
        return self.outputs(rows, x_scale, (sums or self.sums)(rows), rescore)

    def outputs(self, rows, x_scale, sums, rescore=None):
        """The logits from the int32 ``sums`` of the input's digit ``rows``: every row's from the int8 weights,
        the candidates' from the 15-bit weights (their residual sums from ``rescore`` as ``__call__``'s)."""
        coarse = combined(self.weight_sums(sums))
        logits = coarse * self.scale * x_scale
        top = self.best(logits)
        fine = combined((rescore or _integer_sums)(self.residual[top], rows))
        logits[top] = (coarse[top] * INPUT_RADIX + fine) * (self.scale[top] / INPUT_RADIX) * x_scale
        return logits.astype(np.float32)


def _integer_sums(w8, rows):
    """The int32 sums of each int8 row of ``rows`` with each row of ``w8``: (input rows, weight rows), int64."""
    return np.asarray(rows, dtype=np.int64) @ np.asarray(w8, dtype=np.int64).T


def quantised_input(h, digits):
    """A product's input ``h`` (divided by the smoothing factors) quantised at its own scale, as the host writes
    it for the chip: with two digits to integers up to INPUT_LIMIT (``fifteen_bit``) as their digit rows, with
    one to int8 (max |h| / 127). (rows (digits, n), the scale of the integer they stand for)."""
    if digits == 1:
        x_scale = float(_scale(np.abs(h).max()))
        return V.quantize(h, x_scale)[None, :], x_scale
    return fifteen_bit(h)


def combined(sums):
    """The integers the digit rows' sums stand for: high x INPUT_RADIX + low (exact), or one row's sums."""
    return sums[0] * INPUT_RADIX + sums[1] if len(sums) == 2 else sums[0]


def read_outputs(coarse8, fine8, coarse_scale, fine_scale):
    """The host's reading of the attention outputs from their two int8 readings (heads, d), each head's scales
    (heads,): the fine reading where it is strictly inside the int8 range (a value at a limit may have been
    clamped), else the coarse one. Float32 (heads, d)."""
    fine8, coarse8 = np.asarray(fine8), np.asarray(coarse8)
    inside = (fine8 > -128) & (fine8 < 127)
    out = np.where(inside, fine8 * np.asarray(fine_scale)[:, None], coarse8 * np.asarray(coarse_scale)[:, None])
    return out.astype(np.float32)


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
        for name in self.FIELDS:
            setattr(self, name, _scale(peaks[name]))
        # each weight matrix of FloatModel.linear: its input's largest magnitude per channel
        self.inputs = {name[len("in:"):]: peak for name, peak in peaks.items() if name.startswith("in:")}


class _Recorder(FloatModel):
    """The float reference, noting the largest magnitude of each quantity the GA-2 path holds in int8 and of
    each channel of every weight matrix's input."""

    def linear(self, name, x):
        peak = self.peaks.setdefault("in:" + name, np.zeros(np.shape(x)))
        np.maximum(peak, np.abs(x), out=peak)
        return super().linear(name, x)

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


def calibrate(model, prompts=PROMPTS, cache=True):
    """Run the float reference over ``prompts`` (the ``ga2 llm scores`` prompts by default, none of them the
    evaluation's text) and return the ``Calibration`` of what it saw.

    The float reference takes a quarter of a minute over the default prompts, so with ``cache`` the peaks are
    kept in ``files.cache_dir()`` under a key of everything they depend on (``_calibration_key``) and read
    from there the next time; a file that cannot be read is computed again."""
    path = files.cache_dir() / f"calibration-{_calibration_key(model, prompts)}.npz" if cache else None
    if path is not None and path.is_file():
        try:
            with np.load(path) as stored:
                return Calibration({name: stored[name] for name in stored.files}, tuple(prompts))
        except (OSError, ValueError):
            pass
    rec = _Recorder(model)
    for text in prompts:
        rec.prefill(model.encode(text))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{os.getpid()}.part.npz")   # written whole, then renamed
        np.savez(part, **rec.peaks)
        os.replace(part, path)
    return Calibration(rec.peaks, tuple(prompts))


def _calibration_key(model, prompts):
    """A digest of what a calibration depends on: the model file (path, size, modification time), the prompts,
    the float reference's and this module's source (the recorder), and numpy's version."""
    from . import float_model
    stat = os.stat(model.path)
    digest = hashlib.sha256(repr((os.path.abspath(model.path), stat.st_size, stat.st_mtime_ns, tuple(prompts),
                                  np.__version__)).encode())
    for module in (float_model, sys.modules[__name__]):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:24]


class Ga2Model(FloatModel):
    """The float reference with ``attention_block`` on GA-2's integer numerics. Its cache holds int8 keys and
    values (kv_heads, head_dim) per token, as the chip's external memory would. ``at_limit`` counts the int8
    values that ended at a limit of their range (most of them clamped: beyond the calibrated range).

    ``weight_scales``: "per-row" gives each row of the weights whose int32 sums go to the host its own scale (the
    host can undo any scale per row: q and k, and v with two input digits) and v one per head when the chip
    requantises it (one digit: its RQ has one multiplier); "per-head" one per head's 64 rows, "per-tensor" one
    per matrix. ``smoothing``: the exponent alpha of the
    per-channel factors s_j = max|x_j|^alpha / max|W_:j|^(1-alpha) folded into the weights' columns and divided
    out of the input before it is quantised (SmoothQuant; None for none), so that a few large input channels do
    not take the int8 range from the rest. ``key_scales``: the key cache's int8 scale per key/value head, or per
    channel with each channel's scale folded into the queries (then q.k is still one int8 dot product times one
    scale per head). ``fine_output``: read each attention output twice on the chip (a coarse and a fine NRM,
    ``read_outputs``) rather than once at the coarse scale. ``digits``: 2 gives every product a 15-bit input as
    two int8 digit rows, 1 the int8 input. ``int32_sums``: the chip stores the products' int32 sums (a chip built
    with ``st_words``), so v's go to the host as q's and k's do; without them (one digit only) v is requantised
    on the chip (RQ, one scale a head). ``key_digits``: 2 holds the key cache as wide keys (15 bits as two int8
    digits, docs/LONG_CONTEXT.md) at 1/128 of the int8 scale, so the same calibrated peak. ``linears``: "chip"
    puts every other matrix product (the output projection, gate, up, down, the LM head) on the chip's numerics
    (``ChipLinear``, its smoothing factors from the calibrated input peaks), "float" leaves them to the host.
    ``weight_digits``: 2 gives those products wide weights (15 bits as two int8 digit planes, ``ChipLinear``).
    ``linear_smoothing``: the alpha of those products' smoothing factors, or None for none (default
    ``LINEAR_SMOOTHING`` of the input's ``digits``); ``smoothing`` is q, k and v's. ``head_candidates``: the
    LM head's best candidates a token computes again with 15-bit weights (``RescoredHead``; 0 for none, and none
    with wide weights, which the whole head has)."""

    def __init__(self, model, calibration, weight_scales="per-row", key_scales="per-head", chunk=CHUNK,
                 smoothing=SMOOTHING, fine_output=True, digits=2, key_digits=PATH_KEY_DIGITS, linears="chip",
                 int32_sums=True, weight_digits=1, linear_smoothing=BY_DIGITS, head_candidates=HEAD_CANDIDATES):
        super().__init__(model)
        if weight_scales not in WEIGHT_SCALES:
            raise ValueError(f"weight_scales must be one of {', '.join(WEIGHT_SCALES)}, not {weight_scales!r}")
        if key_scales not in KEY_SCALES:
            raise ValueError(f"key_scales must be one of {', '.join(KEY_SCALES)}, not {key_scales!r}")
        self.cal, self.weight_scales, self.key_scales, self.chunk = calibration, weight_scales, key_scales, chunk
        if digits not in (1, 2):
            raise ValueError(f"digits must be 1 or 2, not {digits!r}")
        if digits == 2 and not int32_sums:
            raise ValueError("two input digits need the int32 sums on the host (int32_sums=True)")
        self.int32_sums = int32_sums
        if key_digits not in KEY_DIGITS:
            raise ValueError(f"key_digits must be 1 or 2, not {key_digits!r}")
        if linears not in LINEARS:
            raise ValueError(f"linears must be one of {', '.join(LINEARS)}, not {linears!r}")
        if weight_digits not in WEIGHT_DIGITS:
            raise ValueError(f"weight_digits must be 1 or 2, not {weight_digits!r}")
        if not isinstance(head_candidates, int) or head_candidates < 0:
            raise ValueError(f"head_candidates must be a count of rows (0 for none), not {head_candidates!r}")
        self.smoothing, self.fine_output, self.digits, self.key_digits = smoothing, fine_output, digits, key_digits
        if linear_smoothing == BY_DIGITS:
            linear_smoothing = LINEAR_SMOOTHING[digits]
        self.linear_smoothing = linear_smoothing
        c = self.c
        k = calibration.k_cache
        self.k_scale = k if key_scales == "per-channel" else np.broadcast_to(k.max(axis=-1, keepdims=True), k.shape)
        self.k_limit = KEY_LIMIT[key_digits]
        self.k_scale = self.k_scale * (127 / self.k_limit)         # the calibrated peak at the keys' limit
        self._quantise_projections(calibration, weight_scales, smoothing)
        self.linears = linears
        self.weight_digits = weight_digits if linears == "chip" else 1
        self.head_candidates = head_candidates if linears == "chip" and self.weight_digits == 1 else 0
        self.chip_linears = self._chip_linears(calibration, linear_smoothing, digits) if linears == "chip" else {}
        self.at_limit = {"v_proj": 0, "k_cache": 0, "out": 0}
        self.group = c.heads // c.kv_heads
        self._scalings = {}             # block -> output_scalings(block)
        # Called with every block's attention step when set (ga2_sw.llm.chip_steps runs sampled steps as chip
        # programs): on_attention(block, pos, q8, K8, V8, score, norm, out8, fine, fine8), K8 and V8 per
        # key/value head; fine and fine8 are [] and None without the fine reading.
        self.on_attention = None
        # When set, every attention step also runs on a simulator of the chip, whose outputs the model continues
        # with (sim.llm_step.ChipStepAttention: it checks them against the numpy ones):
        # chip(Step) -> (out8, fine8).
        self.chip = None
        # When set, every matrix product of a step runs as the step's own chip programs on a simulator, whose
        # int32 sums the model continues with (sim.llm_step.ChipProducts: it checks them against numpy's):
        # products(kind, w8, rows, where) -> sums (input rows, weight rows); kind is the step's product
        # (whole_step.block_products, head_product), w8 its int8 weights (rows, columns), rows the input's int8
        # digit rows (digits, columns).
        self.products = None

    def _chip_linears(self, calibration, smoothing, digits):
        """The products after the attention and the LM head on the chip's numerics, by weight name: every
        block's ``ChipLinear``, the head's a ``RescoredHead`` where it has candidates."""
        names = [f"blk.{b}.{n}.weight" for b in range(self.c.blocks) for n in self.BLOCK_LINEARS]
        out = {n: ChipLinear(self.w[n], calibration.inputs[n], smoothing, digits, self.weight_digits) for n in names}
        x_peak = calibration.inputs[self.HEAD]
        out[self.HEAD] = (RescoredHead(self.w[self.HEAD], x_peak, smoothing, digits, self.head_candidates)
                          if self.head_candidates else
                          ChipLinear(self.w[self.HEAD], x_peak, smoothing, digits, self.weight_digits))
        return out

    def _quantise_projections(self, calibration, weight_scales, smoothing):
        """Every block's q, k and v weights: scaled by the smoothing factors of their input's channels and
        quantised to int8 (``w8``) with the scales ``weight_scales`` asks for (``w_scale``)."""
        c, int32_sums = self.c, self.int32_sums
        self.w8, self.w_scale, self.smooth = {}, {}, {}
        for b in range(c.blocks):
            ws = {n: self.w[f"blk.{b}.attn_{n}.weight"] for n in "qkv"}
            self.smooth[b] = smoothing_factors(calibration.peaks["x"][b], list(ws.values()), smoothing)
            for n in "qkv":
                w = (ws[n] * self.smooth[b]).reshape(-1, c.head_dim, c.d_model)     # (heads, rows, cols)
                peak = np.abs(w).max(axis=2)                                       # (heads, rows)
                if weight_scales == "per-head" or (weight_scales == "per-row" and n == "v" and not int32_sums):
                    peak = np.broadcast_to(peak.max(axis=1, keepdims=True), peak.shape)
                elif weight_scales == "per-tensor":
                    peak = np.full_like(peak, peak.max())
                scale = _scale(peak)
                self.w8[b, n] = V.quantize(w, scale[:, :, None])
                self.w_scale[b, n] = scale

    # The step's product (``whole_step.block_products``, ``head_product``) of each weight matrix ``linear`` takes.
    PRODUCT_KINDS = {"attn_output": "o", "ffn_gate": "gate", "ffn_up": "up", "ffn_down": "down", "token_embd": "head"}

    def linear(self, name, x):
        chip = self.chip_linears.get(name)
        if chip is None:
            return super().linear(name, x)
        if self.products is None:
            return chip(x)
        kind = self.PRODUCT_KINDS[name.split(".")[-2]]
        sums = lambda rows: self.products(kind, chip.w8, rows, name)           # noqa: E731
        if isinstance(chip, RescoredHead):
            return chip(x, sums, lambda w8, rows: self.products(RESCORE, w8, rows, f"{name}.{RESCORE}"))
        return chip(x, sums)

    @property
    def weights_on_chip_fraction(self):
        """The fraction of the weights a token reads (every block's q, k, v, o, gate, up and down, and the LM
        head) whose products run on the chip's numerics."""
        c = self.c
        qkv = sum(self.w8[b, n].size for b in range(c.blocks) for n in "qkv")
        names = [f"blk.{b}.{n}.weight" for b in range(c.blocks) for n in self.BLOCK_LINEARS] + [self.HEAD]
        on_chip = qkv + sum(math.prod(self.chip_linears[n].shape) for n in names if n in self.chip_linears)
        return on_chip / (qkv + sum(self.w[n].size for n in names))

    def digit_sums(self, b, n, x8):
        """MM: block ``b``'s projection ``n`` of each int8 input row of ``x8`` (digits, d_model), the int32 sums
        (digits, heads, head_dim): what the chip computes."""
        return V.int_matmul(self.w8[b, n], x8.T).transpose(2, 0, 1)

    def qkv_digit_sums(self, b, x8):
        """``{n: digit_sums(b, n, x8)}`` of q, k and v: one product of their rows (the step's ``qkv``; on the
        simulator when ``products`` is set)."""
        if self.products is None:
            return {n: self.digit_sums(b, n, x8) for n in "qkv"}
        w8 = {n: self.w8[b, n] for n in "qkv"}
        sums = self.products("qkv", np.concatenate([w.reshape(-1, w.shape[-1]) for w in w8.values()]), x8,
                             f"blk.{b}.attn_qkv")
        ends = np.cumsum([0] + [w.shape[0] * w.shape[1] for w in w8.values()])
        return {n: sums[:, a:e].reshape(len(x8), *w8[n].shape[:2]) for n, a, e in zip("qkv", ends, ends[1:])}

    def quantised_input(self, b, h):
        """The host's step before the chip's: block ``b``'s normalised input ``h`` divided by the smoothing
        factors, quantised at its own scale (the host has just computed h): with two digits, to integers up
        to INPUT_LIMIT (max |h| / INPUT_LIMIT) written as their digit rows, else to int8 (max |h| / 127).
        (rows (digits, d_model), the scale of the integer they stand for)."""
        return quantised_input(h / self.smooth[b], self.digits)

    def value_requant(self, b, x_scale):
        """The (m, s) of each key/value head's RQ, which writes the value cache's int8 at its calibrated scale."""
        return [mantissa_shift(float(ws[0] * x_scale / vs))          # v's rows share their head's scale
                for ws, vs in zip(self.w_scale[b, "v"], self.cal.v_proj[b])]

    def values(self, b, x8, x_scale, digit_sums=None):
        """The int8 values (kv_heads, head_dim) of block ``b`` for the input rows ``x8`` (whose v ``digit_sums``
        may be given): the host quantises the (combined) int32 sums at the value cache's scale, or without
        ``int32_sums`` MM + RQ on the chip."""
        sums = combined(self.digit_sums(b, "v", x8) if digit_sums is None else digit_sums)
        if self.int32_sums:
            return V.quantize(sums * self.w_scale[b, "v"] * x_scale, self.cal.v_proj[b][:, None])
        m, s = (np.array(v, dtype=np.int64)[:, None] for v in zip(*self.value_requant(b, x_scale)))
        return V.requant(sums, m, s)

    def attention_block(self, b, h, pos, cache, attend):
        x8, x_scale = self.quantised_input(b, h)
        return self.attention_of_sums(b, x8, x_scale, self.qkv_digit_sums(b, x8), pos, cache)

    def attention_rows(self, b, H, cache):
        """``attention_block`` of every row of ``H`` in turn (row p at position p), exactly: each row's input
        quantised as the step quantises it, q, k and v of all of them one integer product (the same in any
        order), each position's host work on them as the step's, then the attention of every position at once
        (``vector_numerics.causal_partials``: each query over the keys up to its own, in the step's chunks)."""
        inputs, sums = self._qkv_rows(b, H)
        if self.on_attention is not None or self.chip is not None:      # hooks see each step's attention
            return np.stack([self.attention_of_sums(b, x8, x_scale, sums[p], p, cache)
                             for p, (x8, x_scale) in enumerate(inputs)])
        tokens = [self.token_attention(b, x8, x_scale, sums[p], p) for p, (x8, x_scale) in enumerate(inputs)]
        q8, k8, v8 = (np.stack([t[i] for t in tokens]) for i in range(3))
        score = np.array([t[3] for t in tokens], dtype=np.int64)           # (positions, heads, (m, s))
        keys, vals = cache
        keys.extend(k8)
        vals.extend(v8)
        partial, total = V.causal_partials(q8, k8, v8, score[..., 0], score[..., 1], self.chunk)
        return np.stack([self.attention_outputs(b, *self.output_readings(b, partial[p], total[p]))
                         for p in range(len(inputs))])

    def attention_of_rows(self, b, H, items):
        """``FloatModel.attention_of_rows``, exactly: q, k and v of all the rows one integer product, then each
        sequence's attention on its own cache as its step's."""
        inputs, sums = self._qkv_rows(b, H)
        return np.stack([self.attention_of_sums(b, x8, x_scale, sums[n], pos, cache[b])
                         for n, ((x8, x_scale), (_, pos, cache)) in enumerate(zip(inputs, items))])

    def _qkv_rows(self, b, H):
        """Each row of ``H`` quantised as a step quantises it, and the q, k and v sums of each (all of them one
        integer product): ([(x8, x_scale)], [{"q", "k", "v": sums}]), row by row."""
        if self.products is not None:
            raise ValueError("a simulator of the chip runs the path a step at a time (step), not rows at once")
        inputs = [self.quantised_input(b, h) for h in H]
        sums, d = self.qkv_digit_sums(b, np.concatenate([x8 for x8, _ in inputs])), self.digits
        return inputs, [{n: s[p * d:(p + 1) * d] for n, s in sums.items()} for p in range(len(inputs))]

    def prefill(self, tokens, cache=None):
        """Run the prompt, its positions together (``text_logits``: exactly its steps); a step at a time with a
        simulator of the chip's products or on a cache that already holds tokens."""
        if self.products is not None or (cache is not None and any(keys for keys, _ in cache)):
            return super().prefill(tokens, cache)
        cache = self.new_cache() if cache is None else cache
        return self.text_logits(tokens, cache=cache)[-1], cache

    def step_batch(self, items):
        """``step`` of each ``(token, pos, cache)``, exactly, the sequences' products together (``step_rows``);
        one after the other with a simulator of the chip's products (``products``), which takes a step's rows."""
        if self.products is not None:
            return super().step_batch(items)
        return list(self.step_rows(items))

    def linear_rows(self, name, X):
        chip = self.chip_linears.get(name)
        return super().linear_rows(name, X) if chip is None else chip.rows(X)

    def output_scalings(self, b):
        """Block ``b``'s output readings, the same at every step: the coarse output scale per query head and its
        NRM's (m, s), then the fine reading's (None and [] without it)."""
        if b not in self._scalings:
            shared = np.arange(self.c.heads) // self.group
            v_scale, o_scale = self.cal.v_proj[b][shared], self.cal.out[b] * OUT_HEADROOM
            norm = [mantissa_shift(float(vs / os)) for vs, os in zip(v_scale, o_scale)]
            fine_scale = o_scale / FINE_RATIO if self.fine_output else None
            fine = [mantissa_shift(float(vs / fs)) for vs, fs in zip(v_scale, fine_scale)] if self.fine_output else []
            self._scalings[b] = (o_scale, norm, fine_scale, fine)
        return self._scalings[b]

    def attention_of_sums(self, b, x8, x_scale, sums, pos, cache):
        """Block ``b``'s attention of the token at ``pos`` from its input's digit rows ``x8`` (scale ``x_scale``)
        and their q, k and v ``sums`` (``qkv_digit_sums``): (heads, head_dim) float32."""
        q8, k8, v8, score = self.token_attention(b, x8, x_scale, sums, pos)
        keys, vals = cache
        keys.append(k8)
        vals.append(v8)
        K_kv = np.stack(keys).transpose(1, 0, 2)                      # (kv_heads, tokens, head_dim)
        V_kv = np.stack(vals).transpose(1, 0, 2)
        shared = np.arange(self.c.heads) // self.group                # the key/value head of each query head
        partial, total = V.online_partials(q8, K_kv[shared], V_kv[shared], *zip(*score), self.chunk)
        out8, fine8 = self.output_readings(b, partial, total)
        _, norm, _, fine = self.output_scalings(b)
        if self.on_attention is not None:
            self.on_attention(b, pos, q8, K_kv, V_kv, score, norm, out8, fine, fine8)
        if self.chip is not None:
            from .chip_steps import Step
            out8, fine8 = self.chip(Step(0, b, pos, q8, K_kv, V_kv, score, norm, out8, self.group, fine, fine8,
                                         self.key_digits))
        return self.attention_outputs(b, out8, fine8)

    def token_attention(self, b, x8, x_scale, sums, pos):
        """The host's work on one token's q, k and v ``sums`` in block ``b``: q and k scaled back and rotated,
        the key and value rounded for the cache and the query for the scores. (q8 (heads, head_dim), k8 and v8
        (kv_heads, head_dim), each query head's score scaling (m, s))."""
        c = self.c
        # q and k (and v with int32_sums): the int32 sums to the host, which undoes the scales (and applies RoPE)
        q = self._rope(combined(sums["q"]) * self.w_scale[b, "q"] * x_scale, pos)
        k = self._rope(combined(sums["k"]) * self.w_scale[b, "k"] * x_scale, pos)
        v8 = self.values(b, x8, x_scale, sums["v"])
        # keys at the cache's per-channel scales; each channel's scale folded into the queries that meet it, so
        # that q.k = q_scale * (q8 . k8) with one score multiplier per head
        k8 = V.quantize(k, self.k_scale[b], self.k_limit)
        shared = np.arange(c.heads) // self.group                     # the key/value head of each query head
        q = q * self.k_scale[b][shared]
        q_scale = _scale(np.abs(q).max(axis=1))                      # per head and token
        q8 = V.quantize(q, q_scale[:, None])
        low = -127 if self.int32_sums else -128                       # quantize's limit, requant's
        self.at_limit["v_proj"] += int(np.sum((v8 == 127) | (v8 == low)))
        self.at_limit["k_cache"] += int(np.sum(np.abs(k8) == self.k_limit))
        score = [mantissa_shift(float(qs / math.sqrt(c.head_dim) * SCORE_UNIT)) for qs in q_scale]
        return q8, k8, v8, score

    def output_readings(self, b, partial, total):
        """NRM of block ``b``'s running outputs ``partial`` and sums ``total`` (one token's): the coarse int8
        outputs (heads, head_dim) and the fine ones (None without the fine reading)."""
        _, norm, _, fine = self.output_scalings(b)
        out8 = V.normalise(partial, total, *zip(*norm))
        self.at_limit["out"] += int(np.sum((out8 == 127) | (out8 == -128)))
        return out8, (V.normalise(partial, total, *zip(*fine)) if fine else None)

    def attention_outputs(self, b, out8, fine8):
        """The host's reading of one token's int8 attention outputs in block ``b``: (heads, head_dim) float32."""
        o_scale, _, fine_scale, _ = self.output_scalings(b)
        if fine8 is None:
            return (out8 * o_scale[:, None]).astype(np.float32)
        return read_outputs(out8, fine8, o_scale, fine_scale)
