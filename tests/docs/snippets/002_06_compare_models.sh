#!/usr/bin/env bash
# DOC: 002_06  seed 002_3d4172fa63b4c7ce.txt lines 203-209, under "1. 모델 비교"
# SUBST-IMPORT: python3 utils/model_inspector.py => nbinspect inspect
# EXPECT-OUT: two summaries :: (?s)PMTDit.*PMTDit
# EXPECT-OUT: the small model: depth 2 :: (?i)depth\w*\W+2\b
# EXPECT-OUT: the large model: hidden 64 :: (?i)hidden\w*\W+64\b
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
# placeholders: the GENESIS project the document's commands run in (configs, checkpoints,
# tasks, the model code) under a fresh $HOME; see fixtures/genesis/make_genesis.py
"$SNIPPET_PY" "$FIXTURES/genesis/make_genesis.py" "$HOME/GENESIS/GENESIS-main/GENESIS" || exit 3
cd "$HOME/GENESIS/GENESIS-main/GENESIS"
# ---- document block (as written; only the substitutions above) ----
# Small model
nbinspect inspect --config configs/small_model.yaml

# Large model
nbinspect inspect --config configs/large_model.yaml
# ---- end of document block ----
exit "${FAILED:-0}"
