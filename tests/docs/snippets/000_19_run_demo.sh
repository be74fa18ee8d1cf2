#!/usr/bin/env bash
# DOC: 000_19  seed 000_63878d1cb7f4f056.txt lines 323-325, under "Testing"
# SUBST-IMPORT: python examples/demo_model_info.py => nbinspect demo
# EXPECT-OUT: a summary of the demo model :: (?i)parameters
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- document block (as written; only the substitutions above) ----
nbinspect demo
# ---- end of document block ----
exit "${FAILED:-0}"
