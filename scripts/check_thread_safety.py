#!/usr/bin/env python3
"""Clang's thread-safety analysis as errors over every hand-written source file of a build.

    scripts/check_thread_safety.py [BUILD_DIR] [--except-built-in CLANG_BUILD_DIR]
                                                     (default: build)

Reads BUILD_DIR/compile_commands.json (the build exports it), runs `clang++ -fsyntax-only
-Wthread-safety -Werror=thread-safety` with each file's own flags, two at a time, and fails
naming every file whose ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED contracts do not hold
(or that clang cannot compile). Generated protobuf code is skipped. No code is generated; every
file costs about 15 minutes on CI's 2 cores (446 files).

--except-built-in CLANG_BUILD_DIR skips the files whose object that build has compiled, when it
was configured with -DGRANARY_THREAD_SAFETY=ON (clang compiled them with the same analysis as
errors, so a finding would already have failed it): after `scripts/sanitize.sh --thread-safety
--unit`, what is left is the ~50 files of the process tests, benchmarks and examples (~2 minutes).
Only run it after that build is complete: an object older than its sources would hide them.
"""
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys


def clang_command(entry):
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    flags, skip = [], False
    for arg in args[1:]:
        if skip:
            skip = False
        elif arg == "-o":
            skip = True
        elif arg != "-c" and arg != entry["file"]:
            flags.append(arg)
    return ["clang++", "-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety"] + flags + [
        entry["file"]]


def check(entry):
    result = subprocess.run(clang_command(entry), cwd=entry["directory"], capture_output=True,
                            text=True)
    return entry["file"], result.returncode, result.stderr


def object_path(entry):
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    return os.path.join(entry["directory"], args[args.index("-o") + 1])


def checked_in(clang_build):
    """The source files whose object clang_build compiled with thread-safety analysis as errors."""
    with open(os.path.join(clang_build, "CMakeCache.txt"), encoding="utf-8") as f:
        if "GRANARY_THREAD_SAFETY:BOOL=ON" not in f.read():
            sys.exit(f"thread-safety: {clang_build} was not configured with "
                     "-DGRANARY_THREAD_SAFETY=ON, so its objects say nothing of the analysis")
    with open(os.path.join(clang_build, "compile_commands.json"), encoding="utf-8") as f:
        return {os.path.abspath(e["file"]) for e in json.load(f)
                if os.path.exists(object_path(e))}


def main():
    args = sys.argv[1:]
    skip = set()
    if "--except-built-in" in args:
        at = args.index("--except-built-in")
        skip = checked_in(args[at + 1])
        del args[at:at + 2]
    build = args[0] if args else "build"
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        entries = [e for e in json.load(f)
                   if not e["file"].endswith(".pb.cc") and os.path.exists(e["file"])
                   and os.path.abspath(build) not in os.path.abspath(e["file"])]
    checked_by_clang_build = [e for e in entries if os.path.abspath(e["file"]) in skip]
    entries = [e for e in entries if os.path.abspath(e["file"]) not in skip]
    if checked_by_clang_build:
        print(f"thread-safety: {len(checked_by_clang_build)} files already compiled with the "
              "analysis as errors by the clang build; checking the rest")
    failed = []
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for path, code, stderr in pool.map(check, entries):
            if code != 0:
                failed.append(path)
                print(f"thread-safety: {path}:\n{stderr}", file=sys.stderr)
    print(f"thread-safety: {len(entries)} files, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
