#!/usr/bin/python3
"""Draws one PNG per benchmark result file.

    /usr/bin/python3 bench/plot.py RESULTS_DIR

Reads every RESULTS_DIR/*.json (the schema in bench/check_results.py, which validates each file
first) and writes RESULTS_DIR/<name>.png next to it. One figure per file, titled with its
"title":
  * one subplot per distinct "unit" of its series, in order of first appearance. When every
    series of the unit has an "x", they are drawn as lines (one per "line" value; x against the
    median, with a band from the smallest to the largest sample); otherwise as horizontal bars
    of the medians, with error bars from the smallest to the largest sample and the median
    printed beside each bar;
  * when "headlines" is non-empty, a last subplot listing them: name, value, unit and, for those
    with a target, the target and whether it was met ("MISSED" in red when not);
  * a footer with the date, the machine (CPU model, cores, memory in GiB, build type) and
    "quick mode" for a --quick run (which is not a measurement).
The figure grows with the number of bars and headlines.

Exits 1, naming the file and what is wrong, if RESULTS_DIR has no *.json file or a file is not
valid JSON or does not follow the schema; the other files are still plotted.
"""

import glob
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after selecting the backend)
from matplotlib.ticker import FuncFormatter  # noqa: E402

sys.dont_write_bytecode = True  # No __pycache__ in the source tree for the import below.
import check_results  # noqa: E402 (bench/, the script's directory, is on sys.path)

FIGURE_WIDTH = 10.0  # inches
LINE_PLOT_HEIGHT = 3.2
BAR_HEIGHT = 0.38
BAR_PLOT_BASE_HEIGHT = 1.0
HEADLINE_HEIGHT = 0.32
HEADLINE_BASE_HEIGHT = 0.4
MET_COLOR, MISSED_COLOR = "tab:green", "tab:red"


def fmt(value):
    """A number as the plots print it: grouped thousands when large, 4 significant digits else."""
    if abs(value) >= 10000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


# Value axes label their ticks as fmt() prints numbers.
VALUE_TICKS = FuncFormatter(lambda value, _: fmt(value))


def units_in_order(series):
    """{unit: [series]} in order of first appearance."""
    groups = {}
    for s in series:
        groups.setdefault(s["unit"], []).append(s)
    return groups


def draw_lines(ax, unit, series):
    lines = {}
    for s in series:
        lines.setdefault(s.get("line", ""), []).append(s)
    for line, points in lines.items():
        points.sort(key=lambda s: s["x"])
        xs = [s["x"] for s in points]
        ax.plot(xs, [s["median"] for s in points], marker="o", label=line or None)
        ax.fill_between(xs, [min(s["samples"]) for s in points],
                        [max(s["samples"]) for s in points], alpha=0.2)
    xs = sorted({s["x"] for s in series})
    if len(xs) <= 12:
        ax.set_xticks(xs)
    if any(lines):
        ax.legend(fontsize=8)
    values = [v for s in series for v in s["samples"]]
    # Lines a hundredfold apart (a limit far above the others) share a log axis, and so do
    # abscissas that double (1, 2, 4, ... workers; 1k, 10k, ... updates).
    logarithmic = min(values) > 0 and max(values) / min(values) > 100
    if logarithmic:
        ax.set_yscale("log")
    elif min(values) >= 0:
        ax.set_ylim(bottom=0)
    if min(xs) > 0 and max(xs) / min(xs) >= 16:
        ax.set_xscale("log", base=2 if all(float(x).is_integer() and x < 1024 for x in xs) else 10)
        ax.set_xticks(xs if len(xs) <= 12 else ax.get_xticks())
        ax.xaxis.set_major_formatter(VALUE_TICKS)
    ax.yaxis.set_major_formatter(VALUE_TICKS)
    ax.set_ylabel(unit)
    scale = ", log scale" if logarithmic else ""
    ax.set_title(f"{unit} (median; band: min to max{scale})", fontsize=10)
    ax.grid(alpha=0.3)


def draw_bars(ax, unit, series):
    positions = range(len(series))
    medians = [s["median"] for s in series]
    lows = [s["median"] - min(s["samples"]) for s in series]
    highs = [max(s["samples"]) - s["median"] for s in series]
    ax.barh(positions, medians, xerr=[lows, highs], capsize=3, color="tab:blue", alpha=0.8,
            error_kw={"elinewidth": 1})
    ax.set_yticks(list(positions), [s["name"] for s in series], fontsize=9)
    ax.invert_yaxis()  # The first series on top.
    right = max(max(s["samples"]) for s in series)
    left = min(0, min(min(s["samples"]) for s in series))
    pad = 0.01 * (right - left or 1)
    for i, s in enumerate(series):
        ax.text(max(s["samples"]) + pad, i, fmt(s["median"]), va="center", fontsize=8)
    ax.set_xlim(left, right + 0.18 * (right - left or 1))
    ax.xaxis.set_major_formatter(VALUE_TICKS)
    ax.set_xlabel(unit)
    ax.set_title(f"{unit} (median; error bars: min to max)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)


def headline_text(h):
    """(text, color) of one headline."""
    text = f"{h['name']}: {fmt(h['value'])} {h['unit']}"
    if "target_at_least" in h:
        text += f"   (target >= {fmt(h['target_at_least'])} {h['unit']}: "
    elif "target_at_most" in h:
        text += f"   (target <= {fmt(h['target_at_most'])} {h['unit']}: "
    else:
        return text, "black"
    return text + ("met)" if h["met"] else "MISSED)"), MET_COLOR if h["met"] else MISSED_COLOR


def draw_headlines(ax, headlines):
    ax.axis("off")
    ax.set_title("Headlines", fontsize=10, loc="left")
    step = 1.0 / len(headlines)
    for i, h in enumerate(headlines):
        text, color = headline_text(h)
        ax.text(0.0, 1.0 - (i + 0.5) * step, text, color=color, fontsize=9, va="center",
                transform=ax.transAxes)


def footer(report):
    machine = report["machine"]
    text = (f"{report['date']}   {machine['cpu_model']}, {machine['cores']} cores, "
            f"{machine['memory_bytes'] / 2**30:.1f} GiB, {machine['build_type']}")
    return text + "   — quick mode: not a measurement" if report["quick"] else text


def plot(report, png_path):
    groups = units_in_order(report["series"])
    panels = []  # (height in inches, draw(ax))
    for unit, series in groups.items():
        if all("x" in s for s in series):
            panels.append((LINE_PLOT_HEIGHT, lambda ax, u=unit, s=series: draw_lines(ax, u, s)))
        else:
            panels.append((BAR_PLOT_BASE_HEIGHT + BAR_HEIGHT * len(series),
                           lambda ax, u=unit, s=series: draw_bars(ax, u, s)))
    if report["headlines"]:
        panels.append((HEADLINE_BASE_HEIGHT + HEADLINE_HEIGHT * len(report["headlines"]),
                       lambda ax: draw_headlines(ax, report["headlines"])))
    heights = [height for height, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, squeeze=False, layout="constrained",
                             figsize=(FIGURE_WIDTH, sum(heights) + 1.0),
                             gridspec_kw={"height_ratios": heights})
    for ax, (_, draw) in zip(axes[:, 0], panels):
        draw(ax)
    fig.suptitle(report["title"], fontsize=12, fontweight="bold")
    fig.supxlabel(footer(report), fontsize=7, color="dimgray")
    fig.savefig(png_path, dpi=110)
    plt.close(fig)


def main(argv):
    if len(argv) != 1:
        print("usage: plot.py RESULTS_DIR", file=sys.stderr)
        return 2
    results_dir = argv[0]
    paths = sorted(glob.glob(os.path.join(results_dir, "*.json")))
    if not paths:
        print(f"plot.py: {results_dir} holds no *.json result files", file=sys.stderr)
        return 1
    failed = False
    for path in paths:
        name = os.path.splitext(os.path.basename(path))[0]
        report, problem = check_results.load(path)
        problems = [problem] if problem else check_results.report_problems(report, name)
        if problems:
            for p in problems:
                print(f"plot.py: {path}: {p}", file=sys.stderr)
            failed = True
            continue
        plot(report, os.path.join(results_dir, f"{name}.png"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
