#!/usr/bin/env python3
"""The OpenSHMEM table of bench/shmem.sh: medians over rounds, and the
issue's goals as same-run ratios (fastmsg / reference, per round, then the
median of the ratios, so each ratio compares neighbouring runs).

    shmem_report.py build/bench/shmem.jsonl > build/bench/shmem.md
"""
import json
import statistics
import sys
from collections import defaultdict

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
val = defaultdict(dict)  # (impl, where, name) -> round -> value
for r in rows:
    val[(r["impl"], r["where"], r["name"])][r["round"]] = r["value"]


def med(impl, where, name):
    v = list(val.get((impl, where, name), {}).values())
    return statistics.median(v) if v else None


def ratio(a, b, invert=False):
    """Median over rounds of a/b (b/a when invert): neighbours compared."""
    ra, rb = val.get(a, {}), val.get(b, {})
    rs = [(rb[k] / ra[k]) if invert else (ra[k] / rb[k]) for k in ra if k in rb and ra[k] and rb[k]]
    return statistics.median(rs) if rs else None


def fmt(x, unit=""):
    return "-" if x is None else ("%.3f" % x if x < 100 else "%.0f" % x) + unit


out = []
p = out.append
p("### One node: libfmshmem next to Open MPI oshmem (the same program)")
p("")
p("| figure | fastmsg | oshmem | fastmsg / oshmem |")
p("|---|---|---|---|")
names = []
for (impl, where, name) in val:
    if where == "node2" and name not in names:
        names.append(name)
for name in names:
    unit = next(r["unit"] for r in rows if r["name"] == name)
    f, o = med("fastmsg", "node2", name), med("oshmem", "node2", name)
    rr = ratio(("fastmsg", "node2", name), ("oshmem", "node2", name), invert=(unit == "MB/s"))
    shown = name + (" (oshmem / fastmsg time)" if unit == "MB/s" else "")
    p("| %s | %s %s | %s %s | %s |" % (shown, fmt(f), unit, fmt(o), unit, fmt(rr) + "x"))
b4f, b4o = med("fastmsg", "node4", "barrier_all"), med("oshmem", "node4", "barrier_all")
p("| barrier_all, 4 PEs on 2 cores | %s us | %s us | %sx |" % (
    fmt(b4f), fmt(b4o), fmt(ratio(("fastmsg", "node4", "barrier_all"),
                                  ("oshmem", "node4", "barrier_all")))))
p("")
p("Ratios are fastmsg's time over oshmem's (below 1: fastmsg faster); for bandwidth rows")
p("the inverse, so every ratio reads the same way.")
p("")
goals = [
    ("8 B put + quiet, heap", "put 8 B + quiet, heap", "node2", "<= 1.0x"),
    ("8 B get, heap", "get 8 B, heap", "node2", "<= 1.0x"),
    ("fetch-add, heap", "fetch-add, heap", "node2", "<= 1.0x"),
    ("8 B put + quiet, static", "put 8 B + quiet, static", "node2", "<= 0.1x"),
    ("8 B get, static", "get 8 B, static", "node2", "<= 0.1x"),
    ("fetch-add, static", "fetch-add, static", "node2", "<= 0.1x"),
    ("put 1 MiB, heap", "put 1 MiB, heap", "node2", "time <= 1.0x"),
    ("get 1 MiB, heap", "get 1 MiB, heap", "node2", "time <= 1.0x"),
    ("barrier, 4 PEs on 2 cores", "barrier_all", "node4", "<= 1.0x"),
]
if any(w == "hosts" for (_, w, _) in val):
    rt = ("fastmsg", "hosts", "fastmsg round trip 8 B")
    p("### Two namespace hosts (fastmsg; Open MPI's launcher cannot reach the namespaces)")
    p("")
    p("| figure | fastmsg | / fastmsg's own 8 B round trip |")
    p("|---|---|---|")
    for (impl, where, name) in list(val):
        if where == "hosts":
            unit = next(r["unit"] for r in rows if r["name"] == name and r["where"] == where)
            extra = "-" if unit != "us" else fmt(ratio((impl, where, name), rt)) + "x"
            p("| %s | %s %s | %s |" % (name, fmt(med(impl, where, name)), unit, extra))
    p("")
if any(w.startswith("rail") for (_, w, _) in val):
    p("### Two hosts, rails shaped to 1 Gbit/s: put 1 MiB (windows of 16, then quiet)")
    p("")
    p("| figure | MB/s | ratio |")
    p("|---|---|---|")
    tcp = ("tcp", "rail1", "kernel TCP 1 MiB")
    one = ("fastmsg", "rail1", "put 1 MiB, heap")
    two = ("fastmsg", "rail2", "put 1 MiB, heap")
    p("| kernel TCP, one rail | %s | |" % fmt(med(*tcp)))
    p("| fastmsg put, one rail | %s | %sx TCP |" % (fmt(med(*one)), fmt(ratio(one, tcp))))
    p("| fastmsg put, two rails | %s | %sx one rail |" % (fmt(med(*two)), fmt(ratio(two, one))))
    p("")
p("### The goals (issue 12), same-run ratios")
p("")
p("| figure | goal | measured |")
p("|---|---|---|")
for label, name, where, goal in goals:
    unit = "MB/s" if "MiB" in name else "us"
    rr = ratio(("fastmsg", where, name), ("oshmem", where, name), invert=(unit == "MB/s"))
    p("| %s vs oshmem | %s | %s |" % (label, goal, fmt(rr) + "x"))
if any(w == "hosts" for (_, w, _) in val):
    for label in ("get 8 B, heap, target computes", "fetch-add, heap, target computes"):
        p("| two hosts: %s vs fastmsg's round trip | <= 1.3x | %s |" % (
            label, fmt(ratio(("fastmsg", "hosts", label), rt)) + "x"))
if any(w.startswith("rail") for (_, w, _) in val):
    p("| two hosts: put 1 MiB one rail vs kernel TCP | >= 1.0x | %s |" % (fmt(ratio(one, tcp)) + "x"))
    p("| two hosts: put 1 MiB two rails vs one | >= 1.9x | %s |" % (fmt(ratio(two, one)) + "x"))
print("\n".join(out))
