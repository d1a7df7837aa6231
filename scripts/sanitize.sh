#!/usr/bin/env bash
# Builds Granary with AddressSanitizer and UndefinedBehaviorSanitizer and runs the whole test
# suite under them (docs/verification.md, "Safety nets").
#
#   scripts/sanitize.sh [--sanitizers address,undefined] [--thread-safety] [--unit] [ctest args...]
#
# Configures build-sanitize/ (clang by default; CC/CXX override) with
# -DGRANARY_SANITIZE=<sanitizers> (and -DGRANARY_THREAD_SAFETY=ON with --thread-safety, which
# makes clang's thread-safety analysis an error), builds everything and runs ctest there; extra
# arguments go to ctest (e.g. -R pipeline). --unit builds only the unit tests and the fuzz corpus
# replays (targets unit_tests, fuzz_targets) and runs only those (ctest -L 'unit|fuzz_replay'),
# not the multi-process tests (what .ci/run does). Every sanitizer report fails its test: ASan and
# UBSan halt on the first error. LeakSanitizer's suppressions (scripts/lsan_suppressions.txt)
# name only leaks inside Debian's libraries, each with its reason. Exits with ctest's status.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GRANARY_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
sanitizers="address,undefined"
thread_safety=OFF
build_targets=(all)
ctest_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sanitizers) sanitizers="$2"; shift 2 ;;
    --thread-safety) thread_safety=ON; shift ;;
    --unit) build_targets=(unit_tests fuzz_targets); ctest_args+=(-L 'unit|fuzz_replay'); shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) ctest_args+=("$1"); shift ;;
  esac
done

CC="${CC:-clang}" CXX="${CXX:-clang++}" cmake -S "$root" -B "$build" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRANARY_SANITIZE="$sanitizers" \
  -DGRANARY_THREAD_SAFETY="$thread_safety" >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${build_targets[@]}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/scripts/lsan_suppressions.txt:print_suppressions=0}"
# Sanitized code is 2-5x slower: more time per test than ctest's default.
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 900 "${ctest_args[@]}"
