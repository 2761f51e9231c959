"""SmolLM2-135M out of its GGUF file: hyperparameters and tokenizer from the metadata, weights dequantised to
float32 numpy arrays by the ``gguf`` package (``gguf.quants.dequantize``)."""

from dataclasses import dataclass

import numpy as np

from ..options import ToolMissing
from .files import model_path

__all__ = ["ModelConfig", "Model", "load", "requirements"]


def requirements():
    """The gguf and tokenizers modules; ToolMissing naming the missing package and how to install it."""
    try:
        import gguf
        import tokenizers
    except ImportError as exc:
        raise ToolMissing(f"ga2 llm needs the {exc.name} package, which is not installed "
                          f"(pip install -e '.[llm]', or pip install gguf tokenizers)") from None
    return gguf, tokenizers


@dataclass(frozen=True)
class ModelConfig:
    """The llama hyperparameters the file declares."""
    blocks: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    rms_eps: float
    rope_base: float
    context: int


@dataclass
class Model:
    config: ModelConfig
    weights: dict           # name -> float32 array, matrices as (out, in)
    tokenizer: object       # a tokenizers.Tokenizer
    special: dict           # name -> token id (bos, eos, im_start, im_end)
    path: str

    def encode(self, text):
        return self.tokenizer.encode(text).ids

    def decode(self, ids):
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    @property
    def parameters(self):
        return sum(int(w.size) for w in self.weights.values())


def _field(reader, key):
    field = reader.fields[key]
    return field.contents()


def _tokenizer(reader, tokenizers):
    from tokenizers import decoders, models, pre_tokenizers, AddedToken
    tokens = _field(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges")]
    kinds = _field(reader, "tokenizer.ggml.token_type")
    pre = _field(reader, "tokenizer.ggml.pre")
    if _field(reader, "tokenizer.ggml.model") != "gpt2" or pre != "smollm":
        raise ValueError(f"expected a GPT-2-style byte BPE with the smollm pre-tokenizer, not {pre!r}")
    tk = tokenizers.Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    # llama.cpp's "smollm" pre-tokenizer: every digit alone, then GPT-2's byte-level split.
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tk.decoder = decoders.ByteLevel()
    control = [t for t, kind in zip(tokens, kinds) if kind == 3]          # GGUF token type 3: control
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    return tk, tokens


def load(path=None):
    """The model in ``path`` (default: ``files.model_path()``)."""
    gguf, tokenizers = requirements()
    path = str(path or model_path())
    reader = gguf.GGUFReader(path)
    if _field(reader, "general.architecture") != "llama":
        raise ValueError(f"{path}: not a llama model")
    g = lambda key: _field(reader, f"llama.{key}")
    d_model, heads = int(g("embedding_length")), int(g("attention.head_count"))
    config = ModelConfig(blocks=int(g("block_count")), d_model=d_model, heads=heads,
                         kv_heads=int(g("attention.head_count_kv")), head_dim=d_model // heads,
                         ffn=int(g("feed_forward_length")), vocab=int(g("vocab_size")),
                         rms_eps=float(g("attention.layer_norm_rms_epsilon")), rope_base=float(g("rope.freq_base")),
                         context=int(g("context_length")))
    weights = {}
    for t in reader.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        weights[t.name] = w.reshape([int(n) for n in reversed(t.shape)]) if w.ndim > 1 else w.reshape(-1)
    tk, tokens = _tokenizer(reader, tokenizers)
    special = {"bos": int(_field(reader, "tokenizer.ggml.bos_token_id")),
               "eos": int(_field(reader, "tokenizer.ggml.eos_token_id")),
               "im_start": tokens.index("<|im_start|>"), "im_end": tokens.index("<|im_end|>")}
    return Model(config, weights, tk, special, path)
