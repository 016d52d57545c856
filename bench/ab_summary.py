#!/usr/bin/env python3
"""Figures of bench/ab.sh, compared round by round.

  ab_summary.py ratio FREE FAULT FREE    one run under AB_LOSS: each row's
      figure under loss over the mean of the loss-free runs on either side
      (as bench/report.py takes the FM_FAULT goal)
  ab_summary.py summary [FILE]           ab.sh's lines (stdin without FILE):
      per row, each tree's median, and the median of the per-round ratios
      of the first tree to the second, with the rounds it was ahead

A run's figures are fmperf's table lines joined by ';'. A row is named by
what comes before its first figure with a decimal point ("1 MiB", "16 KiB
4" in a sweep); its figure is that number and the unit after it. On a noisy
machine two builds are compared by what each round's pair says, since
both saw the same state of the machine; so the summary gives the median
of the pairs' ratios, not the ratio of the medians.
"""
import re
import statistics
import sys

FIGURE = re.compile(r"^-?\d+\.\d+$")


def rows(figures):
    """{row name: (value, unit)} of one run's ';'-joined table lines."""
    out = {}
    for line in figures.split(";"):
        tokens = line.split()
        for i, t in enumerate(tokens):
            if FIGURE.match(t):
                if i > 0:  # a header line has no name before its numbers
                    unit = tokens[i + 1] if i + 1 < len(tokens) else ""
                    out.setdefault(" ".join(tokens[:i]), (float(t), unit))
                break
    return out


def ratio(free1, fault, free2):
    """One line of 'row ratio x (fault V unit, loss-free A / B)' per row."""
    a, f, b = rows(free1), rows(fault), rows(free2)
    parts = []
    for name, (v, unit) in f.items():
        base = [r[name][0] for r in (a, b) if name in r and r[name][0] > 0]
        if base:
            mean = sum(base) / len(base)
            parts.append(f"{name} {v / mean:.3f} x (under loss {v:g} {unit}, loss-free "
                         + " / ".join(f"{x:g}" for x in base) + ")")
    return ";".join(parts)


def summary(lines):
    """The comparison, from lines 'round R TREE: figures'."""
    runs = {}  # tree -> round -> rows
    order = []
    for line in lines:
        m = re.match(r"^round (\d+) (.+?):(.*)$", line.rstrip("\n"))
        if not m:
            continue
        rnd, tree, figures = int(m.group(1)), m.group(2), m.group(3)
        if tree not in runs:
            runs[tree] = {}
            order.append(tree)
        runs[tree][rnd] = rows(figures)
    if len(order) != 2:
        return [f"summary: {len(order)} trees in the input, not 2"]
    here, other = order
    names = []
    for r in runs[here].values():
        names += [n for n in r if n not in names]
    out = [f"summary: {here} against {other}, per row: medians, then the median of "
           "the per-round ratios (first / second) and the rounds in which the first "
           "had the larger figure"]
    for name in names:
        mine = [r[name][0] for r in runs[here].values() if name in r]
        theirs = [r[name][0] for r in runs[other].values() if name in r]
        pairs = [(runs[here][k][name][0], runs[other][k][name][0]) for k in runs[here]
                 if k in runs[other] and name in runs[here][k] and name in runs[other][k]]
        pairs = [(a, b) for a, b in pairs if b > 0]
        unit = next(r[name][1] for r in runs[here].values() if name in r)
        if not pairs:
            continue
        ratios = [a / b for a, b in pairs]
        out.append(f"  {name}: {statistics.median(mine):g} against "
                   f"{statistics.median(theirs):g} {unit}; ratio median "
                   f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}), "
                   f"first larger in {sum(a > b for a, b in pairs)} of {len(pairs)} rounds")
    return out


def main(argv):
    if len(argv) == 5 and argv[1] == "ratio":
        print(ratio(argv[2], argv[3], argv[4]))
        return 0
    if argv[1:2] == ["summary"] and len(argv) <= 3:
        try:
            with (open(argv[2]) if len(argv) == 3 else sys.stdin) as f:
                print("\n".join(summary(f)))
        except OSError as e:
            print(f"ab_summary.py: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
            return 1
        return 0
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
