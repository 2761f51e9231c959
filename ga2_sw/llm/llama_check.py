"""The float reference (``float_model.FloatModel``) against llama.cpp, through the llama-cpp-python package:
both read the same token ids with teacher forcing (the project's tokenizer makes them; llama.cpp adds no BOS
token to ids given to it, and the file asks for none), and their next-token logits are compared at every
position: top-1 agreement, the largest absolute logit difference, the KL divergence between the two softmaxes
and each one's perplexity of the text's own next tokens.

On the GGUF file itself llama.cpp computes differently from the reference: its CPU products of Q4_1 and Q8_0
weights round each input vector to 8 bits in blocks of 32 first (Q8_1, Q8_0), which moves logits by tenths
and swaps near-tied top-1 tokens. ``float32_copy`` writes the same file with every tensor dequantised to
float32 (the values the reference computes with, bit for bit), on which llama.cpp's products are float32 too:
there the two agree to float32 rounding. The KV cache is float32 on llama.cpp's side unless ``kv_f32`` is
False (its default, float16, is a further small difference)."""

import time

import numpy as np

from ..options import ToolMissing

__all__ = ["requirements", "float32_copy", "llama_tokens", "llama_logits", "float_logits", "compare"]


def requirements():
    """The llama_cpp module; ToolMissing saying how to install it (it compiles llama.cpp with cmake)."""
    try:
        import llama_cpp
    except ImportError:
        raise ToolMissing("the llama.cpp comparison needs the llama-cpp-python package, which is not installed "
                          "(pip install llama-cpp-python: it compiles llama.cpp, several minutes)") from None
    return llama_cpp


def float32_copy(src, dst):
    """Write ``dst``: the GGUF file ``src`` with the same metadata (but ``general.file_type`` 0, all float32)
    and every tensor dequantised to float32 by the ``gguf`` package, as ``gguf_model.load`` does. Returns
    ``dst``."""
    import gguf
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), arch=reader.fields["general.architecture"].contents())
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue                                     # written by GGUFWriter itself
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = 0 if field.name == "general.file_type" else field.contents()
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    for t in reader.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        writer.add_tensor(t.name, w.reshape([int(n) for n in reversed(t.shape)]) if w.ndim > 1 else w.reshape(-1))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


def _llama(path, n_ctx, kv_f32=True, threads=1):
    llama_cpp = requirements()
    kv = {"type_k": llama_cpp.GGML_TYPE_F32, "type_v": llama_cpp.GGML_TYPE_F32} if kv_f32 else {}
    return llama_cpp.Llama(model_path=str(path), n_ctx=max(int(n_ctx), 64), logits_all=True, n_threads=threads,
                           n_threads_batch=threads, flash_attn=False, verbose=False, **kv)


def llama_tokens(path, text):
    """llama.cpp's own tokens of ``text`` (no BOS, control tokens read as such): a check of the project's
    tokenizer, which is rebuilt from the same file's metadata."""
    return list(_llama(path, 64).tokenize(text.encode("utf-8"), add_bos=False, special=True))


def llama_logits(path, ids, kv_f32=True, threads=1):
    """llama.cpp's logits after each token of ``ids``, read in one pass from position 0 (``Llama.eval`` with
    ``logits_all``, then ``Llama.scores``): (len(ids), vocab) float32."""
    ids = [int(t) for t in ids]
    llm = _llama(path, len(ids), kv_f32, threads)
    llm.reset()
    llm.eval(ids)
    return np.array(llm.scores[:len(ids)], dtype=np.float32)


def float_logits(model, ids):
    """The float reference's logits after each token of ``ids`` (one KV cache): (len(ids), vocab) float32."""
    from .float_model import FloatModel
    ref = FloatModel(model)
    cache = ref.new_cache()
    return np.stack([ref.step(int(t), pos, cache) for pos, t in enumerate(ids)]).astype(np.float32)


def _log_softmax(logits):
    z = logits.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def compare(model_path, ids, model=None, reference=None, llama_path=None, kv_f32=True, threads=1):
    """The float reference of ``model_path`` and llama.cpp over ``ids``. ``model``: that file's loaded
    ``gguf_model.Model`` (loaded here when not given); ``reference``: the reference's logits of ``ids``
    (``float_logits``, computed here when not given); ``llama_path``: the file llama.cpp reads, by default
    ``model_path`` itself (``float32_copy`` of it for the float32 comparison).

    Returns a dict: ``tokens`` compared (every position, the last one included); ``top1_agreement``, the
    fraction of positions whose argmax tokens are equal; ``max_abs_logit_diff`` over every position and
    vocabulary entry, with ``mean_abs_logit_diff``; ``mean_kl``, KL(llama.cpp || reference) averaged over
    positions, in nats; each side's perplexity of the text's own next tokens; the seconds each side took (the
    reference's 0 when given); and ``per_token``: each position's top-1 token on both sides, largest absolute
    logit difference, KL and the reference's margin between its two best logits."""
    ids = [int(t) for t in ids]
    start = time.perf_counter()
    if reference is None:
        if model is None:
            from .gguf_model import load
            model = load(model_path)
        reference = float_logits(model, ids)
    seconds_float = time.perf_counter() - start
    start = time.perf_counter()
    ll = llama_logits(llama_path or model_path, ids, kv_f32, threads)
    seconds_llama = time.perf_counter() - start
    lf = np.asarray(reference, dtype=np.float32)
    if ll.shape != lf.shape:
        raise ValueError(f"llama.cpp gave logits of shape {ll.shape}, the reference {lf.shape}")
    top_f, top_l = lf.argmax(axis=1), ll.argmax(axis=1)
    diff = np.abs(lf - ll)
    worst = diff.max(axis=1)
    pf, pl = _log_softmax(lf), _log_softmax(ll)
    kl = (np.exp(pl) * (pl - pf)).sum(axis=1)
    two = np.sort(lf, axis=1)[:, -2:]
    margin = two[:, 1] - two[:, 0]
    n = len(ids)
    rows, nxt = np.arange(n - 1), np.array(ids[1:], dtype=np.int64)
    ppl = lambda p: round(float(np.exp(-p[rows, nxt].mean())), 4) if n > 1 else None
    return {"tokens": n, "top1_agreement": round(float((top_f == top_l).mean()), 4),
            "max_abs_logit_diff": float(f"{worst.max():.4g}"), "mean_abs_logit_diff": float(f"{diff.mean():.4g}"),
            "mean_kl": float(f"{kl.mean():.4g}"), "perplexity_float": ppl(pf), "perplexity_llama": ppl(pl),
            "kv_cache": "f32" if kv_f32 else "f16", "seconds_float": round(seconds_float, 1),
            "seconds_llama": round(seconds_llama, 1),
            "per_token": [{"pos": i, "top1_float": int(a), "top1_llama": int(b), "max_abs_logit_diff":
                           float(f"{d:.4g}"), "kl": float(f"{k:.4g}"), "margin_float": float(f"{g:.4g}")}
                          for i, (a, b, d, k, g) in enumerate(zip(top_f, top_l, worst, kl, margin))]}
