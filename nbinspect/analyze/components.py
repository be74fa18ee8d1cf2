"""Which part of a network a tensor belongs to, read from its dotted name.

Covers the naming schemes of the common transformer families (GPT-2, Llama/Mistral,
BERT, T5, Falcon/GPT-NeoX, nn.MultiheadAttention, nanoGPT-style) and plain CNNs: attention
q/k/v/o projections, fused qkv, MLP gate/up/down, embeddings, norms, the output head, and
the layer index (the first numeric part of the path). Names it cannot place are "other".
"""

from __future__ import annotations

__all__ = ["COMPONENTS", "component", "layer_index"]

COMPONENTS = (
    "embedding", "attn.q", "attn.k", "attn.v", "attn.o", "attn.qkv", "attn",
    "mlp.gate", "mlp.up", "mlp.down", "mlp", "norm", "head", "other",
)  # fmt: skip

_EXACT = {
    "attn.q": {"q_proj", "q", "query", "wq", "q_lin"},
    "attn.k": {"k_proj", "k", "key", "wk", "k_lin"},
    "attn.v": {"v_proj", "v", "value", "wv", "v_lin"},
    "attn.o": {"o_proj", "out_proj", "o", "out_lin"},
    "attn.qkv": {"qkv", "qkv_proj", "c_attn", "query_key_value", "wqkv", "in_proj", "in_proj_weight", "in_proj_bias"},
    "mlp.gate": {"gate_proj", "w1", "gate", "wi_0"},
    "mlp.up": {"up_proj", "w3", "c_fc", "fc1", "wi", "wi_1", "dense_h_to_4h", "fc_in"},
    "mlp.down": {"down_proj", "w2", "fc2", "dense_4h_to_h", "fc_out"},
    "embedding": {
        "wte", "wpe", "embed_tokens", "embed_positions", "tok_emb", "pos_emb", "embeddings", "word_embeddings",
        "position_embeddings", "token_type_embeddings", "embed_in", "shared", "embedding",
    },
    "head": {"lm_head", "head", "classifier", "score", "embed_out", "fc_head"},
}  # fmt: skip
_ATTN_SCOPE = {"attn", "attention", "self_attn", "selfattention", "self_attention", "crossattention", "encdecattention"}
_MLP_SCOPE = {"mlp", "ffn", "feed_forward", "feedforward", "densereludense", "intermediate", "output"}
_OUTPUT_OF = {"dense", "proj", "c_proj", "wo", "out", "output"}  # the projection back to the model width


def _is_norm(part: str) -> bool:
    return "norm" in part or part in {"ln", "bn"} or (part.startswith(("ln_", "bn")) and part[2:].lstrip("_").isalnum())


def layer_index(name: str) -> int | None:
    """The first numeric part of the path: 'model.layers.12.mlp.up_proj.weight' -> 12."""
    return next((int(p) for p in name.split(".") if p.isdigit()), None)


def component(name: str) -> str:
    """One of COMPONENTS for the tensor at dotted path `name`."""
    parts = [p.lower() for p in name.split(".")]
    leaf, modules = parts[-1], parts[:-1]
    if leaf in _EXACT["attn.qkv"]:
        return "attn.qkv"
    for i in range(len(modules) - 1, -1, -1):
        part, scope = modules[i], set(modules[:i])
        if part.isdigit():
            continue
        for label, names in _EXACT.items():
            if part in names and not (label == "embedding" and scope & (_ATTN_SCOPE | _MLP_SCOPE)):
                return label
        if _is_norm(part):
            return "norm"
        if "emb" in part:
            return "embedding"
        if part in _OUTPUT_OF and scope & _ATTN_SCOPE and not (part == "output" and "intermediate" in scope):
            return "attn.o"
        if part in _OUTPUT_OF | {"dense"} and scope & _MLP_SCOPE:
            return "mlp.down" if part != "dense" or "output" in scope else "mlp.up"
        if part in _ATTN_SCOPE:
            return "attn"
        if part in _MLP_SCOPE:
            return "mlp"
    return "other"
