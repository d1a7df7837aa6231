#!/usr/bin/env bash
# Quick-start command 2: installs what is missing, builds, and runs the whole test suite.
# Extra arguments go to ctest (e.g. -R SaveRestore).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GRANARY_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
cd "$build_dir"
ctest --output-on-failure -j"${GRANARY_JOBS:-2}" --timeout 600 "$@"
