#!/usr/bin/env bash
# Python quick start, step 1: installs the missing Debian packages, makes a virtualenv that sees
# Debian's numpy and torch (--system-site-packages), and pip-installs Granary into it from this
# checkout — offline: setuptools and wheel are Debian's (--no-build-isolation), and setup.py
# builds with the project's CMake. The virtualenv then has the `granary` package and command.
#
#   scripts/pip_install.sh [VENV]      (default: ./venv in the checkout)
#
# GRANARY_BUILD_DIR and GRANARY_JOBS choose the CMake build directory and its jobs (setup.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$root/venv}
"$root/scripts/setup_deps.sh"
if [[ ! -x "$venv/bin/python" ]]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
GRANARY_SKIP_APT=1 "$venv/bin/pip" install --no-build-isolation --no-index "$root"
echo "granary is installed in $venv: $venv/bin/granary, and 'import granary' in $venv/bin/python"
