#!/usr/bin/env bash
# DOC: 000_15  seed 000_63878d1cb7f4f056.txt lines 293-295, under "Issue: "Matplotlib not available" warning"
# EXPECT-OUT: already installed :: Requirement already satisfied: matplotlib
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
# the environment is nbinspect's venv (matplotlib is a dependency): pip finds it installed, no download
# ---- document block (as written; only the substitutions above) ----
pip install matplotlib
# ---- end of document block ----
exit "${FAILED:-0}"
