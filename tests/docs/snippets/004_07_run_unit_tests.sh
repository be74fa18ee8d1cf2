#!/usr/bin/env bash
# DOC: 004_07  seed 004_28c1a5dc4a9ee1ee.txt lines 264-266, under "Testing"
# SUBST-IMPORT: pytest tests/unit/trainer/analysis/ -v => python -m pytest -p no:cacheprovider "$(ls tests/test_track.py tests/*/test_track.py 2>/dev/null | head -1)" -v
# REPO-TEST
trap 'echo "FAILED($?): $BASH_COMMAND" >&2; FAILED=1' ERR
# ---- placeholders (not in the document) ----
cd /work/main  # nbinspect's tests for nbinspect.track
# ---- document block (as written; only the substitutions above) ----
python -m pytest -p no:cacheprovider "$(ls tests/test_track.py tests/*/test_track.py 2>/dev/null | head -1)" -v
# ---- end of document block ----
exit "${FAILED:-0}"
