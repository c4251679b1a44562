#!/usr/bin/env bash
# The upstream [NodeConformance] run (conformance/run.py): tox -e conformance calls it.
# Arguments go to run.py: --specs FILE (a subset), --results FILE, --report-dir DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" -m conformance.run "$@"
