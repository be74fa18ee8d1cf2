#!/usr/bin/env bash
# DOC: 002_10  seed 002_3d4172fa63b4c7ce.txt lines 250-259, under "예시 출력 저장"
# SUBST-IMPORT: python3 utils/model_inspector.py => nbinspect inspect
# EXPECT-FILE: model_info.txt has the summary :: GENESIS/GENESIS-main/GENESIS/model_info.txt :: PMTDit
# EXPECT-FILE: model_detailed.txt lists every module :: GENESIS/GENESIS-main/GENESIS/model_detailed.txt :: blocks\.2\.mlp\.3
# EXPECT-FILE: checkpoint_info.txt has the checkpoint's config :: GENESIS/GENESIS-main/GENESIS/checkpoint_info.txt :: (?i)mlp.ratio\W+4\.0
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
# placeholders: the GENESIS project the document's commands run in (configs, checkpoints,
# tasks, the model code) under a fresh $HOME; see fixtures/genesis/make_genesis.py
"$SNIPPET_PY" "$FIXTURES/genesis/make_genesis.py" "$HOME/GENESIS/GENESIS-main/GENESIS" || exit 3
cd "$HOME/GENESIS/GENESIS-main/GENESIS"
# ---- document block (as written; only the substitutions above) ----
# 출력을 파일로 저장
nbinspect inspect --config configs/default.yaml > model_info.txt

# 상세 정보를 파일로 저장
nbinspect inspect --config configs/default.yaml --verbose > model_detailed.txt

# Checkpoint 정보 저장
nbinspect inspect --checkpoint checkpoints/model_best.pt > checkpoint_info.txt
# ---- end of document block ----
exit "${FAILED:-0}"
