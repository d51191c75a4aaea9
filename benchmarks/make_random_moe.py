"""Write a randomly initialised Qwen3-MoE model and a word-level tokenizer to a folder, for serving benchmarks that
need a real MoE model on a machine without hub access (``truepeak serve`` against ``transformers serve``).

The tokenizer gives each word of truepeak's prompt words (:data:`truepeak.bench.serve.client.PROMPT_WORDS`) and of
``w0`` ... ``wN`` one token, so a prompt of N words is N tokens. The weights are random: the output is noise, the
work per token is the real model's (the geometry is the config's).

    python3 benchmarks/make_random_moe.py OUT [--layers 4] [--hidden 2048] [--experts 128] [--top-k 8]
        [--expert-width 768] [--heads 32] [--kv-heads 4] [--head-dim 128] [--device cuda] [--dtype bfloat16]

Defaults: Qwen3-30B-A3B's layer geometry (its config.json on the Hugging Face hub: hidden 2048, 128 experts, top-8,
moe_intermediate_size 768, 32 heads, 4 KV heads, head_dim 128) with 4 of its 48 layers.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def make_tokenizer(out: Path, extra_words: int = 1000):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from truepeak.bench.serve.client import PROMPT_WORDS

    words = list(dict.fromkeys([*PROMPT_WORDS, *(f"w{i}" for i in range(extra_words))]))
    vocab = {"<unk>": 0, "<eos>": 1, **{w: i + 2 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>", pad_token="<eos>")
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    fast.save_pretrained(out)
    return len(vocab)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--experts", type=int, default=128)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--expert-width", type=int, default=768)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--max-positions", type=int, default=4096)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="bfloat16")
    a = ap.parse_args()
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    t0 = time.time()
    out = Path(a.out)
    n_vocab = make_tokenizer(out)
    vocab = -(-n_vocab // 64) * 64
    cfg = Qwen3MoeConfig(vocab_size=vocab, hidden_size=a.hidden, intermediate_size=4 * a.hidden,
                         moe_intermediate_size=a.expert_width, num_hidden_layers=a.layers,
                         num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, head_dim=a.head_dim,
                         num_experts=a.experts, num_experts_per_tok=a.top_k, max_position_embeddings=a.max_positions,
                         eos_token_id=1, pad_token_id=1, bos_token_id=None, decoder_sparse_step=1,
                         norm_topk_prob=True, tie_word_embeddings=False)
    torch.manual_seed(0)
    dtype = getattr(torch, a.dtype)
    with torch.device(a.device):
        model = Qwen3MoeForCausalLM(cfg).to(dtype)
    model.save_pretrained(out)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {out}: {n / 1e9:.2f} B parameters ({a.dtype}), vocab {vocab}, in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
