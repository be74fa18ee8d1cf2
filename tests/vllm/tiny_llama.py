"""A tiny random-weight Llama saved like a hub folder (config, safetensors, tokenizer), no download."""

from __future__ import annotations

from pathlib import Path

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "ran",
    "on",
    "under",
    "mat",
    "rug",
    "and",
    "then",
    "slept",
    "ate",
    "fish",
    "bird",
    "big",
    "small",
    "red",
    "blue",
]
SPECIAL = ["<unk>", "<s>", "</s>"]
VOCAB = 64  # the tokenizer knows every id the model can generate
HIDDEN, HEADS, KV_HEADS, LAYERS, INTERMEDIATE = 128, 2, 1, 2, 256  # head_dim 64: the CPU kernel rejects 16


def save_tiny_llama(folder: Path) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = SPECIAL + WORDS + [f"w{i}" for i in range(VOCAB - len(SPECIAL) - len(WORDS))]
    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    fast.save_pretrained(folder)
    return Path(folder)


KV_CACHE_BYTES = 32 << 20  # fixed, so the block count does not depend on free RAM


def engine_kwargs(folder: Path) -> dict:
    """LLM(...) arguments that run on a CPU-only machine in seconds."""
    return {
        "model": str(folder),
        "dtype": "float32",
        "enforce_eager": True,
        "max_model_len": 128,
        "kv_cache_memory_bytes": KV_CACHE_BYTES,
    }


def kv_block_bytes(block_size: int) -> int:
    """Bytes of one KV-cache block, by hand: K and V, every layer, float32."""
    return 2 * LAYERS * block_size * KV_HEADS * (HIDDEN // HEADS) * 4
