"""The float32 reference of SmolLM2-135M in numpy: RMSNorm, grouped-query attention with RoPE on interleaved
pairs (GGUF stores llama's q and k rows permuted for that), SwiGLU, the output projection tied to the token
embedding (the file has no output.weight). Greedy decoding with a KV cache."""

import numpy as np

__all__ = ["FloatModel"]


class FloatModel:
    """Runs a ``gguf_model.Model`` token by token; ``cache`` holds each block's keys and values."""

    def __init__(self, model):
        self.model, self.c, self.w = model, model.config, model.weights
        c = self.c
        self.inv_freq = c.rope_base ** (-np.arange(0, c.head_dim, 2, dtype=np.float64) / c.head_dim)

    def new_cache(self):
        return [([], []) for _ in range(self.c.blocks)]

    def _norm(self, x, weight):
        return x / np.sqrt(np.mean(x * x) + self.c.rms_eps) * weight

    def _rope(self, x, pos):
        """Rotate each head's pairs (x[2i], x[2i+1]) by pos * base^(-2i/head_dim)."""
        angle = pos * self.inv_freq
        cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
        even, odd = x[:, 0::2], x[:, 1::2]
        out = np.empty_like(x)
        out[:, 0::2], out[:, 1::2] = even * cos - odd * sin, even * sin + odd * cos
        return out

    def kv_head(self, h):
        """The key/value head that query head ``h`` shares (grouped-query attention)."""
        return h // (self.c.heads // self.c.kv_heads)

    def logits(self, q, keys):
        """Each query head's logits q.k / sqrt(head_dim) over the keys (t, kv_heads, head_dim): a list of (t,)."""
        return [keys[:, self.kv_head(h)] @ q[h] / np.sqrt(self.c.head_dim) for h in range(self.c.heads)]

    def attention(self, q, keys, values):
        """One block's attention for one token: q (heads, head_dim), keys and values (t, kv_heads, head_dim)."""
        out = np.empty_like(q)
        for h, logits in enumerate(self.logits(q, keys)):
            p = np.exp(logits - logits.max())
            out[h] = (p / p.sum()) @ values[:, self.kv_head(h)]
        return out

    def attention_block(self, b, h, pos, cache, attend):
        """Block ``b``'s attention of one token, before the output projection: the q, k and v projections of the
        normalised input ``h``, RoPE on q and k, k and v appended to the block's ``cache`` (keys, values), and
        ``attend`` over the cache: (heads, head_dim). The GA-2 path (``ga2_path.Ga2Model``) replaces this."""
        c, w, p = self.c, self.w, f"blk.{b}."
        q = self._rope((w[p + "attn_q.weight"] @ h).reshape(c.heads, c.head_dim), pos)
        k = self._rope((w[p + "attn_k.weight"] @ h).reshape(c.kv_heads, c.head_dim), pos)
        v = (w[p + "attn_v.weight"] @ h).reshape(c.kv_heads, c.head_dim)
        keys, values = cache
        keys.append(k)
        values.append(v)
        return attend(q, np.stack(keys), np.stack(values))

    # The weight matrices of a step that go through ``linear`` (the q, k and v projections are in
    # ``attention_block``): per block the output projection and the SwiGLU's three, then the LM head (tied to
    # the token embedding).
    BLOCK_LINEARS = ("attn_output", "ffn_gate", "ffn_up", "ffn_down")
    HEAD = "token_embd.weight"

    def linear(self, name, x):
        """The product of weight matrix ``name`` (rows, columns) and the vector ``x``: every matrix product of a
        step but q, k and v goes through here (the GA-2 path puts each on the chip's numerics)."""
        return self.w[name] @ x

    def step(self, token, pos, cache, attention=None):
        """Logits of the next token after ``token`` at position ``pos`` (0-based); appends to ``cache``.
        ``attention``: a replacement for ``self.attention`` (the GA-2 path plugs in here)."""
        c, w = self.c, self.w
        attend = attention or self.attention
        x = w["token_embd.weight"][token].astype(np.float32)
        for b in range(c.blocks):
            p = f"blk.{b}."
            a = self.attention_block(b, self._norm(x, w[p + "attn_norm.weight"]), pos, cache[b], attend)
            x = x + self.linear(p + "attn_output.weight", a.reshape(-1))
            h = self._norm(x, w[p + "ffn_norm.weight"])
            gate = self.linear(p + "ffn_gate.weight", h)
            up = self.linear(p + "ffn_up.weight", h)
            x = x + self.linear(p + "ffn_down.weight", gate / (1 + np.exp(-gate)) * up)
        return self.linear(self.HEAD, self._norm(x, w["output_norm.weight"]))

    def step_batch(self, items):
        """``step`` of each ``(token, pos, cache)`` of a batch's sequences: their logits, in order. The float
        reference computes them one after the other, so that a sequence's float32 logits never depend on the
        batch it is in (``step_rows`` would add its sums in another order); the GA-2 path, whose sums are
        integers, takes them together (``Ga2Model.step_batch``), and ``sim.llm_step.Lockstep`` runs them as the
        chip's programs. Each row of GA-2's batched programs is what it would be alone."""
        return [self.step(token, pos, cache) for token, pos, cache in items]

    def text_logits(self, tokens, progress=None, cache=None):
        """The logits after every token of ``tokens`` (n, vocabulary), each position attending to itself and
        the positions before it (teacher forcing): the whole text block by block, every weight matrix after the
        attention multiplying all the positions' rows at once (``linear_rows``: a matrix product in place of n
        vector products). Row ``p`` is what ``step(tokens[p], p, cache)`` gives after the steps before it; in
        float32 up to the order a matrix product adds in (on the GA-2 path, whose products are integer,
        exactly). ``progress(1)`` after each block and after the head. ``cache``: an empty cache to fill (a new
        one by default)."""
        cache = self.new_cache() if cache is None else cache
        return self._rows(tokens, lambda b, H: self.attention_rows(b, H, cache[b]), progress)

    def step_rows(self, items):
        """``step`` of each ``(token, pos, cache)`` of a batch of sequences at once: each sequence's attention on
        its own cache, every weight matrix after the attention multiplying all their rows at once
        (``linear_rows``). Row ``n`` is what ``step`` gives the n-th alone; in float32 up to the order a matrix
        product adds in (on the GA-2 path exactly)."""
        return self._rows([token for token, _, _ in items], lambda b, H: self.attention_of_rows(b, H, items))

    def attention_of_rows(self, b, H, items):
        """Block ``b``'s ``attention_block`` of each row of ``H``, the n-th at the position and on the cache of
        ``items[n]`` (``(token, pos, cache)``): (n, heads, head_dim)."""
        return np.stack([self.attention_block(b, h, pos, cache[b], self.attention)
                         for h, (_, pos, cache) in zip(H, items)])

    def _rows(self, tokens, attention_rows, progress=None):
        """The logits after each of ``tokens`` (n, vocabulary), block by block, ``attention_rows(b, H)`` giving
        block ``b``'s attention of the normalised rows ``H`` and ``linear_rows`` every other product."""
        c, w = self.c, self.w
        tick = progress or (lambda n: None)
        X = w["token_embd.weight"][list(tokens)].astype(np.float32)
        for b in range(c.blocks):
            p = f"blk.{b}."
            A = attention_rows(b, self._norm_rows(X, w[p + "attn_norm.weight"]))
            X = X + self.linear_rows(p + "attn_output.weight", A.reshape(len(X), -1))
            H = self._norm_rows(X, w[p + "ffn_norm.weight"])
            gate = self.linear_rows(p + "ffn_gate.weight", H)
            up = self.linear_rows(p + "ffn_up.weight", H)
            X = X + self.linear_rows(p + "ffn_down.weight", gate / (1 + np.exp(-gate)) * up)
            tick(1)
        logits = self.linear_rows(self.HEAD, self._norm_rows(X, w["output_norm.weight"]))
        tick(1)
        return logits

    def _norm_rows(self, X, weight):
        """``_norm`` of each row of ``X`` (row by row: the same sums as a step's)."""
        return np.stack([self._norm(x, weight) for x in X])

    def attention_rows(self, b, H, cache):
        """``attention_block`` of every row of ``H`` in turn (row p at position p) on the block's ``cache``:
        (n, heads, head_dim)."""
        return np.stack([self.attention_block(b, h, p, cache, self.attention) for p, h in enumerate(H)])

    def linear_rows(self, name, X):
        """``linear`` of every row of ``X`` (n, columns) at once: (n, rows)."""
        return X @ self.w[name].T

    def prefill(self, tokens, cache=None):
        """Run the prompt; (logits after its last token, cache)."""
        cache = cache if cache is not None else self.new_cache()
        logits = None
        for pos, t in enumerate(tokens):
            logits = self.step(t, pos, cache)
        return logits, cache

    def generate(self, prompt, max_tokens=32, stop=None):
        """Greedy continuation of ``prompt`` (text): the new token ids."""
        tokens = self.model.encode(prompt)
        logits, cache = self.prefill(tokens)
        out = []
        stop = {self.model.special["eos"], self.model.special["im_end"]} if stop is None else stop
        for _ in range(max_tokens):
            nxt = int(np.argmax(logits))
            if nxt in stop:
                break
            out.append(nxt)
            logits = self.step(nxt, len(tokens) + len(out) - 1, cache)
        return out

    def generate_batch(self, prompts, max_tokens=32, stop=None, progress=None):
        """``generate`` of each of ``prompts``, their steps taken together (``step_batch``): the new token ids of
        each, in order. ``progress(1)`` after each step."""
        tick = progress or (lambda n: None)
        stop = {self.model.special["eos"], self.model.special["im_end"]} if stop is None else stop
        lengths = [len(self.model.encode(prompt)) for prompt in prompts]
        logits, caches = map(list, zip(*(self.prefill(self.model.encode(prompt)) for prompt in prompts)))
        out, active = [[] for _ in prompts], range(len(prompts))
        for _ in range(max_tokens):
            active = [n for n in active if int(np.argmax(logits[n])) not in stop]
            if not active:
                break
            for n in active:
                out[n].append(int(np.argmax(logits[n])))
            rows = self.step_batch([(out[n][-1], lengths[n] + len(out[n]) - 1, caches[n]) for n in active])
            for n, row in zip(active, rows):
                logits[n] = row
            tick(1)
        return out

    def log_likelihood(self, text):
        """(sum of log p(token | tokens before), tokens scored) over ``text``'s tokens after the first."""
        tokens = self.model.encode(text)
        cache, total = self.new_cache(), 0.0
        for pos, t in enumerate(tokens[:-1]):
            logits = self.step(t, pos, cache).astype(np.float64)
            logits -= logits.max()
            total += logits[tokens[pos + 1]] - np.log(np.exp(logits).sum())
        return total, len(tokens) - 1
