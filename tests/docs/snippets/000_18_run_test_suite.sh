#!/usr/bin/env bash
# DOC: 000_18  seed 000_63878d1cb7f4f056.txt lines 318-320, under "Testing"
# SUBST-IMPORT: python tests/test_model_info.py => python -m pytest -q -p no:cacheprovider "$(ls tests/test_model_info.py tests/*/test_model_info.py 2>/dev/null | head -1)"
# REPO-TEST
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
# the document's own test file is its repository's; nbinspect's is tests/**/test_model_info.py
cd "$NBINSPECT_REPO" 2>/dev/null || cd /work/main
# ---- document block (as written; only the substitutions above) ----
python -m pytest -q -p no:cacheprovider "$(ls tests/test_model_info.py tests/*/test_model_info.py 2>/dev/null | head -1)"
# ---- end of document block ----
exit "${FAILED:-0}"
