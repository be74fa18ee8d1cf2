#!/usr/bin/env bash
# (an extra check of an issue-26 point; not a document block)
# EXPECT-OUT: model type PMTDit :: PMTDit
# EXPECT-OUT: configuration shown: architecture dit :: (?i)architecture\W+dit\b
# EXPECT-OUT: total parameters :: (?i)(total )?param\w*\W+[\d,]{3,}
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
# placeholders: the GENESIS project the document's commands run in (configs, checkpoints,
# tasks, the model code) under a fresh $HOME; see fixtures/genesis/make_genesis.py
"$SNIPPET_PY" "$FIXTURES/genesis/make_genesis.py" "$HOME/GENESIS/GENESIS-main/GENESIS" || exit 3
cd "$HOME/GENESIS/GENESIS-main/GENESIS"
# ---- checks (not in the document) ----
# Not a document block: a real project's config without _target_ (model settings under
# `model:` beside `data:` and `training:`), the model named on the command line; then
# the section named explicitly.
nbinspect inspect --model models.pmtdit:PMTDit --config configs/plain.yaml --batch-size 512
nbinspect inspect --model models.pmtdit:PMTDit --config configs/plain.yaml --config-key model --batch-size 512
exit "${FAILED:-0}"
