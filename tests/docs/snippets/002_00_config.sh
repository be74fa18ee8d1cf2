#!/usr/bin/env bash
# DOC: 002_00  seed 002_3d4172fa63b4c7ce.txt lines 17-26, under "1. Config 파일로 검사"
# SUBST-IMPORT: python3 utils/model_inspector.py => nbinspect inspect
# EXPECT-OUT: model type PMTDit :: PMTDit
# EXPECT-OUT: configuration shown: architecture dit :: (?i)architecture\W+dit\b
# EXPECT-OUT: configuration shown: sequence length 5160 :: (?i)seq\w*\W+5160\b
# EXPECT-OUT: configuration shown: hidden 16 :: (?i)hidden\w*\W+16\b
# EXPECT-OUT: configuration shown: depth 3 :: (?i)depth\w*\W+3\b
# EXPECT-OUT: configuration shown: heads 8 :: (?i)heads\W+8\b
# EXPECT-OUT: configuration shown: mlp_ratio 4.0 :: (?i)mlp.ratio\W+4\.0\b
# EXPECT-OUT: configuration shown: fusion SUM :: (?i)fusion\w*\W+SUM\b
# EXPECT-OUT: total parameters :: (?i)(total )?param\w*\W+[\d,]{3,}
# EXPECT-OUT: trainable parameters :: (?i)trainable\w*\W+[\d,]{3,}
# EXPECT-OUT: model size :: (?i)(model size|param\w*).*\d (KiB|MiB|MB|KB)
# EXPECT-OUT: parameters by module type: Linear with its share (after its module count) :: (?m)^\W*Linear\W+([\d,]+\W+)?[\d,]+\W+[\d.]+\s*%
# EXPECT-OUT: parameters by module type: LayerNorm :: (?m)^\W*LayerNorm\W+[\d,]+
# EXPECT-OUT: parameters by module type: Embedding :: (?m)^\W*Embedding\W+[\d,]+
# EXPECT-OUT: memory: parameters :: (?im)^\W*param\w*\W.*\d
# EXPECT-OUT: memory: gradients :: (?im)^\W*gradients?\W.*\d
# EXPECT-OUT: memory: optimizer states :: (?im)^\W*optimizer\w*\W.*\d
# EXPECT-OUT: memory: total :: (?im)^\W*total\w*\W.*\d
# EXPECT-OUT: --verbose lists every module :: blocks\.2\.mlp\.3
# EXPECT-OUT: memory estimate for batch_size=1024 :: (?i)batch\D{0,20}1,?024
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
# placeholders: the GENESIS project the document's commands run in (configs, checkpoints,
# tasks, the model code) under a fresh $HOME; see fixtures/genesis/make_genesis.py
"$SNIPPET_PY" "$FIXTURES/genesis/make_genesis.py" "$HOME/GENESIS/GENESIS-main/GENESIS" || exit 3
cd "$HOME/GENESIS/GENESIS-main/GENESIS"
# ---- document block (as written; only the substitutions above) ----
# 기본 사용
nbinspect inspect --config configs/default.yaml

# 상세 모드 (모든 모듈 표시)
nbinspect inspect --config configs/default.yaml --verbose

# 커스텀 배치 크기로 메모리 추정
nbinspect inspect --config configs/default.yaml --batch-size 1024
# ---- end of document block ----
exit "${FAILED:-0}"
