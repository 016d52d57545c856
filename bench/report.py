#!/usr/bin/env python3
"""Turns the JSON lines of one benchmark run (fmperf, mpi_perf, raw_shm) into
comparison tables and the issue's goals, as Markdown.

    report.py results.jsonl [--title T] [--command C] [--out FILE]
"""
import argparse
import json
import statistics
import sys
from collections import defaultdict


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def human(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size >> 10} KiB"
    return f"{size} B"


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "MB/s":
        return f"{v / 1000:.2f} GB/s"
    if unit == "Mmsg/s":
        return f"{v:.2f} M/s"
    if unit == "%cpu":
        return f"{v:.2f} %"
    return f"{v:.3f} us"


class Results:
    """Values by (test, size, ranks, recv) and label; repeated runs of the
    same figure (the script runs some twice) are reduced to their median."""

    def __init__(self, rows):
        self.vals = defaultdict(lambda: defaultdict(list))
        self.units = {}
        for r in rows:
            label = r["transport"]
            if r.get("recv") == "in-place":
                label += " (in place)"
            key = (r["test"], r["size"], r.get("ranks", 2))
            self.vals[key][label].append(r["value"])
            self.units[r["test"]] = r["unit"]

    def get(self, test, size, label, ranks=2):
        v = self.vals.get((test, size, ranks), {}).get(label)
        return statistics.median(v) if v else None

    def labels(self, test, ranks=2):
        seen = []
        for (t, _, n), by in self.vals.items():
            if t == test and n == ranks:
                for lab in by:
                    if lab not in seen:
                        seen.append(lab)
        return seen

    def sizes(self, test, ranks=2):
        return sorted({s for (t, s, n) in self.vals if t == test and n == ranks})


ORDER = ["fastmsg", "fastmsg (in place)", "raw-2lines", "raw-1line", "raw-spsc",
         "tcp", "udp", "openmpi-vader", "openmpi-ucx", "mpich"]


def ordered(labels):
    return sorted(labels, key=lambda l: (ORDER.index(l) if l in ORDER else len(ORDER), l))


def table(res, test, title, ranks=2, sizes=None):
    labels = ordered(res.labels(test, ranks))
    if not labels:
        return []
    unit = res.units[test]
    out = [f"### {title}", "", "| size | " + " | ".join(labels) + " |",
           "|---|" + "---|" * len(labels)]
    for s in sizes or res.sizes(test, ranks):
        cells = [fmt(res.get(test, s, lab, ranks), unit) for lab in labels]
        if any(c != "-" for c in cells):
            out.append(f"| {human(s)} | " + " | ".join(cells) + " |")
    return out + [""]


def ratio_row(name, ours, ref, refname, goal, lower_better):
    if ours is None or ref is None:
        return f"| {name} | {ours if ours is not None else '-'} | {refname}: - | - | {goal[0]} | not measured |"
    r = ours / ref
    met = r <= goal[1] if lower_better else r >= goal[1]
    return (f"| {name} | {ours:.3f} | {refname}: {ref:.3f} | {r:.2f}x | {goal[0]} | "
            f"{'met' if met else 'NOT met'} |")


def goals(res):
    out = ["### Goals of issue 2, as ratios taken in this run", "",
           "| figure | fastmsg | reference (same run) | ratio | goal | |",
           "|---|---|---|---|---|---|"]
    g = res.get
    out.append(ratio_row("8 B one-way latency (us)", g("latency", 8, "fastmsg"),
                         g("latency", 8, "raw-2lines"), "raw ping-pong, a line per direction",
                         ("<= 1.2x", 1.2), True))
    out.append(ratio_row("8 B one-way latency (us)", g("latency", 8, "fastmsg"),
                         g("latency", 8, "openmpi-vader"), "Open MPI vader",
                         ("<= 1/1.7 = 0.59x", 1 / 1.7), True))
    out.append(ratio_row("MsgRate 8 B (M msg/s)", g("msgrate", 8, "fastmsg"),
                         g("msgrate", 8, "openmpi-vader"), "Open MPI vader", (">= 3x", 3), False))
    for size in (1 << 20, 4 << 20):
        out.append(ratio_row(f"bandwidth {human(size)}, receiver copies (MB/s)",
                             g("bw", size, "fastmsg"), g("bw", size, "openmpi-ucx"),
                             "UCX (Open MPI pml ucx)", (">= 1x", 1), False))
    out.append(ratio_row("ring of 8 B exchanges, 4 ranks on 2 cores (us/round)",
                         g("ring", 8, "fastmsg", 4), g("ring", 8, "openmpi-vader", 4),
                         "Open MPI vader, same pattern", ("<= 1x", 1), True))
    idle = g("idle", 8, "fastmsg")
    out.append(f"| idle rank in fm_wait (% of a CPU) | {idle if idle is not None else '-'} | - | - | < 5 % | "
               f"{'met' if idle is not None and idle < 5 else 'not measured' if idle is None else 'NOT met'} |")
    return out + [""]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--title", default="Benchmark results")
    ap.add_argument("--command", default="bash bench/run.sh")
    ap.add_argument("--machine", default="")
    ap.add_argument("--out")
    a = ap.parse_args()
    res = Results(load(a.results))
    md = [f"## {a.title}", "", f"Command: `{a.command}`", ""]
    if a.machine:
        md += [a.machine, ""]
    md += goals(res)
    md += table(res, "latency", "One-way latency (ping-pong / 2), median")
    md += table(res, "bw", "Bandwidth, median of acknowledged windows of 64 messages "
                "(receiver copies each message into its own buffer unless 'in place')")
    md += table(res, "msgrate", "MsgRate: rank 0 only sends, rank 1 only receives")
    md += table(res, "ring", "Ring of 8 B exchanges, 4 ranks on 2 cores (time per round)", ranks=4)
    md += table(res, "ring", "Ring of 8 B exchanges, 8 ranks on 2 cores (time per round)", ranks=8)
    md += table(res, "allreduce", "8 B MPI_Allreduce, 4 ranks on 2 cores (for reference)", ranks=4)
    md += table(res, "idle", "CPU share of a rank blocked in fm_wait")
    text = "\n".join(md) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
