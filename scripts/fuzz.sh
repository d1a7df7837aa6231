#!/usr/bin/env bash
# Fuzzes Granary's parsers and decoders with libFuzzer (docs/verification.md, "Safety nets").
#
#   scripts/fuzz.sh [--minutes M] [--jobs J] [target...]
#
# Configures build-fuzz/ with clang and -DGRANARY_FUZZ=ON (libFuzzer + ASan + UBSan), builds the
# fuzz targets (fuzz/*_fuzzer.cc) and runs each named target (default: all) for M minutes
# (default 10), one after another. Each run starts from a copy of fuzz/corpus/<target>/ in
# build-fuzz/fuzz-runs/<target>/corpus/ (new inputs it finds go there, not into the repository;
# merge the interesting ones in with `-merge=1` by hand). A crash, leak, sanitizer report or
# timeout is saved as build-fuzz/fuzz-runs/<target>/crash-* (or leak-*, timeout-*, oom-*); the
# script lists them and exits 1 if any target found one. Reproduce one with
#   build-fuzz/fuzz/<target> <file>
# and add it to the corpus as fuzz/corpus/<target>/finding-<what> with a regression test.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GRANARY_FUZZ_BUILD_DIR:-$root/build-fuzz}"
minutes=10
jobs=1
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown flag $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in "$root"/fuzz/*_fuzzer.cc; do targets+=("$(basename "$f" .cc)"); done
fi
for t in "${targets[@]}"; do
  if [[ ! -f "$root/fuzz/$t.cc" ]]; then
    echo "fuzz.sh: no fuzz target $t (fuzz/$t.cc)" >&2
    exit 2
  fi
done

CC="${CC:-clang}" CXX="${CXX:-clang++}" cmake -S "$root" -B "$build" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRANARY_FUZZ=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/scripts/lsan_suppressions.txt}"
seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
failed=()
for t in "${targets[@]}"; do
  run="$build/fuzz-runs/$t"
  mkdir -p "$run/corpus"
  cp -n "$root/fuzz/corpus/$t/"* "$run/corpus/" 2>/dev/null || true
  echo "=== fuzzing $t for $minutes min (corpus $run/corpus)" >&2
  # -rss_limit_mb and -timeout turn unbounded memory or time on one input into findings;
  # -max_len leaves room for the JPEG and chunk seeds.
  parallel=()
  [[ "$jobs" -gt 1 ]] && parallel=(-jobs="$jobs" -workers="$jobs")
  if ! (cd "$run" && "$build/fuzz/$t" -max_total_time="$seconds" "${parallel[@]}" \
          -rss_limit_mb=2048 -timeout=25 -max_len=262144 -print_final_stats=1 \
          -artifact_prefix="$run/" "$run/corpus" 2>"$run/log.txt"); then
    failed+=("$t")
  fi
  tail -n 15 "$run/log.txt" >&2
  shopt -s nullglob
  found=("$run"/crash-* "$run"/leak-* "$run"/timeout-* "$run"/oom-*)
  shopt -u nullglob
  if [[ ${#found[@]} -gt 0 ]]; then
    echo "fuzz.sh: $t found ${#found[@]} input(s): ${found[*]}" >&2
    [[ " ${failed[*]} " == *" $t "* ]] || failed+=("$t")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: findings in: ${failed[*]} (see $build/fuzz-runs/<target>/log.txt)" >&2
  exit 1
fi
echo "fuzz.sh: no findings in ${targets[*]} ($minutes min each)" >&2
