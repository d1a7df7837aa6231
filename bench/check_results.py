#!/usr/bin/python3
"""Checks benchmark result files (the JSON the C++ benchmarks write, and its plot) for the tests.

    /usr/bin/python3 bench/check_results.py RESULTS_DIR NAME...

For each NAME, RESULTS_DIR/NAME.json must exist, parse and follow the schema below, with "name"
equal to NAME, and RESULTS_DIR/NAME.png (bench/plot.py) must exist and start with the PNG
signature. Speeds are never checked: a slow machine passes.

Schema (every field required unless marked optional; "number" is a JSON int or float, never a
boolean; unknown fields are problems, except inside "machine"):
  name str, title str, command str, quick bool, repetitions int >= 1,
  date str (ISO 8601, e.g. "2026-11-21T10:00:00Z"),
  machine {cpu_model str, cores int >= 1, memory_bytes number, kernel str, compiler str,
           build_type str},
  series [>= 1 of {name str, unit str, samples [>= 1 finite number], median number,
                   spread number, x finite number (optional), line str (optional, needs x)}],
  headlines [{name str, value finite number, unit str,
              target_at_least | target_at_most finite number (optional, at most one),
              met bool (present exactly when a target is)}],
  notes [str].
A series' median must be the element at index len // 2 of its sorted samples and its spread
max - min, both within 1e-9 relative; a headline's "met" must be value >= target_at_least, or
value <= target_at_most.

Prints one line per problem, "<file>: <field>: <what is wrong>", and exits 1 if there is any;
otherwise prints "checked N result files" and exits 0.

plot.py validates with report_problems() before plotting, so both read the same schema.
"""

import datetime
import json
import math
import os
import sys

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RELATIVE_TOLERANCE = 1e-9

TOP_FIELDS = ("name", "title", "command", "quick", "repetitions", "date", "machine", "series",
              "headlines", "notes")
MACHINE_STRINGS = ("cpu_model", "kernel", "compiler", "build_type")
SERIES_FIELDS = ("name", "unit", "samples", "median", "spread", "x", "line")
TARGETS = ("target_at_least", "target_at_most")
HEADLINE_FIELDS = ("name", "value", "unit", "met") + TARGETS


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite_number(value):
    return is_number(value) and math.isfinite(value)


def close(a, b):
    return math.isclose(a, b, rel_tol=RELATIVE_TOLERANCE, abs_tol=0.0)


class Problems:
    """Collects "<field>: <what>" problems of one object."""

    def __init__(self):
        self.found = []

    def add(self, field, what):
        self.found.append(f"{field}: {what}")

    def require(self, obj, key, where, check, expected):
        """Returns obj[key] if present and check(value) holds, else records a problem and returns
        None. `expected` describes a valid value."""
        field = f"{where}.{key}" if where else key
        if key not in obj:
            self.add(field, "missing")
            return None
        value = obj[key]
        if not check(value):
            self.add(field, f"is {json.dumps(value)[:80]}, need {expected}")
            return None
        return value

    def unknown(self, obj, known, where):
        for key in obj:
            if key not in known:
                self.add(f"{where}.{key}" if where else key, "unknown field")


def is_str(value):
    return isinstance(value, str)


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_iso_date(value):
    if not isinstance(value, str):
        return False
    try:
        datetime.datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def check_machine(p, machine):
    for key in MACHINE_STRINGS:
        p.require(machine, key, "machine", is_str, "a string")
    p.require(machine, "cores", "machine", lambda v: is_int(v) and v >= 1, "an int >= 1")
    p.require(machine, "memory_bytes", "machine", lambda v: is_finite_number(v) and v > 0,
              "a positive number")


def check_series(p, series, where):
    p.unknown(series, SERIES_FIELDS, where)
    p.require(series, "name", where, is_str, "a string")
    p.require(series, "unit", where, is_str, "a string")
    samples = p.require(series, "samples", where,
                        lambda v: isinstance(v, list) and len(v) >= 1
                        and all(is_finite_number(s) for s in v),
                        "a list of at least one finite number")
    median = p.require(series, "median", where, is_finite_number, "a finite number")
    spread = p.require(series, "spread", where, is_finite_number, "a finite number")
    if samples is not None:
        ordered = sorted(samples)
        if median is not None and not close(median, ordered[len(ordered) // 2]):
            p.add(f"{where}.median", f"is {median}, but the samples give "
                                     f"{ordered[len(ordered) // 2]} (sorted[len // 2])")
        if spread is not None and not close(spread, ordered[-1] - ordered[0]):
            p.add(f"{where}.spread", f"is {spread}, but the samples give "
                                     f"{ordered[-1] - ordered[0]} (max - min)")
    if "x" in series:
        p.require(series, "x", where, is_finite_number, "a finite number")
    if "line" in series:
        p.require(series, "line", where, is_str, "a string")
        if "x" not in series:
            p.add(f"{where}.line", "is set without x")


def check_headline(p, headline, where):
    p.unknown(headline, HEADLINE_FIELDS, where)
    p.require(headline, "name", where, is_str, "a string")
    p.require(headline, "unit", where, is_str, "a string")
    value = p.require(headline, "value", where, is_finite_number, "a finite number")
    targets = [key for key in TARGETS if key in headline]
    if len(targets) > 1:
        p.add(where, "has both target_at_least and target_at_most; give at most one")
        return
    if not targets:
        if "met" in headline:
            p.add(f"{where}.met", "is present without a target")
        return
    target = p.require(headline, targets[0], where, is_finite_number, "a finite number")
    met = p.require(headline, "met", where, lambda v: isinstance(v, bool),
                    "a boolean (a target is set)")
    if value is None or target is None or met is None:
        return
    expected = value >= target if targets[0] == "target_at_least" else value <= target
    if met != expected:
        p.add(f"{where}.met", f"is {json.dumps(met)}, but value {value} "
                              f"{'>=' if targets[0] == 'target_at_least' else '<='} "
                              f"target {target} is {json.dumps(expected)}")


def labelled(kind, index, obj):
    """'series[2] ("in-process")': names the element in messages when it has a string name."""
    name = obj.get("name")
    return f'{kind}[{index}] ({json.dumps(name)})' if isinstance(name, str) else f"{kind}[{index}]"


def report_problems(report, name):
    """The schema problems of the parsed result `report`, which should be named `name`, as
    "<field>: <what>" strings (empty when it is valid)."""
    p = Problems()
    if not isinstance(report, dict):
        p.add("(top level)", "is not a JSON object")
        return p.found
    p.unknown(report, TOP_FIELDS, "")
    report_name = p.require(report, "name", "", is_str, "a string")
    if report_name is not None and report_name != name:
        p.add("name", f"is {json.dumps(report_name)}, need {json.dumps(name)} (the file stem)")
    for key in ("title", "command"):
        p.require(report, key, "", is_str, "a string")
    p.require(report, "quick", "", lambda v: isinstance(v, bool), "a boolean")
    p.require(report, "repetitions", "", lambda v: is_int(v) and v >= 1, "an int >= 1")
    p.require(report, "date", "", is_iso_date, 'an ISO 8601 date, e.g. "2026-11-21T10:00:00Z"')
    machine = p.require(report, "machine", "", lambda v: isinstance(v, dict), "an object")
    if machine is not None:
        check_machine(p, machine)
    series = p.require(report, "series", "",
                       lambda v: isinstance(v, list) and len(v) >= 1
                       and all(isinstance(s, dict) for s in v),
                       "a list of at least one object")
    for i, s in enumerate(series or []):
        check_series(p, s, labelled("series", i, s))
    headlines = p.require(report, "headlines", "",
                          lambda v: isinstance(v, list) and all(isinstance(h, dict) for h in v),
                          "a list of objects")
    for i, h in enumerate(headlines or []):
        check_headline(p, h, labelled("headlines", i, h))
    p.require(report, "notes", "", lambda v: isinstance(v, list) and all(map(is_str, v)),
              "a list of strings")
    return p.found


def load(path):
    """Returns (parsed JSON, None), or (None, problem) when the file cannot be read or parsed."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f), None
    except FileNotFoundError:
        return None, "missing"
    except (OSError, UnicodeDecodeError) as e:
        return None, f"unreadable: {e}"
    except json.JSONDecodeError as e:
        return None, f"not valid JSON: {e}"


def file_problems(results_dir, name):
    """The problems of result `name` in `results_dir`, each "<file>: <what>"."""
    json_path = os.path.join(results_dir, f"{name}.json")
    png_path = os.path.join(results_dir, f"{name}.png")
    report, problem = load(json_path)
    found = [f"{json_path}: {problem}"] if problem else [
        f"{json_path}: {p}" for p in report_problems(report, name)]
    try:
        with open(png_path, "rb") as f:
            if f.read(len(PNG_SIGNATURE)) != PNG_SIGNATURE:
                found.append(f"{png_path}: does not start with the PNG signature")
    except FileNotFoundError:
        found.append(f"{png_path}: missing (bench/plot.py {results_dir} writes it)")
    except OSError as e:
        found.append(f"{png_path}: unreadable: {e}")
    return found


def main(argv):
    if len(argv) < 2:
        print("usage: check_results.py RESULTS_DIR NAME...", file=sys.stderr)
        return 2
    results_dir, names = argv[0], argv[1:]
    problems = [p for name in names for p in file_problems(results_dir, name)]
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"checked {len(names)} result files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
