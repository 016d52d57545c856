#!/usr/bin/env bash
# Job start-up cost: the wall time from launching a job to every rank being
# past fm_init and back out of fm_finalize (the launcher's exit), for 2, 8,
# 32 and 64 ranks on this machine, under each launcher: fmrun, MPICH's
# mpiexec.hydra, srun with the pmi2 and pmix plugins (a one-machine Slurm
# started for the run), Open MPI's mpirun; and MPI_Init + MPI_Finalize under
# Open MPI's mpirun and MPICH's mpiexec for comparison, and each launcher
# running /bin/true (its own share). Medians of REPS runs.
#   bench/startup.sh [--quick]        (REPS=N, SIZES="2 8 32 64")
# Results: build/bench/startup.jsonl, table: build/bench/startup.md.
set -u
cd "$(dirname "$0")/.."
reps=${REPS:-7}
sizes=${SIZES:-"2 8 32 64"}
[ "${1:-}" = "--quick" ] && { reps=3; sizes="2 8"; }
bash scripts/deps.sh bench || exit 1
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
  cmake --build build/release >/dev/null || exit 1
out=build/bench
mkdir -p "$out"
fm_prog=$out/startup_fm
cc -O2 -Iinclude bench/startup_fm.c -o "$fm_prog" -Lbuild/release/src -Wl,-rpath,"$PWD/build/release/src" \
  -lfastmsg || exit 1
mpicc.openmpi -O2 bench/startup_mpi.c -o "$out/startup_mpi.openmpi" || exit 1
mpicc.mpich -O2 bench/startup_mpi.c -o "$out/startup_mpi.mpich" || exit 1
FMRUN=$PWD/build/release/tools/fmrun

slurm=0
source scripts/slurm_local.sh
sdir=$(mktemp -d)
trap 'slurm_local_stop; rm -rf "$sdir"' EXIT
if slurm_local_start "$sdir"; then
  slurm=1
else
  echo "note: no Slurm here ($slurm_local_error): the srun rows are left out" >&2
fi

ompi=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none)
# label|program|command prefix (the rank count follows -n)
cases=(
  "fastmsg, fmrun (PMI-1)|$fm_prog|$FMRUN --bind-to none -n"
  "fastmsg, mpiexec.hydra (PMI-1)|$fm_prog|mpiexec.hydra -n"
  "fastmsg, mpiexec.hydra (PMI-2)|$fm_prog|env FM_BOOTSTRAP=pmi2 mpiexec.hydra -n"
  "fastmsg, Open MPI mpirun (PMIx)|$fm_prog|${ompi[*]} -n"
  "MPI_Init, Open MPI mpirun|$out/startup_mpi.openmpi|${ompi[*]} -n"
  "MPI_Init, MPICH mpiexec|$out/startup_mpi.mpich|mpiexec.mpich -n"
)
if [ $slurm -eq 1 ]; then
  cases+=("fastmsg, srun --mpi=pmi2 (PMI-2)|$fm_prog|srun --mpi=pmi2 -O -n"
          "fastmsg, srun --mpi=pmix (PMIx)|$fm_prog|srun --mpi=pmix -O -n")
fi
# What each launcher costs by itself: the same job of /bin/true. (Open MPI
# 4.1's mpirun hangs now and then on 32 ranks of /bin/true that exit before
# it has registered them, so it has no such row.)
cases+=("/bin/true, fmrun|/bin/true|$FMRUN --bind-to none -n"
        "/bin/true, mpiexec.hydra|/bin/true|mpiexec.hydra -n")
[ $slurm -eq 1 ] && cases+=("/bin/true, srun|/bin/true|srun -O -n")

jsonl=$out/startup.jsonl
: >"$jsonl"
now() { date +%s%N; }
for c in "${cases[@]}"; do
  IFS='|' read -r label prog launch <<<"$c"
  for n in $sizes; do
    times=()
    for r in $(seq "$reps"); do
      t0=$(now)
      if ! timeout 300 $launch "$n" "$prog" >/dev/null 2>"$out/startup.err"; then
        echo "FAILED: $label, $n ranks: $(head -c 300 "$out/startup.err")" >&2
        times=()
        break
      fi
      times+=($((($(now) - t0) / 1000)))
    done
    [ ${#times[@]} -gt 0 ] || continue
    med=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    printf '{"test": "startup", "launcher": "%s", "ranks": %d, "value": %.1f, "unit": "ms", "reps": %d}\n' \
      "$label" "$n" "$(awk -v m="$med" 'BEGIN {print m / 1000}')" "$reps" >>"$jsonl"
    echo "+ $label, $n ranks: median $((med / 1000)) ms" >&2
  done
done
python3 bench/startup_report.py "$jsonl" "$sizes" "$reps" >"$out/startup.md"
cat "$out/startup.md"
