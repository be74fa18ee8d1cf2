# DOC: 000_06  seed 000_63878d1cb7f4f056.txt lines 123-134, under "Example 1: Quick Model Inspection"
# SUBST-IMPORT: from src.utils.model_info import dump_model_info => from nbinspect import dump_model_info
# SUBST-PLACEHOLDER: ModelConfig(vocab_size=1000, hidden_size=768, ...) => ModelConfig(vocab_size=1000, hidden_size=768, num_layers=2)
# EXPECT-OUT: SUMMARY section :: SUMMARY
# EXPECT-OUT: LAYER DETAILS lists the root's cls_token :: ^.*\bcls_token\b
# EXPECT-OUT: LAYER DETAILS lists the root's pos_embed :: ^.*\bpos_embed\b
# EXPECT-OUT: LAYER DETAILS lists attn.in_proj_weight (on a non-leaf module) :: transformer\.blocks\.0\.attn\.in_proj_weight
# EXPECT-OUT: LAYER DETAILS names as the document's example :: transformer\.blocks\.0\.attn_norm\.weight
# EXPECT-OUT: WEIGHT STATISTICS section (plot_distributions defaults to True) :: WEIGHT STATISTICS
# EXPECT-FILE: default plot file model_weight_distributions.png :: model_weight_distributions.png :: 
# ---- document block (as written; only the substitutions above) ----
from nbinspect import dump_model_info
from src.models.transformer import TransformerModel
from src.config import ModelConfig

# Create model
config = ModelConfig(vocab_size=1000, hidden_size=768, num_layers=2)
model = TransformerModel(config)

# Quick inspection
dump_model_info(model)
# ---- end of document block ----
# ---- checks (not in the document) ----
import nbi_check as check
# the block discards the returned ModelInfo: ask again, quietly, to check its fields
info = dump_model_info(model, logger=__import__("logging").getLogger("quiet"), plot_distributions=False)
import dataclasses

check.attrs(info, ["total_params", "trainable_params", "non_trainable_params", "total_memory_mb", "layers", "num_layers"], "ModelInfo fields of the document")
layer_fields = ["name", "num_params", "mean"]
if info.layers:
    check.attrs(info.layers[0], layer_fields, "LayerInfo attributes the document's examples use (name, num_params, mean)")
    check.attrs(info.layers[0], ["shape", "memory_mb", "requires_grad", "std", "min", "max"], "LayerInfo carries the LAYER DETAILS / WEIGHT STATISTICS columns")
    first = info.layers[0]
    check.true(dataclasses.is_dataclass(first) and isinstance(dataclasses.asdict(first), dict), "a LayerInfo converts to a dict (dataclasses.asdict)")
    counted = [getattr(l, "num_params", None) for l in info.layers if getattr(l, "tied_to", None) is None]
    check.true(None not in counted and sum(counted) == info.total_params, "every parameter appears: layers sum to total_params", f"sum {sum(c or 0 for c in counted):,} vs total {info.total_params:,}")
check.equal(info.num_layers, len(info.layers), "num_layers == len(layers)")
names = [n for n, _ in model.named_parameters()]
listed = [getattr(l, "name", l.get("name") if isinstance(l, dict) else None) for l in info.layers]
missing = [n for n in names if n not in listed]
check.true(not missing, "every parameter has a LAYER DETAILS entry (cls_token, pos_embed, attn.in_proj_weight)", f"missing {missing[:6]}")
