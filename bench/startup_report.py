"""The start-up table from bench/startup.sh's JSON lines.

usage: startup_report.py RESULTS.jsonl "2 8 32 64" REPS
"""
import json
import sys


def main():
    rows = [json.loads(line) for line in open(sys.argv[1])]
    sizes = [int(s) for s in sys.argv[2].split()]
    labels = list(dict.fromkeys(r["launcher"] for r in rows))
    val = {(r["launcher"], r["ranks"]): r["value"] for r in rows}
    print("Job start-up: launch to exit, fm_init + fm_finalize (or MPI_Init + MPI_Finalize) "
          f"in every rank; median of {sys.argv[3]} runs, ms\n")
    print("| launcher | " + " | ".join(f"{n} ranks" for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for label in labels:
        cells = [f"{val[(label, n)]:.0f}" if (label, n) in val else "-" for n in sizes]
        print(f"| {label} | " + " | ".join(cells) + " |")


main()
