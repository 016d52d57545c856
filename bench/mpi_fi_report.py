#!/usr/bin/env python3
"""The tables of bench/mpi_fi.sh (issue 9: MPI over fastmsg's libfabric provider).

The goals of the issue's "How fast" table first, as same-run ratios: within each round
fastmsg's figure over the best of the row's references in that round, then the median of
those ratios (each round's in brackets), so every ratio compares neighbouring runs. Then every
figure: medians over rounds, one column per variant, and a ratio column against the reference
of the matching goal row. Then seed 004's applications: times, speedups over one rank, and
fastmsg's time over TCP's.

    mpi_fi_report.py build/bench/mpi_fi.jsonl > build/bench/mpi_fi.md
"""
import json
import statistics
import sys
from collections import defaultdict

LOWER = {"latency", "allreduce", "app"}  # lower is better; bw and msgrate: higher

# Every variant's description, in the order of the columns.
NAMES = {
    "ompi-vader": "Open MPI ob1+vader",
    "ompi-ucx": "Open MPI pml ucx",
    "ompi-tcp": "Open MPI ob1 TCP",
    "ompi-ofi-shm": "OFI MTL shm",
    "ompi-ofi-tcp": "OFI MTL tcp",
    "ompi-ofi-net": "OFI MTL net",
    "ompi-ofi-udp": "OFI MTL udp",
    "ompi-ofi-fastmsg": "Open MPI + fastmsg",
    "mpich-shm": "MPICH (posix shm)",
    "mpich-ucx": "MPICH ucx",
    "mpich-ofi-tcp": "MPICH ofi tcp",
    "mpich-ofi-fastmsg": "MPICH + fastmsg",
    "fastmsg-api": "fastmsg API (fmperf)",
    "ompi-tcp-1g": "ob1 TCP, 1 rail",
    "ompi-tcp-2x1g": "ob1 TCP, 2 rails",
    "ompi-ofi-fastmsg-1g": "fastmsg, 1 rail",
    "ompi-ofi-fastmsg-2x1g": "fastmsg, 2 rails",
}
OMPI_HOST_REFS = ["ompi-tcp", "ompi-ofi-tcp", "ompi-ofi-net", "ompi-ofi-udp"]
MPICH_NODE_REFS = ["mpich-shm", "mpich-ucx", "mpich-ofi-tcp"]
MPICH_HOST_REFS = ["mpich-ucx", "mpich-ofi-tcp"]


def load(path):
    notes, val, apps_ok = [], defaultdict(dict), {}
    for line in open(path):
        if not line.strip():
            continue
        r = json.loads(line)
        if "note" in r:
            notes.append(r["note"])
            continue
        if r.get("test") == "app":
            key = (r["where"], "app", r["app"], r["size"], r["ranks"], r["variant"])
            apps_ok[key] = apps_ok.get(key, True) and r.get("ok", False)
        else:
            key = (r["where"], r["test"], r["size"], r["variant"])
        val[key][r["round"]] = r["value"]  # key -> round -> value
    return notes, val, apps_ok


def best(values, test):
    return min(values) if test in LOWER else max(values)


def med(val, key):
    v = list(val.get(key, {}).values())
    return statistics.median(v) if v else None


def ratio_rounds(val, where, test, size, fm, refs):
    """Per round: fm's value over the best of refs in that round."""
    a = val.get((where, test, size, fm), {})
    out, won = {}, defaultdict(int)
    for rnd, x in sorted(a.items()):
        rv = [(val[(where, test, size, r)][rnd], r) for r in refs
              if rnd in val.get((where, test, size, r), {})]
        if not rv or not x:
            continue
        b = best([v for v, _ in rv], test)
        won[[r for v, r in rv if v == b][0]] += 1
        if b:
            out[rnd] = x / b
    return out, won


def fmt(x):
    if x is None:
        return "-"
    ax = abs(x)
    return "%.0f" % x if ax >= 1000 else "%.1f" % x if ax >= 100 else "%.2f" % x if ax >= 1 \
        else "%.3f" % x


def fmt_ratio(rs):
    if not rs:
        return "-"
    m = statistics.median(rs.values())
    each = " ".join("%.2f" % v for _, v in sorted(rs.items()))
    return "%.2fx [%s]" % (m, each) if len(rs) > 1 else "%.2fx" % m


def size_name(s):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if s >= n and s % n == 0:
            return "%d %s" % (s // n, unit)
    return "%d B" % s


UNIT = {"latency": "us", "bw": "MB/s", "msgrate": "Mmsg/s", "allreduce": "us"}


class Lines(list):
    """A list of output lines that is also the function adding one."""

    def __call__(self, s=""):
        self.append(s)


def goals(val, apps_ok):
    p = Lines()
    p("### The goals of issue 9, same-run ratios (median over rounds [each round])")
    p()
    p("| figure | fastmsg | reference (best of, in each round) | ratio | goal | met |")
    p("|---|---|---|---|---|---|")

    def row(label, where, test, size, fm, refs, op, goal):
        if not any((where, test, size, v) in val for v in [fm] + refs):
            return
        rs, won = ratio_rounds(val, where, test, size, fm, refs)
        refv = [v for v in (med(val, (where, test, size, r)) for r in refs) if v is not None]
        ref = "%s %s" % (fmt(best(refv, test)) if refv else "-", UNIT[test])
        if len(refs) > 1:
            top = max(won, key=won.get) if won else None
            ref += " (%s%s)" % (", ".join(NAMES.get(r, r) for r in refs),
                                "; best: " + NAMES.get(top, top) if top else "")
        else:
            ref += " (%s)" % NAMES.get(refs[0], refs[0])
        met = "-"
        if rs:
            m = statistics.median(rs.values())
            met = "yes" if (m <= goal if op == "<=" else m >= goal) else "no"
        p("| %s | %s %s | %s | %s | %s %.1fx | %s |" % (
            label, fmt(med(val, (where, test, size, fm))), UNIT[test], ref, fmt_ratio(rs), op,
            goal, met))

    mib = 1 << 20
    for mpi, fm, node_lat, node_bw, host_refs in (
            ("Open MPI", "ompi-ofi-fastmsg", ["ompi-vader"], ["ompi-vader", "ompi-ucx"],
             OMPI_HOST_REFS),
            ("MPICH", "mpich-ofi-fastmsg", MPICH_NODE_REFS, MPICH_NODE_REFS, MPICH_HOST_REFS)):
        row("one node: 8 B latency, %s over fastmsg" % mpi, "node", "latency", 8, fm, node_lat,
            "<=", 1.0)
        row("one node: MsgRate 8 B, %s" % mpi, "node", "msgrate", 8, fm, node_lat, ">=", 1.5)
        row("one node: 1 MiB bandwidth, %s" % mpi, "node", "bw", mib, fm, node_bw, ">=", 1.5)
        row("two hosts: 8 B latency, %s" % mpi, "hosts", "latency", 8, fm, host_refs, "<=", 0.8)
        row("two hosts: MsgRate 8 B, %s" % mpi, "hosts", "msgrate", 8, fm, host_refs, ">=", 5.0)
        row("two hosts: 1 MiB bandwidth, one rail, %s" % mpi, "hosts", "bw", mib, fm, host_refs,
            ">=", 1.2)
        if mpi == "Open MPI":
            row("two hosts: 1 MiB bandwidth, two 1 Gbit/s rails / one", "rails", "bw", mib,
                "ompi-ofi-fastmsg-2x1g", ["ompi-ofi-fastmsg-1g"], ">=", 1.9)
    # The applications' goal: LU's time over Open MPI's TCP, with 2 and 4 ranks.
    lu = sorted({k for k in val if len(k) == 6 and k[2] == "lu" and k[5] == "ompi-ofi-fastmsg"})
    for k in lu:
        f, t = val[k], val.get(k[:5] + ("ompi-tcp",), {})
        rs = {r: f[r] / t[r] for r in f if r in t and t[r]}
        m = statistics.median(rs.values()) if rs else None
        p("| apps: LU n=%s, %d ranks, time | %s s | %s s (Open MPI ob1 TCP) | %s | <= 0.8x | %s |"
          % (
            k[3], k[4], fmt(med(val, k)), fmt(med(val, k[:5] + ("ompi-tcp",))), fmt_ratio(rs),
            "no: wrong result" if not apps_ok.get(k, True)
            else "-" if m is None else "yes" if m <= 0.8 else "no"))
    p()
    # Seed 001's question: what MPI costs on top of fastmsg's own API.
    rows = []
    for where in ("node", "hosts"):
        for fm in ("ompi-ofi-fastmsg", "mpich-ofi-fastmsg"):
            rs, _ = ratio_rounds(val, where, "msgrate", 8, fm, ["fastmsg-api"])
            if rs:
                rows.append("| %s | %s | %s Mmsg/s | %s Mmsg/s | %s |" % (
                    where, NAMES[fm], fmt(med(val, (where, "msgrate", 8, fm))),
                    fmt(med(val, (where, "msgrate", 8, "fastmsg-api"))), fmt_ratio(rs)))
    if rows:
        p("Seed 001's question: MsgRate (8 B) of MPI over fastmsg / fastmsg's own API")
        p()
        p("| where | MPI | MPI over fastmsg | fastmsg API | ratio |")
        p("|---|---|---|---|---|")
        p.extend(rows)
        p()
    return p


def figure_table(val, where, title, variants, refs_of, fm):
    keys = sorted({(k[1], k[2]) for k in val if len(k) == 4 and k[0] == where and k[3] in variants},
                  key=lambda k: (["latency", "bw", "msgrate", "allreduce"].index(k[0]), k[1]))
    cols = [v for v in variants if any((where, t, s, v) in val for t, s in keys)]
    if not keys or not cols:
        return []
    p = Lines()
    p("### " + title)
    p("")
    has_fm = fm in cols
    p("| test | size | unit | " + " | ".join(NAMES.get(c, c) for c in cols) +
      (" | fastmsg / reference |" if has_fm else " |"))
    p("|---|---|---|" + "---|" * len(cols) + ("---|" if has_fm else ""))
    for t, s in keys:
        cells = [fmt(med(val, (where, t, s, c))) for c in cols]
        line = "| %s | %s | %s | %s |" % (t, size_name(s), UNIT[t], " | ".join(cells))
        if has_fm:
            rs, _ = ratio_rounds(val, where, t, s, fm, refs_of(t))
            line += " %s |" % fmt_ratio(rs)
        p(line)
    p("")
    return p


def apps_table(val, apps_ok):
    order = ["pi", "mm", "lu"]  # as in seed 004
    keys = sorted({(k[2], k[3]) for k in val if len(k) == 6},
                  key=lambda k: (order.index(k[0]) if k[0] in order else 9, k))
    if not keys:
        return []
    p = Lines()
    p("### Seed 004's applications between two namespace hosts (median seconds; speedup over"
      " one rank)")
    p("")
    p("| app | size | ranks | Open MPI TCP | speedup | Open MPI + fastmsg | speedup |"
      " fastmsg / TCP time |")
    p("|---|---|---|---|---|---|---|---|")
    wrong = []
    for a, s in keys:
        serial = val.get(("apps", "app", a, s, 1, "serial"), {})
        p("| %s | %s | 1 | %s (one rank, no network) | 1.00 | | | |" % (
            a, s, fmt(med(val, ("apps", "app", a, s, 1, "serial")))))
        for n in sorted({k[4] for k in val if len(k) == 6 and k[2] == a and k[3] == s} - {1}):
            cells = []
            for v in ("ompi-tcp", "ompi-ofi-fastmsg"):
                t = val.get(("apps", "app", a, s, n, v), {})
                sp = {r: serial[r] / x for r, x in t.items() if r in serial and x}
                cells += [fmt(med(val, ("apps", "app", a, s, n, v))),
                          "%.2f" % statistics.median(sp.values()) if sp else "-"]
            f = val.get(("apps", "app", a, s, n, "ompi-ofi-fastmsg"), {})
            tcp = val.get(("apps", "app", a, s, n, "ompi-tcp"), {})
            rs = {r: f[r] / tcp[r] for r in f if r in tcp and tcp[r]}
            goal = " (goal for lu: <= 0.8x)" if a == "lu" and rs else ""
            p("| %s | %s | %d | %s | %s | %s | %s | %s%s |" % (
                a, s, n, cells[0], cells[1], cells[2], cells[3], fmt_ratio(rs), goal))
    for k, ok in sorted(apps_ok.items()):
        if not ok:
            wrong.append("%s n=%s, %d ranks, %s" % (k[2], k[3], k[4], k[5]))
    p("")
    if wrong:
        p("**Wrong results** (the application's own check failed): " + "; ".join(wrong))
        p("")
    return p


def main():
    notes, val, apps_ok = load(sys.argv[1])
    out = goals(val, apps_ok)
    ompi_node = ["ompi-vader", "ompi-ucx", "ompi-ofi-shm", "ompi-ofi-tcp", "ompi-ofi-net",
                 "ompi-ofi-udp", "ompi-ofi-fastmsg", "fastmsg-api"]
    mpich_node = ["mpich-shm", "mpich-ucx", "mpich-ofi-tcp", "mpich-ofi-fastmsg", "fastmsg-api"]
    ompi_host = ["ompi-tcp", "ompi-ofi-tcp", "ompi-ofi-net", "ompi-ofi-udp", "ompi-ofi-fastmsg",
                 "fastmsg-api"]
    mpich_host = ["mpich-ucx", "mpich-ofi-tcp", "mpich-ofi-fastmsg", "fastmsg-api"]
    rails = ["ompi-tcp-1g", "ompi-tcp-2x1g", "ompi-ofi-fastmsg-1g", "ompi-ofi-fastmsg-2x1g"]
    out.extend(figure_table(
        val, "node", "One node, Open MPI (medians; reference: ob1+vader, for bandwidth the "
        "better of vader and UCX)", ompi_node,
        lambda t: ["ompi-vader", "ompi-ucx"] if t == "bw" else ["ompi-vader"], "ompi-ofi-fastmsg"))
    out.extend(figure_table(
        val, "node", "One node, MPICH wheel (reference: the best of MPICH's own)", mpich_node,
        lambda t: MPICH_NODE_REFS, "mpich-ofi-fastmsg"))
    out.extend(figure_table(
        val, "hosts", "Two namespace hosts, Open MPI (reference: the best of ob1 TCP and the OFI "
        "MTL over tcp, net, udp)", ompi_host, lambda t: OMPI_HOST_REFS, "ompi-ofi-fastmsg"))
    out.extend(figure_table(
        val, "hosts", "Two namespace hosts, MPICH wheel (reference: the best of ucx over TCP "
        "and ofi tcp)", mpich_host, lambda t: MPICH_HOST_REFS, "mpich-ofi-fastmsg"))
    out.extend(figure_table(
        val, "rails", "Two hosts, rails shaped to 1 Gbit/s (reference: fastmsg over one rail)",
        rails, lambda t: ["ompi-ofi-fastmsg-1g"], "ompi-ofi-fastmsg-2x1g"))
    out.extend(apps_table(val, apps_ok))
    if notes:
        out.append("Notes from the run:")
        out.append("")
        out.extend("- " + n for n in dict.fromkeys(notes))
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
