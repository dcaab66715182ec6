#!/usr/bin/env bash
# Where the build's time goes: see scripts/build_times.py for the options.
#   scripts/build_times.sh                  the last build: per part, the slowest steps
#   scripts/build_times.sh --why FILE.cpp   one file compiled again with -ftime-report
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/build_times.py "$@"
