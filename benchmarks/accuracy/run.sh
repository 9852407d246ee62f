#!/usr/bin/env bash
# Every method on its paper's set-up on mnist5k (3 seeds each): one table per paper in
# results/<table>/table.md, then one report over all runs in results/accuracy/report.md.
# Every benchmark skips runs that already completed, so an interrupted call resumes.
#
#   bash benchmarks/accuracy/run.sh [rebafl|astraea|fedconcat|grpfed|stateful|normalization
#                                    |stability|grpfed_sensitivity|temperature|curvature
#                                    |distillation|regularisers|fedloge_personal ...]
#
# With no argument all of them run one after the other (more than a day on 2 CPU cores);
# two calls with different tables can run side by side.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
SEEDS=${SEEDS:-0,1,2}
# The grpfed, stateful and normalization tables run in one process per run
# (runtime=in_process: the same strategy and clients, the same results as the
# simulation, one core each), JOBS runs at a time. RUNTIME=simulation runs them
# through Flower's simulation engine instead (about half the throughput on 2 cores).
RUNTIME=${RUNTIME:-in_process}
JOBS=${JOBS:-$(nproc)}

rebafl() {
  "$PY" benchmarks/accuracy/compare_methods.py --name rebafl_mnist5k --seeds "$SEEDS" \
    --methods rebafl,fedavg,fedprox,bsm_fedavg,fedrs,fedlc,fedbabu -- dataset=mnist5k partition=pathological partition.classes_per_client=2 num_clients=20 \
    dropout.p=0.5 num_rounds=50
}
astraea() {
  "$PY" benchmarks/accuracy/compare_methods.py --name astraea_mnist5k --seeds "$SEEDS" \
    --methods fedavg,astraea_aug,astraea_sched,astraea --extras mediator_kl,client_kl -- +experiment=astraea_mnist5k
}
fedconcat() {
  "$PY" benchmarks/accuracy/fedconcat_matched.py --partitions c2,dir01 --seeds "$SEEDS"
}
grpfed() {
  "$PY" benchmarks/accuracy/compare_methods.py --name grpfed_mnist5k --seeds "$SEEDS" \
    --methods fedavg,qffl,afl,lg_fedavg,perfedavg,pfedme,local,grpfed --jobs "$JOBS" \
    -- +experiment=grpfed_mnist5k "runtime=$RUNTIME"
}
# The stateful baselines share the contribution-normalisation set-up, so their
# un-normalised runs are the "original" column of the normalisation table.
stateful() {
  for alpha in 0.1 0.5; do
    "$PY" benchmarks/accuracy/compare_methods.py --name "stateful_mnist5k_alpha$alpha" --seeds "$SEEDS" \
      --runs "results/normalization_mnist5k/alpha$alpha/none" \
      --methods fedavg,scaffold,feddyn,moon,fednova,fedavgm --jobs "$JOBS" \
      -- +experiment=contrib_mnist5k "partition.alpha=$alpha" normalize=none "runtime=$RUNTIME"
    # SCAFFOLD's SGD control rule under Adam, beside the default (auto: gradient_mean under Adam)
    "$PY" benchmarks/accuracy/compare_methods.py --name "stateful_mnist5k_alpha${alpha}_scaffold_option2_normalised" \
      --seeds "$SEEDS" --methods scaffold --jobs "$JOBS" \
      -- +experiment=contrib_mnist5k "partition.alpha=$alpha" normalize=none "runtime=$RUNTIME" \
      method.client.control=option2_normalised
  done
}
normalization() {
  "$PY" benchmarks/accuracy/normalization_compare.py --alphas 0.1,0.5 --seeds "$SEEDS" --jobs "$JOBS" \
    -- +experiment=contrib_mnist5k "runtime=$RUNTIME"
}

# SCAFFOLD, FedDyn, MOON, FedNova, FedAvgM, FedProx and FedAvg under SGD with and without
# momentum (the settings most non-IID benchmark papers use).
stability() {
  "$PY" benchmarks/accuracy/stability.py --seeds "$SEEDS" --jobs "$JOBS"
}
grpfed_sensitivity() {
  "$PY" benchmarks/accuracy/grpfed_sensitivity.py --seeds "$SEEDS" --jobs "$JOBS"
}
# The temperature of contribution normalisation's eq. 8; shares the "original" runs.
temperature() {
  "$PY" benchmarks/accuracy/normalization_compare.py --alphas 0.1,0.5 --methods fedavg,fedprox,scaffold \
    --temperatures 1,0.5,0.2,0.1,0.05 --seeds "$SEEDS" --jobs "$JOBS" --out results/normalization_temperature \
    --runs results/normalization_mnist5k \
    -- +experiment=contrib_mnist5k "runtime=$RUNTIME"
}
# The largest Hessian eigenvalue along training, behind Per-FedAvg's inner step size.
curvature() {
  "$PY" benchmarks/accuracy/perfedavg_curvature.py
}

# FedNTD and FedVLS beside FedAvg without and with momentum, and FedVLS's loss terms.
distillation() {
  "$PY" benchmarks/accuracy/distillation_regimes.py
}
# FedUV, FedRCL and FedLWS (three β) beside FedAvg without and with momentum.
regularisers() {
  "$PY" benchmarks/accuracy/regulariser_regimes.py
}

# FedLoGe's personal model part by part beside FedAvg + FT, on the personalised
# leaderboard's set-up at its tuned rates (read from the leaderboard's record).
fedloge_personal() {
  "$PY" benchmarks/accuracy/fedloge_personal.py
}

report() { :; }  # "run.sh report": only rebuild the report below

tables=("$@")
[ ${#tables[@]} -gt 0 ] || tables=(rebafl astraea fedconcat grpfed stateful normalization stability grpfed_sensitivity
                                   temperature curvature distillation regularisers fedloge_personal)
for table in "${tables[@]}"; do
  echo "== $table ($(date +%H:%M:%S))"
  "$table"
done

# One report over every run the tables have so far (set-ups are told apart by letter).
folders=()
for folder in results/{rebafl,astraea,fedconcat,grpfed,normalization}_mnist5k; do
  [ -d "$folder" ] && folders+=("$folder")
done
"$PY" -m fedimb report "${folders[@]}" --out results/accuracy --title "Every method on its paper's set-up, mnist5k"
