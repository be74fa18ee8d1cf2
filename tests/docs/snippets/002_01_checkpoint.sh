#!/usr/bin/env bash
# DOC: 002_01  seed 002_3d4172fa63b4c7ce.txt lines 30-36, under "2. Checkpoint 파일로 검사"
# SUBST-IMPORT: python3 utils/model_inspector.py => nbinspect inspect
# EXPECT-OUT: model type PMTDit :: PMTDit
# EXPECT-OUT: configuration shown: architecture dit :: (?i)architecture\W+dit\b
# EXPECT-OUT: configuration shown: sequence length 5160 :: (?i)seq\w*\W+5160\b
# EXPECT-OUT: configuration shown: hidden 16 :: (?i)hidden\w*\W+16\b
# EXPECT-OUT: configuration shown: depth 3 :: (?i)depth\w*\W+3\b
# EXPECT-OUT: configuration shown: heads 8 :: (?i)heads\W+8\b
# EXPECT-OUT: configuration shown: mlp_ratio 4.0 :: (?i)mlp.ratio\W+4\.0\b
# EXPECT-OUT: configuration shown: fusion SUM :: (?i)fusion\w*\W+SUM\b
# EXPECT-OUT: normalisation metadata: time transform ln :: (?i)time.transform\W+ln\b
# EXPECT-OUT: normalisation metadata: affine offsets in full :: (?i)affine.offsets\W+[\[\(]0\.0, 0\.0, -600\.0, -550\.0, -550\.0[\]\)]
# EXPECT-OUT: normalisation metadata: label scales in full :: (?i)label.scales\W+[\[\(]100000000\.0, 3\.14159, 6\.28318, 1200\.0, 1100\.0, 1100\.0[\]\)]
# EXPECT-OUT: trainable count excludes the freqs buffer (23,970 of 24,034 tensors' elements) :: (?i)trainable\W+23,970\b
# EXPECT-OUT: the buffer is a buffer :: (?i)buffers?\W+64\b
# EXPECT-OUT: --verbose lists every tensor :: blocks\.2\.mlp\.3\.bias
# EXPECT-ABSENT: configuration not cut off :: 'archit\.\.\.|\.\.\.\s*$
# EXPECT-ABSENT: normalisation not summarised away :: dict of \d+ entries
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
# placeholders: the GENESIS project the document's commands run in (configs, checkpoints,
# tasks, the model code) under a fresh $HOME; see fixtures/genesis/make_genesis.py
"$SNIPPET_PY" "$FIXTURES/genesis/make_genesis.py" "$HOME/GENESIS/GENESIS-main/GENESIS" || exit 3
cd "$HOME/GENESIS/GENESIS-main/GENESIS"
# ---- document block (as written; only the substitutions above) ----
# Best model 검사
nbinspect inspect --checkpoint checkpoints/icecube_diffusion_default_best.pt

# 특정 epoch checkpoint 검사
nbinspect inspect --checkpoint checkpoints/icecube_diffusion_default_epoch_0010.pt --verbose
# ---- end of document block ----
exit "${FAILED:-0}"
