"""The rails report from bench/rails.sh's JSON lines: the goals of issue 4
as ratios taken within each round (median over rounds, each round in
brackets), then every figure.

usage: rails_report.py RESULTS.jsonl
"""
import json
import statistics
import sys


def load(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    # (round, case, test, transport, direction) -> value
    val = {}
    for r in rows:
        key = (r["round"], r["case"], r["test"], r["transport"], r.get("direction", ""),
               r["size"])
        val[key] = r["value"]
    return rows, val


def bw(val, rnd, case, transport="fastmsg"):
    return val.get((rnd, case, "bw", transport, "", 1 << 20))


def goal_rows(val, rounds):
    def per_round(fn):
        out = []
        for rnd in rounds:
            try:
                v = fn(rnd)
            except TypeError:  # a figure is missing in this round
                continue
            if v is not None:
                out.append(v)
        return out

    def sum_of(rnd, *cases):
        return sum(bw(val, rnd, c) for c in cases)

    def share(rnd, direction, k):
        pairs = [(t, v) for (r, c, test, t, d, s), v in val.items()
                 if r == rnd and c == "multiplex, 1 rail" and d == direction and
                 t.startswith("fastmsg ")]
        total = sum(v for _, v in pairs)
        return sorted(v / total for _, v in pairs)[k] if len(pairs) == 2 else None

    def opposite(rnd, k):
        pairs = sorted(v for (r, c, test, t, d, s), v in val.items()
                       if r == rnd and c == "multiplex, 1 rail" and d == "opposite" and
                       t.startswith("fastmsg "))
        return pairs[k] / bw(val, rnd, "1 rail") if len(pairs) == 2 else None

    return [
        ("1 MiB over 2 rails vs the sum of the single rails",
         per_round(lambda r: bw(val, r, "2 rails") / sum_of(r, "1 rail", "rail 1 alone")),
         ">= 0.97x", 0.97),
        ("1 MiB over 2 rails vs MPTCP over the same 2 rails",
         per_round(lambda r: bw(val, r, "2 rails") / bw(val, r, "2 rails", "mptcp")),
         ">= 1x", 1.0),
        ("1 MiB over 3 rails vs the sum of the single rails",
         per_round(lambda r: bw(val, r, "3 rails") /
                   sum_of(r, "1 rail", "rail 1 alone", "rail 2 alone")),
         ">= 0.97x", 0.97),
        ("1 MiB over 1 Gbit/s + 300 Mbit/s vs the sum of the two",
         per_round(lambda r: bw(val, r, "2 rails, 1 Gbit/s + 300 Mbit/s") /
                   sum_of(r, "1 rail", "rail 1 alone, 300 Mbit/s")),
         ">= 0.95x", 0.95),
        ("two pairs on one rail, same direction: the smaller pair's share of the total",
         per_round(lambda r: share(r, "same", 0)), ">= 0.45 (equal share +-10%)", 0.45),
        ("two pairs on one rail, opposite directions: the slower pair vs one pair alone",
         per_round(lambda r: opposite(r, 0)), "(reported)", None),
    ]


def failover_rows(rows):
    """The failover runs: ms to the remaining rail's full speed, and to both again."""
    out = []
    for case, what in (("failover, down", "set down"),
                       ("failover, blackhole", "dropping everything, link up")):
        runs = [r for r in rows if r["case"] == case and r["value"] >= 0]
        if not runs:
            continue
        hb = runs[0]["heartbeat_ms"]
        down = [r["value"] for r in runs]
        up = [r["rejoin_ms"] for r in runs if r["rejoin_ms"] >= 0]
        out.append((f"rail {what} mid-transfer: ms the transfer stalls before running at "
                    f"the other rail's speed (heartbeat {hb} ms)", down,
                    f"<= {2 * hb} ms (2 heartbeats)",
                    lambda m, hb=hb: m <= 2 * hb))
        if up:
            out.append((f"rail {what}, then back: ms until both rails are used again", up,
                        "(reported)", None))
    return out


def main():
    rows, val = load(sys.argv[1])
    rounds = sorted({r["round"] for r in rows})
    print("### Goals of issue 4 (rails shaped to 1 Gbit/s each with tc tbf)\n")
    print("Each ratio is the median over rounds of figures taken in the same round "
          "(per round in brackets).\n")
    print("| figure | ratio (per round) | goal | |")
    print("|---|---|---|---|")
    for name, ratios, goal, need in goal_rows(val, rounds):
        if not ratios:
            print(f"| {name} | - | {goal} | not measured |")
            continue
        med = statistics.median(ratios)
        each = ", ".join(f"{x:.3f}" for x in ratios)
        verdict = "(reported)" if need is None else ("met" if med >= need else "NOT met")
        print(f"| {name} | {med:.4f} ({each}) | {goal} | {verdict} |")

    for name, vals, goal, ok in failover_rows(rows):
        med = statistics.median(vals)
        each = ", ".join(f"{x:.0f}" for x in vals)
        verdict = "(reported)" if ok is None else ("met" if ok(med) else "NOT met")
        print(f"| {name} | {med:.0f} ms ({each}) | {goal} | {verdict} |")
    speeds = [r for r in rows if r["test"] == "failover" and r["value"] >= 0]
    if speeds:
        print("\nFailover runs (" + ", ".join(r["case"].split(", ")[1] for r in speeds) +
              "): 2 rails " + ", ".join(f"{r['two_rails_MBps']}" for r in speeds) +
              " MB/s before, 1 rail " + ", ".join(f"{r['one_rail_MBps']}" for r in speeds) +
              " MB/s while rail 1 failed, " +
              ", ".join(f"{r['after_up_MBps']}" for r in speeds) + " MB/s after it came back.")

    print("\n### Every figure, median over rounds\n")
    print("| case | test | size | transport | direction | value |")
    print("|---|---|---:|---|---|---:|")
    groups = {}
    for r in rows:
        if r["test"] == "failover":
            continue
        key = (r["case"], r["test"], r["size"], r["transport"], r.get("direction", ""),
               r["unit"])
        groups.setdefault(key, []).append(r["value"])
    for (case, test, size, transport, direction, unit), vs in groups.items():
        print(f"| {case} | {test} | {size} | {transport} | {direction or '-'} | "
              f"{statistics.median(vs):.3f} {unit} |")


main()
