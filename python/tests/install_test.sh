#!/usr/bin/env bash
# `cmake --install BUILD --component python` into a scratch DESTDIR, then imports granary from
# there — with the build tree out of reach — and runs a pipeline: the installed extension finds
# its libraries by its RUNPATH.
#
#   install_test.sh BUILD_DIR PYTHON SITE_PACKAGES_DIR
set -euo pipefail
build="$1" python="$2" site="$3"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
DESTDIR="$scratch" cmake --install "$build" --component python >/dev/null
test -f "$scratch$site/granary/__init__.py"
test -f "$scratch$site/granary/torch.py"
cd "$scratch"
env -u LD_LIBRARY_PATH PYTHONPATH="$scratch$site" PYTHONDONTWRITEBYTECODE=1 "$python" -c '
import sys, granary
assert granary.__file__.startswith(sys.argv[1]), granary.__file__
rows = sum(len(v) for (v,) in granary.local(granary.Dataset.range(100).batch(7)))
assert rows == 100, rows
print("installed granary at", granary.__file__, "ran", rows, "rows")
' "$scratch"
