#!/usr/bin/env bash
# (an extra check of an issue-26 point; not a document block)
# EXPECT-OUT: an inputs row per input: x_sig :: (?im)^\W*(inputs?\W+)?x_sig\W.*\d
# EXPECT-OUT: an inputs row per input: geom :: (?im)^\W*(inputs?\W+)?geom\W.*\d
# EXPECT-OUT: an inputs row per input: label :: (?im)^\W*(inputs?\W+)?label\W.*\d
# EXPECT-OUT: x_sig (512, 2, 5160) float32 = 21,135,360 B, 20.16 MiB (the document's Input Data) :: x_sig\W.*(20\.16 MiB|21,135,360\b)
# EXPECT-OUT: geom (512, 3, 5160) float32 = 31,703,040 B, 30.23 MiB (the document says 30.24 MB) :: geom\W.*(30\.23 MiB|31,703,040\b)
# EXPECT-OUT: activations measured :: (?im)^\W*activations\W+[\d.]+ [KMGT]iB
# EXPECT-OUT: precision stated with what is stored in which dtype :: (?i)fp32.*(master|stored)|(stored|kept).*fp32
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
# placeholders: the GENESIS project the document's commands run in (configs, checkpoints,
# tasks, the model code) under a fresh $HOME; see fixtures/genesis/make_genesis.py
"$SNIPPET_PY" "$FIXTURES/genesis/make_genesis.py" "$HOME/GENESIS/GENESIS-main/GENESIS" || exit 3
cd "$HOME/GENESIS/GENESIS-main/GENESIS"
# ---- checks (not in the document) ----
# Not a document block: the document's four inputs (x_sig, t, label, geom) traced from the
# command line, and the memory plan in mixed precision (its "With Mixed Precision (AMP)").
nbinspect inspect --config configs/default.yaml --batch-size 512 \
    --input x_sig=512,2,5160 --input t=512:int64 --input label=512,6 --input geom=512,3,5160 \
    --precision amp-bf16
exit "${FAILED:-0}"
