#!/usr/bin/env bash
# DOC: 002_12  seed 002_3d4172fa63b4c7ce.txt lines 276-285, under "FileNotFoundError: Config file not found"
# SUBST-IMPORT: python3 utils/model_inspector.py => nbinspect inspect
# EXPECT-OUT: model type PMTDit :: PMTDit
# EXPECT-OUT: configuration shown: architecture dit :: (?i)architecture\W+dit\b
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
# placeholders: the GENESIS project the document's commands run in (configs, checkpoints,
# tasks, the model code) under a fresh $HOME; see fixtures/genesis/make_genesis.py
"$SNIPPET_PY" "$FIXTURES/genesis/make_genesis.py" "$HOME/GENESIS/GENESIS-main/GENESIS" || exit 3
cd /
# ---- document block (as written; only the substitutions above) ----
# 현재 디렉토리 확인
pwd

# GENESIS 루트로 이동
cd ~/GENESIS/GENESIS-main/GENESIS

# 다시 실행
nbinspect inspect --config configs/default.yaml
# ---- end of document block ----
exit "${FAILED:-0}"
