#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds Granary into ./build (or
# $GRANARY_BUILD_DIR). Incremental: reruns only what changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GRANARY_BUILD_DIR:-$root/build}
"$root/scripts/setup_deps.sh"
mkdir -p "$build_dir"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log"; exit 1; }
cmake --build "$build_dir" -j"${GRANARY_JOBS:-2}"
