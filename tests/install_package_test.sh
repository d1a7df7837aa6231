#!/bin/sh
# The client library as an installed CMake package (DESIGN.md §7): installs the granary_client
# component into a temporary prefix, builds examples/trainer out of tree against it with
# find_package(granary), and checks that the trainer uses the installed libraries, prints its
# usage, fails clearly without a dispatcher, and, given a granary binary, reads two epochs from a
# real local cluster.
#
# usage: install_package_test.sh BUILD_DIR SOURCE_DIR [GRANARY_BINARY]
set -eu
build=$1
source=$2
granary=${3:-}
tmp=$(mktemp -d)
cluster_pid=
cleanup() {
  if [ -n "$cluster_pid" ]; then kill -TERM "$cluster_pid" 2>/dev/null || true; wait "$cluster_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "install_package_test: $*" >&2; exit 1; }
run_logged() {  # run_logged LOG COMMAND...: runs it, shows the log if it fails
  log=$1; shift
  "$@" > "$log" 2>&1 || { cat "$log" >&2; fail "failed: $*"; }
}

prefix=$tmp/prefix
run_logged "$tmp/install.log" cmake --install "$build" --component granary_client --prefix "$prefix"
[ -f "$prefix/include/granary/client.h" ] || fail "client.h not installed"
[ -f "$prefix/include/proto/pipeline.pb.h" ] || fail "pipeline.pb.h not installed"
if grep -rl "$build" "$prefix/lib/cmake/granary" > /dev/null; then
  fail "installed CMake files refer to the build tree $build"
fi

run_logged "$tmp/configure.log" cmake -S "$source/examples/trainer" -B "$tmp/trainer" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release
run_logged "$tmp/build.log" cmake --build "$tmp/trainer" -j2
trainer=$tmp/trainer/granary_trainer
[ -x "$trainer" ] || fail "no trainer binary"
ldd "$trainer" | grep "libgranary_client" | grep -q "$prefix" ||
  fail "trainer does not link the installed libgranary_client: $(ldd "$trainer" | grep granary)"

"$trainer" --help | grep -q "usage: granary_trainer" || fail "--help prints no usage"
if "$trainer" --dispatcher 127.0.0.1:1 --rpc_timeout_ms 300 --insecure > "$tmp/nothing.log" 2>&1; then
  fail "trainer succeeded without a dispatcher"
fi
grep -q "dispatcher 127.0.0.1:1 is not reachable" "$tmp/nothing.log" ||
  fail "unclear error without a dispatcher: $(cat "$tmp/nothing.log")"

if [ -n "$granary" ]; then
  "$granary" cluster --workers 1 --port 0 --dir "$tmp/cluster" --insecure > "$tmp/cluster.out" 2> "$tmp/cluster.err" &
  cluster_pid=$!
  for _ in $(seq 300); do
    grep -q "cluster ready" "$tmp/cluster.out" && break
    sleep 0.1
  done
  grep -q "cluster ready" "$tmp/cluster.out" || fail "cluster did not start: $(cat "$tmp/cluster.err")"
  address=$(awk '$1 == "dispatcher" { print $2 }' "$tmp/cluster.out")
  run_logged "$tmp/train.log" "$trainer" --dispatcher "$address" --epochs 2 --insecure
  grep -q "epoch 1: 32 batches, 1000 rows" "$tmp/train.log" ||
    fail "unexpected trainer output: $(cat "$tmp/train.log")"
fi
echo "install_package_test: OK"
