"""Reads an fmperf --trace of a 2-rail transfer during which one rail failed
and came back, and prints a JSON line: how long after the rail failed the
transfer stalled (until it ran at the remaining rail's speed), and how long
after the rail came back the transfer used both again.

usage: rails_failover.py TRACE T_DOWN_NS T_UP_NS ROUND HEARTBEAT_MS HOW
"""
import json
import statistics
import sys


def main():
    trace, t_down, t_up, rnd, hb, how = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                         int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    win = [tuple(float(x) for x in line.split()) for line in open(trace) if line.strip()]
    before = [v for t, v in win if t < t_down]
    one = [v for t, v in win if t_down + 5e8 < t < t_up]  # settled on one rail
    after = [v for t, v in win if t > t_up + 1e9]
    if not before or not one:
        print(json.dumps({"round": rnd, "case": "failover, " + how, "test": "failover",
                          "transport": "fastmsg", "size": 0, "value": -1, "unit": "ms",
                          "note": "the transfer ended too soon"}))
        return
    two_speed, one_speed = statistics.median(before), statistics.median(one)
    # The stall ends with the last window before the rail came back that ran
    # at less than half the remaining rail's speed; both rails are used
    # again from the first of three windows in a row at 90 % of two rails'
    # speed (single windows wander by a few percent either way).
    back = max((t for t, v in win if t_down < t < t_up and v < 0.5 * one_speed),
               default=t_down)
    later = [(t, v) for t, v in win if t > t_up]
    rejoin = next((later[i][0] for i in range(len(later) - 2)
                   if all(v >= 0.9 * two_speed for _, v in later[i:i + 3])), None)
    row = {"round": rnd, "case": "failover, " + how, "test": "failover", "transport": "fastmsg",
           "size": 0, "unit": "ms", "heartbeat_ms": hb,
           "two_rails_MBps": round(two_speed, 1), "one_rail_MBps": round(one_speed, 1),
           "after_up_MBps": round(statistics.median(after), 1) if after else None,
           "value": round((back - t_down) / 1e6, 1),
           "rejoin_ms": round((rejoin - t_up) / 1e6, 1) if rejoin else -1,
           "t_down": t_down, "t_up": t_up}
    print(json.dumps(row))


main()
