#!/usr/bin/env bash
# DOC: 002_09  seed 002_3d4172fa63b4c7ce.txt lines 229-232, under "4. 디버깅"
# SUBST-IMPORT: python3 utils/model_inspector.py => nbinspect inspect
# EXPECT-OUT: model type PMTDit :: PMTDit
# EXPECT-OUT: configuration shown: architecture dit :: (?i)architecture\W+dit\b
# EXPECT-OUT: configuration shown: sequence length 5160 :: (?i)seq\w*\W+5160\b
# EXPECT-OUT: configuration shown: hidden 16 :: (?i)hidden\w*\W+16\b
# EXPECT-OUT: configuration shown: depth 3 :: (?i)depth\w*\W+3\b
# EXPECT-OUT: configuration shown: heads 8 :: (?i)heads\W+8\b
# EXPECT-OUT: configuration shown: mlp_ratio 4.0 :: (?i)mlp.ratio\W+4\.0\b
# EXPECT-OUT: configuration shown: fusion SUM :: (?i)fusion\w*\W+SUM\b
# EXPECT-OUT: every module listed :: blocks\.2\.mlp\.3
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
# placeholders: the GENESIS project the document's commands run in (configs, checkpoints,
# tasks, the model code) under a fresh $HOME; see fixtures/genesis/make_genesis.py
"$SNIPPET_PY" "$FIXTURES/genesis/make_genesis.py" "$HOME/GENESIS/GENESIS-main/GENESIS" || exit 3
cd "$HOME/GENESIS/GENESIS-main/GENESIS"
# ---- document block (as written; only the substitutions above) ----
# 상세 모드로 모든 레이어 확인
nbinspect inspect --config configs/default.yaml --verbose
# ---- end of document block ----
exit "${FAILED:-0}"
