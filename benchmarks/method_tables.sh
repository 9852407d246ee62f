#!/usr/bin/env bash
# The accuracy tables of the method issues on mnist5k (3 seeds each), as in the README.
# Every benchmark skips runs that already completed, so an interrupted call resumes.
#
#   bash benchmarks/method_tables.sh [rebafl|astraea|fedconcat|grpfed|stateful|normalization ...]
#
# With no argument all six run one after the other (several hours on 2 CPU cores);
# two calls with different tables can run side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
SEEDS=${SEEDS:-0,1,2}

rebafl() {
  "$PY" benchmarks/compare_methods.py --name rebafl_mnist5k --seeds "$SEEDS" \
    --methods rebafl,fedavg,fedprox,bsm_fedavg,fedrs,fedlc,fedbabu -- dataset=mnist5k partition=pathological partition.classes_per_client=2 num_clients=20 \
    dropout.p=0.5 num_rounds=50
}
astraea() {
  "$PY" benchmarks/compare_methods.py --name astraea_mnist5k --seeds "$SEEDS" \
    --methods fedavg,astraea_aug,astraea_sched,astraea --extras mediator_kl,client_kl -- +experiment=astraea_mnist5k
}
fedconcat() {
  "$PY" benchmarks/fedconcat_matched.py --partitions c2,dir01 --seeds "$SEEDS"
}
grpfed() {
  "$PY" benchmarks/compare_methods.py --name grpfed_mnist5k --seeds "$SEEDS" \
    --methods fedavg,qffl,afl,lg_fedavg,perfedavg,pfedme,local,grpfed \
    -- +experiment=grpfed_mnist5k
}
# The stateful baselines share the contribution-normalisation set-up, so their
# un-normalised runs are the "original" column of the normalisation table.
stateful() {
  for alpha in 0.1 0.5; do
    "$PY" benchmarks/compare_methods.py --name "stateful_mnist5k_alpha$alpha" --seeds "$SEEDS" \
      --runs "results/normalization_mnist5k/alpha$alpha/none" \
      --methods fedavg,scaffold,feddyn,moon,fednova,fedavgm \
      -- +experiment=contrib_mnist5k "partition.alpha=$alpha" normalize=none
  done
}
normalization() {
  "$PY" benchmarks/normalization_compare.py --alphas 0.1,0.5 --seeds "$SEEDS"
}

tables=("$@")
[ ${#tables[@]} -gt 0 ] || tables=(rebafl astraea fedconcat grpfed stateful normalization)
for table in "${tables[@]}"; do
  echo "== $table ($(date +%H:%M:%S))"
  "$table"
done
