#!/usr/bin/env bash
# DOC: 002_02  seed 002_3d4172fa63b4c7ce.txt lines 40-48, under "3. 서버에서 사용"
# SUBST-IMPORT: python3 utils/model_inspector.py => nbinspect inspect
# EXPECT-OUT: model type PMTDit :: PMTDit
# EXPECT-OUT: configuration shown: architecture dit :: (?i)architecture\W+dit\b
# EXPECT-OUT: configuration shown: sequence length 5160 :: (?i)seq\w*\W+5160\b
# EXPECT-OUT: total parameters :: (?i)(total )?param\w*\W+[\d,]{3,}
# EXPECT-OUT: trainable parameters :: (?i)trainable\w*\W+[\d,]{3,}
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
# placeholders: the GENESIS project the document's commands run in (configs, checkpoints,
# tasks, the model code) under a fresh $HOME; see fixtures/genesis/make_genesis.py
"$SNIPPET_PY" "$FIXTURES/genesis/make_genesis.py" "$HOME/GENESIS/GENESIS-main/GENESIS" || exit 3
# (the document's block does the cd)
# ---- document block (as written; only the substitutions above) ----
cd ~/GENESIS/GENESIS-main/GENESIS

# Task 폴더의 checkpoint 검사
nbinspect inspect --checkpoint tasks/251012-1/checkpoints/icecube_diffusion_default_best.pt

# Config 검사
nbinspect inspect --config tasks/251012-1/config.yaml
# ---- end of document block ----
exit "${FAILED:-0}"
