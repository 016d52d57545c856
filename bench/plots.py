#!/usr/bin/env python3
"""Draws the benchmark's figures as PNG from the JSON lines of one run
(build/bench/results.jsonl, the rows fmperf and the bench scripts write):

  latency.png  one-way latency by message size, every transport and peer (log-log)
  sweep.png    the sweep (message length x messages in flight) as heat maps of
               fastmsg / TCP, one per pair (loopback, and -net between namespaces)
  loss.png     1 MiB goodput by random loss rate on the link, fastmsg and TCP,
               as a ratio to the loss-free figure of the same round (fastmsg:
               the loss-free runs just before and after, report.loss_free_around)
  incast.png   incast goodput, fairness (min/max share) and the victim's p99 latency by number
               of senders (rows "test": "incast", "metric", "senders")

A figure whose rows are missing is skipped (and an old PNG of it removed).

    plots.py RESULTS [--out DIR] [--md FILE]

--out: where the PNGs go (default build/bench/img); --md: append a "## Plots"
section linking them to that Markdown file (links relative to it).

matplotlib comes from a virtual environment of the build: build/venv (or
$FM_PLOTS_VENV), made with `python3 -m venv` and pip on first use; the script
re-runs itself under it. Without it (no python3-venv, no network) the script
says so and exits 0: the report is still written, without plots.
"""
import argparse
import os
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("FM_PLOTS_VENV", ROOT / "build" / "venv"))
FIGURES = ["latency", "sweep", "loss", "incast"]


def log(msg):
    print(f"plots.py: {msg}", file=sys.stderr)


def ensure_matplotlib():
    """Re-executes under the venv's python (made on first use) unless this
    already is it."""
    py = VENV / "bin" / "python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        return True
    try:
        if not py.exists():
            log(f"making {VENV} (python3 -m venv) and installing matplotlib")
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        probe = subprocess.run([str(py), "-c", "import matplotlib"], capture_output=True)
        if probe.returncode != 0:
            subprocess.run([str(py), "-m", "pip", "install", "-q", "matplotlib"], check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        log(f"no matplotlib in {VENV} ({e}); plots skipped "
            "(needs python3-venv, see scripts/deps.sh, and pip access)")
        return False
    os.execv(str(py), [str(py), str(Path(__file__).resolve())] + sys.argv[1:])


# The tables' helpers (load, human, loss ratios), so plots and report agree.
sys.path.insert(0, str(Path(__file__).resolve().parent))
import report  # noqa: E402


def median_by(rows, key):
    acc = defaultdict(list)
    for r in rows:
        acc[key(r)].append(r["value"])
    return {k: statistics.median(v) for k, v in acc.items()}


def size_ticks(ax, sizes):
    ax.set_xticks(sizes)
    ax.set_xticklabels([report.human(s).replace(" ", "") for s in sizes], rotation=45)
    ax.minorticks_off()


def plot_latency(plt, rows, path):
    # fmperf's kernel peers send nothing for 0 B (write_all of 0 bytes): their
    # 0 B figure is no round trip, so it is left out.
    # Runs through a shaped port (bench/net.sh's shallow port) are not the
    # link the others ran on.
    lat = [r for r in rows if r["test"] == "latency" and "loss" not in r and "port" not in r
           and r.get("ranks", 2) == 2 and not (r["size"] == 0 and "peer" in r)]
    if not lat:
        return False

    def label(r):
        return r["transport"] + (" (in place)" if r.get("recv") == "in-place" else "")

    med = median_by(lat, lambda r: (label(r), r["size"]))
    fig, ax = plt.subplots(figsize=(8, 5))
    for lab in report.ordered({k[0] for k in med}):
        pts = sorted((s, v) for (l, s), v in med.items() if l == lab)
        ax.plot([s for s, _ in pts], [v for _, v in pts], marker="o", label=lab)
    sizes = sorted({k[1] for k in med})
    ax.set_xscale("symlog", linthresh=1, base=2)  # 0 B has a place on the axis
    ax.set_yscale("log")
    size_ticks(ax, sizes)
    ax.set_xlabel("message size")
    ax.set_ylabel("one-way latency, median (us)")
    ax.set_title("Latency by message size (ping-pong / 2)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_sweep(plt, rows, path):
    from matplotlib.colors import LogNorm
    sw = [r for r in rows if r["test"] == "sweep" and "round" not in r]
    ours = sorted({r["transport"] for r in sw if "peer" not in r})
    tcps = sorted({r["transport"] for r in sw if r.get("peer", "").startswith("tcp")})
    pairs = []
    for f in ours:  # fastmsg with tcp, fastmsg-net with tcp-net
        net = f.endswith("-net")
        t = [t for t in tcps if t.endswith("-net") == net]
        if t:
            pairs.append((f, t[0]))
    if not pairs:
        return False
    fig, axes = plt.subplots(1, len(pairs), figsize=(5.5 * len(pairs), 4.5), squeeze=False)
    for ax, (f, t) in zip(axes[0], pairs):
        a = median_by([r for r in sw if r["transport"] == f], lambda r: (r["size"], r["window"]))
        b = median_by([r for r in sw if r["transport"] == t], lambda r: (r["size"], r["window"]))
        sizes = sorted({k[0] for k in a} & {k[0] for k in b})
        wins = sorted({k[1] for k in a} & {k[1] for k in b})
        grid = [[a[(s, w)] / b[(s, w)] if (s, w) in a and (s, w) in b and b[(s, w)] > 0
                 else float("nan") for w in wins] for s in sizes]
        vals = [v for row in grid for v in row if v == v and v > 0]
        span = max([max(v, 1 / v) for v in vals] + [2])
        im = ax.imshow(grid, cmap="RdBu", norm=LogNorm(vmin=1 / span, vmax=span),
                       origin="lower", aspect="auto")
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if v == v:
                    dark = max(v, 1 / v) > span ** 0.6
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=9,
                            color="white" if dark else "black")
        ax.set_xticks(range(len(wins)))
        ax.set_xticklabels([str(w) for w in wins])
        ax.set_yticks(range(len(sizes)))
        ax.set_yticklabels([report.human(s) for s in sizes])
        ax.set_xlabel("messages in flight")
        ax.set_ylabel("message length")
        ax.set_title(f"{f} / {t} bandwidth (>1: fastmsg ahead)", fontsize=10)
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_loss(plt, rows, path):
    by = {lab: report.loss_ratios(rows, lab) for lab in report.LOSS_LABELS}
    by = {lab: d for lab, d in by.items() if d}
    if not by:
        return False
    rates = sorted({p for d in by.values() for p in d})
    fault = {}
    rounds = report.fault_rounds(rows)
    if rounds and 0.01 in rates:
        fault[0.01] = statistics.median(d / f for d, f in rounds.values())
    series = [(f"{lab}" + (f" (loss-free {d[0][0]:.0f} MB/s)" if 0 in d else ""),
               {p: v[1] for p, v in d.items()}) for lab, d in by.items()]
    if fault:
        series.append(("fastmsg-net, FM_FAULT (GSO on)", fault))
    fig, ax = plt.subplots(figsize=(7, 5.2))
    width = 0.8 / len(series)
    for i, (lab, d) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j, p in enumerate(rates) if p in d]
        ys = [d[p] for p in rates if p in d]
        bars = ax.bar(xs, ys, width, label=lab)
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.axhline(0.9, color="gray", linestyle="--", linewidth=1, label="goal for fastmsg: 0.9x")
    ax.set_xticks(range(len(rates)))
    ax.set_xticklabels([f"{p * 100:g} %" for p in rates])
    ax.set_xlabel("random packet loss on the link (both directions)")
    ax.set_ylabel("1 MiB goodput / loss-free around it, same round")
    ax.set_ylim(0, max(1.15, max(y for _, d in series for y in d.values()) * 1.1))
    ax.set_title("Goodput by loss rate")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


INCAST_METRICS = [("goodput", "aggregate goodput"), ("minmax", "fairness (min/max share)"),
                  ("victim_p99", "victim small-message p99")]


def plot_incast(plt, rows, path):
    inc = [r for r in rows if r.get("test") == "incast" and "senders" in r
           and r.get("metric") in dict(INCAST_METRICS)]
    if not inc:
        return False
    metrics = [m for m in INCAST_METRICS if any(r["metric"] == m[0] for r in inc)]
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 4.2), squeeze=False)
    for ax, (m, title) in zip(axes[0], metrics):
        mine = [r for r in inc if r["metric"] == m]
        med = median_by(mine, lambda r: (r.get("transport") or r.get("peer"), r["senders"]))
        for lab in report.ordered({k[0] for k in med}):
            pts = sorted((n, v) for (l, n), v in med.items() if l == lab)
            ax.plot([n for n, _ in pts], [v for _, v in pts], marker="o", label=lab)
        ns = sorted({k[1] for k in med})
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.minorticks_off()
        ax.set_xlabel("senders")
        unit = mine[0].get("unit", "")
        ax.set_ylabel(f"{title}" + (f" ({unit})" if unit else ""))
        ax.set_title(title)
        if m in ("goodput", "minmax"):
            ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Incast: N senders into one receiver")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


CAPTIONS = {
    "latency": "One-way latency by message size, every transport and peer (log-log)",
    "sweep": "Sweep: fastmsg / TCP bandwidth by message length and messages in flight",
    "loss": "Goodput by random loss rate on the link, as a ratio to loss-free",
    "incast": "Incast: goodput, fairness and victim p99 by number of senders",
}


def main():
    ap = argparse.ArgumentParser(description="PNG plots of a benchmark run")
    ap.add_argument("results")
    ap.add_argument("--out", default=str(ROOT / "build" / "bench" / "img"))
    ap.add_argument("--md", help="append a '## Plots' section to this Markdown file")
    a = ap.parse_args()
    if not ensure_matplotlib():
        return 0
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report.load(a.results) if "test" in r and "value" in r]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    draw = {"latency": plot_latency, "sweep": plot_sweep, "loss": plot_loss,
            "incast": plot_incast}
    made = []
    for name in FIGURES:
        path = out / f"{name}.png"
        try:
            ok = draw[name](plt, rows, path)
        except Exception as e:  # one bad figure must not cost the others
            log(f"{name}: {type(e).__name__}: {e}")
            ok = False
        if ok:
            made.append(name)
            log(f"wrote {path}")
        elif path.exists():
            path.unlink()  # not this run's: no stale figure in the report
    if a.md and made:
        md = Path(a.md)
        rel = os.path.relpath(out, md.resolve().parent)
        lines = ["", "## Plots", ""]
        for name in made:
            lines += [f"### {CAPTIONS[name]}", "", f"![{name}]({rel}/{name}.png)", ""]
        with open(md, "a") as f:
            f.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
