#!/bin/bash
# An index built by an older commit ("release"), then read and ingested again by this code.
#   git worktree add /work/wt/upgrade-old-RELEASE RELEASE
#   bench/upgrade/drive.sh RELEASE offline|openai /ABSOLUTE/SOURCES [OUT_ROOT]
# openai = the scripted server of tests/scripted_server.py; per release and mode a fresh
# PREFECT_HOME and PROPDEX_ONNX_DIR, shared by the old and the new runs.
R=$1; M=$2; SRC=$3; ROOT=${4:-/tmp/upg/run}; D=$ROOT/$R-$M; rm -rf $D; mkdir -p $D
HERE=$(cd "$(dirname "$0")" && pwd); NEW=$(cd "$HERE/../.." && pwd)
export PREFECT_HOME=$D/prefect PROPDEX_ONNX_DIR=$D/onnx PREFECT_SERVER_ANALYTICS_ENABLED=false PREFECT_LOGGING_LEVEL=WARNING
unset PROPDEX_LLM_BASE_URL PROPDEX_LLM_API_KEY PROPDEX_DB
PY=/work/venv/bin/python
if [ $M = openai ]; then W="$PY $HERE/served.py"; else W="$PY $HERE/plain.py"; fi
OLD=${OLD_ROOT:-/work/wt/upgrade-old-}$R  # the release's worktree
cd "$D"
PYTHONPATH=$OLD timeout 900 $W $D/1-old-ingest.json $PY -m propdex.cli ingest "$SRC" --db $D/db --json
cp -a $D/db $D/db-old-snapshot
PYTHONPATH=$NEW timeout 300 $W $D/2-new-search.json $PY -m propdex.cli search "What are the levels of AGI?" --db $D/db --json -k 3
PYTHONPATH=$NEW timeout 300 $W $D/3-new-status.json $PY -m propdex.cli status --db $D/db
PYTHONPATH=$NEW timeout 900 $W $D/4-new-ingest.json $PY -m propdex.cli ingest "$SRC" --db $D/db --json
PYTHONPATH=$NEW timeout 600 $W $D/5-new-ingest2.json $PY -m propdex.cli ingest "$SRC" --db $D/db --json
PYTHONPATH=$NEW timeout 300 $W $D/6-new-search.json $PY -m propdex.cli search "What are the levels of AGI?" --db $D/db --json -k 3
