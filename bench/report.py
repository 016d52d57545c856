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


ORDER = ["fastmsg", "fastmsg (in place)", "fastmsg-net", "fastmsg-net-drop1", "fastmsg-net-ref",
         "raw-2lines",
         "raw-1line", "raw-spsc", "tcp", "udp", "tcp-net", "udp-net", "iperf3-tcp", "openmpi-vader", "openmpi-ucx",
         "mpich"]


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


def round_values(rows, test, size, label, ranks=2, recv="copy"):
    """{round: value} of one figure in the goal rounds."""
    out = {}
    for r in rows:
        if ("round" not in r or r["test"] != test or r["size"] != size or "loss" in r
                or "port" in r):
            continue
        if r["transport"] != label or r.get("ranks", 2) != ranks:
            continue
        if label == "fastmsg" and r.get("recv", "copy") != recv:
            continue
        out[r["round"]] = r["value"]
    return out


def fault_rounds(rows):
    """{round: (goodput under FM_FAULT, loss-free goodput)} at 1 MiB. The
    loss-free figure is the mean of the runs just before and just after the
    FM_FAULT run (fastmsg-net, fastmsg-net-ref) where both exist: the VM's
    speed drifts by more than the loss costs within a minute."""
    drop = round_values(rows, "bw", 1 << 20, "fastmsg-net-drop1")
    before = round_values(rows, "bw", 1 << 20, "fastmsg-net")
    after = round_values(rows, "bw", 1 << 20, "fastmsg-net-ref")
    out = {}
    for k in sorted(drop):
        free = [v[k] for v in (before, after) if k in v]
        if free:
            out[k] = (drop[k], sum(free) / len(free))
    return out


def goal_row(rows, name, test, size, ref, refname, goal, limit, lower_better, ranks=2,
             recv="copy"):
    ours = round_values(rows, test, size, "fastmsg", ranks, recv)
    theirs = round_values(rows, test, size, ref, ranks)
    common = sorted(set(ours) & set(theirs))
    if not common:
        return f"| {name} | - | {refname}: - | - | {goal} | not measured |"
    ratios = [ours[k] / theirs[k] for k in common]
    r = statistics.median(ratios)
    met = r <= limit if lower_better else r >= limit
    per = ", ".join(f"{ours[k]:.3g}/{theirs[k]:.3g}" for k in common)
    return (f"| {name} | {statistics.median(ours[k] for k in common):.3f} | {refname}: "
            f"{statistics.median(theirs[k] for k in common):.3f} | {r:.2f}x ({per}) | {goal} | "
            f"{'met' if met else 'NOT met'} |")


def goals(rows, res):
    out = ["### Goals of issue 2", "",
           "Each ratio is the median over goal rounds of fastmsg / reference, both "
           "measured back to back in the same round (values per round in brackets).", "",
           "| figure | fastmsg | reference | ratio (per round) | goal | |",
           "|---|---|---|---|---|---|"]
    out.append(goal_row(rows, "8 B one-way latency (us)", "latency", 8, "raw-2lines",
                        "raw ping-pong, a line per direction", "<= 1.2x", 1.2, True))
    out.append(goal_row(rows, "8 B one-way latency (us)", "latency", 8, "openmpi-vader",
                        "Open MPI vader", "<= 0.59x (1.7x better)", 1 / 1.7, True))
    out.append(goal_row(rows, "MsgRate 8 B (M msg/s)", "msgrate", 8, "openmpi-vader",
                        "Open MPI vader", ">= 3x", 3, False))
    for size in (1 << 20, 4 << 20):
        out.append(goal_row(rows, f"bandwidth {human(size)}, receiver copies (MB/s)", "bw",
                            size, "openmpi-ucx", "UCX (Open MPI pml ucx)", ">= 1x", 1, False))
        out.append(goal_row(rows, f"bandwidth {human(size)}, in place (MB/s)", "bw", size,
                            "openmpi-ucx", "UCX (Open MPI pml ucx), copying", "(reported)", 0,
                            False, recv="in-place"))
    out.append(goal_row(rows, "ring of 8 B exchanges, 4 ranks on 2 cores (us/round)", "ring",
                        8, "openmpi-vader", "Open MPI vader, same pattern", "<= 1x", 1, True,
                        ranks=4))
    idle = res.get("idle", 8, "fastmsg")
    state = round_values(rows, "latency", 8, "raw-2lines")
    out.append(f"| idle rank in fm_wait (% of a CPU) | {idle if idle is not None else '-'} | - "
               f"| - | < 5 % | {'met' if idle is not None and idle < 5 else 'not measured' if idle is None else 'NOT met'} |")
    out += ["", "Raw ping-pong per round (tells the machine's state): " +
            ", ".join(f"{v:.3f} us" for _, v in sorted(state.items())), ""]
    return out


def net_goals(rows):
    out = ["### Goals of issue 3 (network path, two namespaces over veth)", "",
           "Same method: each ratio is the median over rounds of fastmsg / reference measured "
           "back to back (values per round in brackets).", "",
           "| figure | fastmsg | reference | ratio (per round) | goal | |",
           "|---|---|---|---|---|---|"]

    def row(name, test, size, ours, ref, refname, goal, limit, lower, port=None):
        if port:
            a = port_values(rows, test, size, ours, port)
            b = port_values(rows, test, size, ref, port)
        else:
            a = round_values(rows, test, size, ours)
            b = round_values(rows, test, size, ref)
        common = sorted(set(a) & set(b))
        if not common:
            return f"| {name} | - | {refname}: - | - | {goal} | not measured |"
        ratios = [a[k] / b[k] for k in common]
        r = statistics.median(ratios)
        met = r <= limit if lower else r >= limit
        per = ", ".join(f"{a[k]:.3g}/{b[k]:.3g}" for k in common)
        return (f"| {name} | {statistics.median(a[k] for k in common):.3f} | {refname}: "
                f"{statistics.median(b[k] for k in common):.3f} | {r:.2f}x ({per}) | {goal} | "
                f"{'met' if met else 'NOT met'} |")

    out.append(row("8 B one-way latency (us)", "latency", 8, "fastmsg-net", "udp-net",
                   "raw UDP ping-pong, busy-polled", "<= 1.15x", 1.15, True))
    out.append(row("MsgRate 8 B (M msg/s)", "msgrate", 8, "fastmsg-net", "udp-net",
                   "raw UDP, no batching", "(UCX over TCP: 0.19 measured by the issue; goal 10x = 1.9)",
                   0, False))
    out.append(row("bandwidth 1 MiB (MB/s)", "bw", 1 << 20, "fastmsg-net", "iperf3-tcp",
                   "iperf3, one TCP stream", ">= 1x", 1, False))
    out.append(row("connect per message, 128 B (us)", "connect", 128, "fastmsg-net", "tcp-net",
                   "TCP connect/send/recv/close", "<= 0.33x (3x faster)", 1 / 3, True))
    out.append(row("connect per message, 4 KiB (us)", "connect", 4096, "fastmsg-net", "tcp-net",
                   "TCP connect/send/recv/close", "<= 0.33x (3x faster)", 1 / 3, True))
    fault = fault_rounds(rows)
    name = "goodput with FM_FAULT=drop=0.01,on=send, 1 MiB (MB/s)"
    if fault:
        r = statistics.median(d / f for d, f in fault.values())
        per = ", ".join(f"{d:.3g}/{f:.3g}" for d, f in fault.values())
        out.append(f"| {name} | {statistics.median(d for d, _ in fault.values()):.3f} | "
                   f"loss-free, runs before and after: "
                   f"{statistics.median(f for _, f in fault.values()):.3f} | {r:.2f}x ({per}) | "
                   f">= 0.9x | {'met' if r >= 0.9 else 'NOT met'} |")
    else:
        out.append(f"| {name} | - | loss-free: - | - | >= 0.9x | not measured |")
    for p in (0.01, 0.001):
        a = loss_values(rows, "fastmsg-net", p)
        b = loss_free_around(rows, "fastmsg-net", p)
        name = f"goodput with {p * 100:g} % loss on the link, 1 MiB (MB/s)"
        common = sorted(set(a) & set(b))
        if not common:
            out.append(f"| {name} | - | loss-free: - | - | >= 0.9x | not measured |")
            continue
        r = statistics.median(a[k] / b[k] for k in common)
        per = ", ".join(f"{a[k]:.3g}/{b[k]:.3g}" for k in common)
        out.append(f"| {name} | {statistics.median(a[k] for k in common):.3f} | loss-free, "
                   f"same link settings, runs before and after: "
                   f"{statistics.median(b[k] for k in common):.3f} | "
                   f"{r:.2f}x ({per}) | >= 0.9x | {'met' if r >= 0.9 else 'NOT met'} |")
    for port in sorted({r["port"] for r in rows if "port" in r}):
        rate, buf = port.split("/")  # tc's units: 1gbit, 64kb
        rate = rate.replace("gbit", " Gbit/s").replace("mbit", " Mbit/s")
        where = f"through a {rate} port with a {buf.replace('kb', ' KB')} buffer"
        out.append(row(f"goodput {where}, 1 MiB (MB/s)", "bw", 1 << 20, "fastmsg-net",
                       "tcp-net", "TCP (CUBIC), same port", ">= 0.95x", 0.95, False, port))
        for size in (1 << 16, 1 << 20):
            out.append(row(f"{human(size)} one-way latency {where} (us)", "latency", size,
                           "fastmsg-net", "tcp-net", "TCP (CUBIC), same port", "<= 1x", 1, True,
                           port))
    return out + [""]


def port_values(rows, test, size, label, port):
    """{round: value} of one figure in the goal rounds' runs through a
    shaped port (bench/net.sh's shallow port)."""
    return {r["round"]: r["value"] for r in rows
            if r.get("port") == port and "round" in r and r["test"] == test
            and r["size"] == size and r["transport"] == label}


LOSS_LABELS = ["fastmsg-net", "tcp-net", "iperf3-tcp"]


def loss_values(rows, label, p):
    """{round: MB/s} of 1 MiB bandwidth with real loss p on the link."""
    return {r["round"]: r["value"] for r in rows
            if r.get("loss_on") == "link" and r.get("loss") == p and r["test"] == "bw"
            and r["transport"] == label and r["size"] == 1 << 20 and "round" in r}


def loss_free_around(rows, label, p):
    """{round: loss-free MB/s that the run with loss p is compared with}: the
    mean of the loss-free runs just before and just after it where the
    benchmark made both (rows labelled label + "-ref", "after": the loss
    rate of the run they followed; bench/net.sh runs the rates in rising
    order), else the round's one loss-free run. The VM's speed drifts
    within a minute by more than loss costs."""
    base = loss_values(rows, label, 0)
    refs = {(r["round"], r["after"]): r["value"] for r in rows
            if r.get("loss_on") == "link" and r.get("loss") == 0 and "after" in r
            and r["test"] == "bw" and r["transport"] == label + "-ref" and "round" in r}
    earlier = [q for q in sorted({r["loss"] for r in rows if r.get("loss_on") == "link"})
               if 0 < q < p]
    out = {}
    for k, v in base.items():
        before = refs.get((k, earlier[-1]), v) if earlier else v
        around = [x for x in (before, refs.get((k, p))) if x is not None]
        out[k] = sum(around) / len(around)
    return out


def loss_ratios(rows, label):
    """{p: (median MB/s, median ratio to the loss-free figure around it
    (loss_free_around), [per-round ratios])} for one transport's runs with
    real loss."""
    rates = sorted({r["loss"] for r in rows if r.get("loss_on") == "link"})
    out = {}
    for p in rates:
        v = loss_values(rows, label, p)
        base = loss_free_around(rows, label, p)
        common = sorted(set(v) & set(base))
        if not common:
            continue
        ratios = [v[k] / base[k] for k in common]
        out[p] = (statistics.median(v[k] for k in common), statistics.median(ratios), ratios)
    return out


def loss_table(rows):
    """Goodput by real loss rate on the link, as a ratio to the loss-free
    figure of the same round and link settings."""
    by = {lab: loss_ratios(rows, lab) for lab in LOSS_LABELS}
    rates = sorted({p for d in by.values() for p in d})
    if not rates:
        return []
    cc = sorted({r.get("tcp_cc", "") for r in rows if r.get("loss_on") == "link"} - {""})
    out = ["### Goodput by loss rate (1 MiB messages, random loss on the link)", "",
           "Loss made by an ingress BPF filter on both ends of the veth (data and acks), "
           "gso_max_segs 1 so that it drops packets, not GSO aggregates; TCP's congestion "
           f"control: {', '.join(cc) or 'default'}. Each cell: median MB/s, and the median "
           "over rounds of its ratio to the loss-free figure of the same round (fastmsg: "
           "the mean of loss-free runs just before and after it).", "",
           "| transport | " + " | ".join(f"{p * 100:g} % loss" for p in rates) + " |",
           "|---|" + "---|" * len(rates)]
    for lab in LOSS_LABELS:
        if not by[lab]:
            continue
        cells = [f"{by[lab][p][0]:.1f} MB/s ({by[lab][p][1]:.2f}x)" if p in by[lab] else "-"
                 for p in rates]
        out.append(f"| {lab} | " + " | ".join(cells) + " |")
    fault = fault_rounds(rows)
    if fault:
        r = statistics.median(d / f for d, f in fault.values())
        out += ["", f"For comparison, 1 % loss injected by fastmsg itself (FM_FAULT=drop=0.01,on=send, "
                f"GSO on): {statistics.median(d for d, _ in fault.values()):.1f} MB/s, {r:.2f}x "
                "loss-free (runs just before and after)."]
    return out + [""]


def sweep_table(rows):
    """Seed 002's iperf figure: bandwidth by message length (rows) and window."""
    sw = [r for r in rows if r["test"] == "sweep" and "round" not in r]
    if not sw:
        return []
    out = []
    for label in ordered({r["transport"] for r in sw}):
        mine = [r for r in sw if r["transport"] == label]
        wins = sorted({r["window"] for r in mine})
        out += [f"### Sweep, {label}: bandwidth by message length and messages in flight", "",
                "| length | " + " | ".join(f"W={w}" for w in wins) + " |",
                "|---|" + "---|" * len(wins)]
        for size in sorted({r["size"] for r in mine}):
            cells = []
            for w in wins:
                v = [r["value"] for r in mine if r["size"] == size and r["window"] == w]
                cells.append(fmt(statistics.median(v), "MB/s") if v else "-")
            out.append(f"| {human(size)} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def incast_rounds(rows, senders, metric):
    """{round: (fastmsg, tcp)} of one metric of bench/incast.sh's runs."""
    by = {}
    for r in rows:
        if (r.get("test") == "incast" and r.get("senders") == senders
                and r.get("metric") == metric and "round" in r):
            by.setdefault(r["round"], {})[r["transport"]] = r["value"]
    return {k: (v["fastmsg"], v["tcp"]) for k, v in sorted(by.items())
            if "fastmsg" in v and "tcp" in v}


def incast_table(rows):
    """Issue 11's incast goals, per count of senders: same-round ratios
    against kernel TCP (CUBIC) through the same shaped port."""
    counts = sorted({r["senders"] for r in rows if r.get("test") == "incast" and "round" in r})
    if not counts:
        return []
    out = ["### Incast through a 1 Gbit/s port (bench/incast.sh), against kernel TCP (CUBIC)", "",
           "N senders, each in its own namespace, stream 64 KiB messages into one receiver "
           "while a victim ping-pongs 8 B with it through the same port. Each cell: the median "
           "over rounds, per round in brackets.", "",
           "| senders | goodput, fastmsg / TCP (goal >= 0.95x) | min/max share, fastmsg "
           "(goal >= 0.8) / TCP | victim p99, fastmsg / TCP (goal <= 0.5x) | drops at the port, "
           "fastmsg / TCP | port queue p50 / p99, fastmsg; TCP |",
           "|---|---|---|---|---|---|"]

    def ratio(pairs):
        r = statistics.median(a / b for a, b in pairs.values())
        return f"{r:.3f}x ({', '.join(f'{a / b:.2f}' for a, b in pairs.values())})"

    def med(pairs, i):
        return statistics.median(v[i] for v in pairs.values())

    for n in counts:
        good, share, p99 = (incast_rounds(rows, n, m) for m in ("goodput", "minmax", "victim_p99"))
        drops, q50, q99 = (incast_rounds(rows, n, m)
                           for m in ("port_drops", "port_backlog_p50", "port_backlog_p99"))
        cells = [ratio(good) if good else "-",
                 f"{med(share, 0):.2f} / {med(share, 1):.2f}" if share else "-",
                 ratio(p99) if p99 else "-",
                 f"{med(drops, 0):.2f} % / {med(drops, 1):.2f} %" if drops else "-",
                 f"{med(q50, 0) / 1000:.0f} / {med(q99, 0) / 1000:.0f} KB; "
                 f"{med(q50, 1) / 1000:.0f} / {med(q99, 1) / 1000:.0f} KB" if q50 and q99 else "-"]
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    return out + [""]


def sim_table(rows):
    sim = sorted((r for r in rows if r.get("test") == "incast_sim"),
                 key=lambda r: (r.get("cpu_wait_us", 0), r["senders"]))
    if not sim:
        return []
    r0 = sim[0]
    md = [f"### Incast simulated over the engine (tests/incast_sim): a {r0['rate_mbit']:.0f} "
          f"Mbit/s port, {r0['buffer'] // 1000} KB buffer, {r0['ms']} ms", "",
          "Between turns at a CPU senders wait 0 to twice the second column, at random "
          "(0: always running, as on a host with a CPU each).", "",
          "The receiver's engine CPU is the real time its input and output took over the "
          "simulated time: the share of a core a real receiver of so many senders would spend "
          "on them. A sender's wake-ups are the times its engine ran, per ms: a sender "
          "waiting for its turn sleeps.", "",
          "| senders | CPU wait (us) | goodput / port | queue mean / max (KB) | drops "
          "| min/max share | starved | victim p50 / p99 | receiver's engine CPU "
          "| a sender's wake-ups / ms |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sim:
        cpu = r.get("receiver_cpu_pct")
        wake = r.get("sender_wakeups_per_ms")
        md.append(f"| {r['senders']} | {r.get('cpu_wait_us', 0)} | {r['goodput']:.3f} | "
                  f"{r['queue_kb']:.0f} / "
                  f"{r['queue_max_kb']:.0f} | {r['drops_pct']:.2f} % | {r['minmax']:.2f} | "
                  f"{r['starved']} | {r['victim_p50_us']:.0f} / {r['victim_p99_us']:.0f} us | "
                  f"{'-' if cpu is None else f'{cpu:.1f} %'} | "
                  f"{'-' if wake is None else f'{wake:.2f}'} |")
    return md + [""]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--title", default="Benchmark results")
    ap.add_argument("--command", default="bash bench/run.sh")
    ap.add_argument("--machine", default="")
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = load(a.results)
    res = Results([r for r in rows if "round" not in r and r.get("test") != "incast_sim"])
    md = [f"## {a.title}", "", f"Command: `{a.command}`", ""]
    if a.machine:
        md += [a.machine, ""]
    md += goals(rows, res)
    if any(r.get("transport", "").startswith("fastmsg-net") for r in rows):
        md += net_goals(rows)
    md += table(res, "latency", "One-way latency (ping-pong / 2), median")
    md += table(res, "bw", "Bandwidth, median of acknowledged windows of 64 messages "
                "(receiver copies each message into its own buffer unless 'in place')")
    md += table(res, "msgrate", "MsgRate: rank 0 only sends, rank 1 only receives")
    md += table(res, "ring", "Ring of 8 B exchanges, 4 ranks on 2 cores (time per round)", ranks=4)
    md += table(res, "ring", "Ring of 8 B exchanges, 8 ranks on 2 cores (time per round)", ranks=8)
    md += table(res, "allreduce", "8 B MPI_Allreduce, 4 ranks on 2 cores (for reference)", ranks=4)
    md += table(res, "idle", "CPU share of a rank blocked in fm_wait")
    md += table(res, "connect", "Connection per message (seed 002): open, send, receive, close")
    md += sweep_table(rows)
    md += loss_table(rows)
    md += incast_table(rows)
    md += sim_table(rows)
    text = "\n".join(md) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
