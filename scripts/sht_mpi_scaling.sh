#!/usr/bin/env bash
# Strong scaling of the distributed spherical harmonic transforms on CPU (issue 14): 1, 2 and 3 MPI processes
# on one node, each with the node's cores shared among them, for each preset in PRESETS ("ci" by default)
# and both transforms. Every record is checked against the single process on rank 0 and carries the
# all-to-all's share of the time. BACKEND (default cpu) is what each process runs on (`sht-mpi --backend`).
# Usage: PRESETS="ci planck" REPEATS=3 bash scripts/sht_mpi_scaling.sh OUT.jsonl
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/env.sh"
out="${1:?usage: sht_mpi_scaling.sh OUT.jsonl}"
cargo build --quiet --release --features "$ASTROPORT_FEATURES" --manifest-path "$root/Cargo.toml"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
for preset in ${PRESETS:-ci}; do
  for transform in alm2map map2alm; do
    for np in 1 2 3; do
      mpirun --oversubscribe --bind-to none -np "$np" "$root/target/release/astroport" sht-mpi --preset "$preset" \
        --transform "$transform" --warmup "${WARMUP:-1}" --repeats "${REPEATS:-3}" --backend "${BACKEND:-cpu}" \
        --out "$out" > /dev/null
    done
  done
done
python3 - "$out" <<'PY'
import json, sys
print("| preset | transform | backend | ranks | threads/rank | median | Legendre | all-to-all | rings | all-to-all share | vs 1 process |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    ms = lambda k: f"{r[k]*1e3:.2f} ms"
    print(f"| {r['preset']} | {r['transform']} | {r.get('rank0_device', 'cpu')} | {r['ranks']} | {r['threads_per_rank']} | {ms('median_total_s')} | "
          f"{ms('median_legendre_s')} | {ms('median_all_to_all_s')} | {ms('median_rings_s')} | "
          f"{r['all_to_all_share']*100:.1f} % | {r['max_rel_vs_single_process']:.1e} |")
PY
