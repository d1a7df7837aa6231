#!/usr/bin/env bash
# The benchmark suite: installs what is missing, builds, runs every benchmark under bench/ on
# generated datasets (each prints its table), writes <out>/<name>.json with the machine described
# and <out>/<name>.png plots (Debian's python3-matplotlib), and checks the files are well-formed.
#
#   scripts/bench.sh [--quick] [--out DIR] [--no-build] [--build_dir DIR]
#
# --out defaults to bench/results. --quick: tiny sizes and one repetition, to check the suite
# runs (the test suite does this); without --out its files go to a temporary directory that is
# removed afterwards. A full run takes about 45 minutes on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GRANARY_BUILD_DIR:-$root/build}
quick=()
out=""
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=(--quick) ;;
    --out) out="$2"; shift ;;
    --no-build) build=0 ;;
    --build_dir) build_dir="$2"; shift ;;
    *) echo "scripts/bench.sh: unknown argument '$1' (see the header of this script)" >&2; exit 2 ;;
  esac
  shift
done

if [[ $build == 1 ]]; then
  "$root/scripts/build.sh"
fi
scratch=$(mktemp -d /tmp/granary_bench.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
if [[ -z "$out" ]]; then
  out=$([[ ${#quick[@]} -gt 0 ]] && echo "$scratch/results" || echo "$root/bench/results")
fi
mkdir -p "$out"

# The benchmarks read examples/ and bench/pytorch_peer.py relative to the repository.
cd "$root"
# benchmark binary -> the result files it writes.
benchmarks=(
  "pipeline_throughput:pipeline_throughput"
  "decode_crop_bench:decode_crop"
  "auto_order_bench:auto_order"
  "autotune_bench:autotune"
  "service_bench:service"
  "sharding_bench:sharding"
  "transport_bench:transport"
  "peer_bench:peer memory"
  "remote_bench:remote"
  "scaling_bench:scaling"
  "checkpoint_bench:checkpoint"
  "recovery_bench:recovery"
  "dispatcher_restart_bench:dispatcher_restart"
  "dispatcher_age_bench:dispatcher_age"
  "journal_bench:journal"
  "replicated_journal_bench:replicated_journal"
  "failover_bench:failover"
  "cache_bench:cache"
  "autocache_bench:autocache"
  "failpoint_bench:failpoint"
  "chunk_mac_bench:chunk_mac"
  "policy_bench:policy"
  "policy_cluster_bench:policy_cluster"
)
results=()
for entry in "${benchmarks[@]}"; do
  binary=${entry%%:*}
  read -r -a names <<< "${entry#*:}"
  results+=("${names[@]}")
  flags=("${quick[@]}" --json_dir "$out")
  if [[ $binary != failpoint_bench && $binary != chunk_mac_bench && $binary != policy_bench ]]; then
    flags+=(--dir "$scratch/$binary")
  fi
  if [[ $binary == peer_bench ]]; then
    flags+=(--python_path "$build_dir/python")  # the granary package, for its Python row
  fi
  echo "== $binary ${flags[*]}"
  start=$SECONDS
  "$build_dir/bench/$binary" "${flags[@]}" 2> "$scratch/$binary.log" ||
    { cat "$scratch/$binary.log" >&2; echo "scripts/bench.sh: $binary failed" >&2; exit 1; }
  echo "   ($((SECONDS - start)) s)"
done

/usr/bin/python3 "$root/bench/plot.py" "$out"
/usr/bin/python3 "$root/bench/check_results.py" "$out" "${results[@]}"
echo "results: $out"
