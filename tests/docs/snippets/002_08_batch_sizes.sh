#!/usr/bin/env bash
# DOC: 002_08  seed 002_3d4172fa63b4c7ce.txt lines 220-225, under "3. 메모리 최적화"
# SUBST-IMPORT: python3 utils/model_inspector.py => nbinspect inspect
# EXPECT-OUT: memory: parameters :: (?im)^\W*param\w*\W.*\d
# EXPECT-OUT: memory: gradients :: (?im)^\W*gradients?\W.*\d
# EXPECT-OUT: memory: optimizer states :: (?im)^\W*optimizer\w*\W.*\d
# EXPECT-OUT: memory: total :: (?im)^\W*total\w*\W.*\d
# EXPECT-OUT: memory estimate for batch_size=256 :: (?i)batch\D{0,20}256
# EXPECT-OUT: memory estimate for batch_size=512 :: (?i)batch\D{0,20}512
# EXPECT-OUT: memory estimate for batch_size=1024 :: (?i)batch\D{0,20}1,?024
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
# placeholders: the GENESIS project the document's commands run in (configs, checkpoints,
# tasks, the model code) under a fresh $HOME; see fixtures/genesis/make_genesis.py
"$SNIPPET_PY" "$FIXTURES/genesis/make_genesis.py" "$HOME/GENESIS/GENESIS-main/GENESIS" || exit 3
cd "$HOME/GENESIS/GENESIS-main/GENESIS"
# ---- document block (as written; only the substitutions above) ----
# 다양한 배치 크기로 메모리 사용량 확인
nbinspect inspect --config configs/default.yaml --batch-size 256
nbinspect inspect --config configs/default.yaml --batch-size 512
nbinspect inspect --config configs/default.yaml --batch-size 1024
# ---- end of document block ----
exit "${FAILED:-0}"
