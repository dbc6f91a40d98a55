#!/usr/bin/env bash
# One call on a lent GPU machine (#19): set up, then run the named steps, each
# logging to $OUT/<step>.log (the device tool brings $OUT back).
#
#   bash benchmarks/gpu_session.sh setup gputests bench domains
#   bash benchmarks/gpu_session.sh setup packing
#   bash benchmarks/gpu_session.sh setup suite
#   bash benchmarks/gpu_session.sh setup fused paperfrac demo awnntests   (#33)
#
# The machine has python3 with torch but not Ray, MLflow or Optuna and cannot
# download: `setup` unpacks them from .whl/site.tar.xz (built on the
# development machine from the cp312 wheels, Ray's Java jar, RLlib and the
# MLflow UI's JavaScript left out to fit the 64 MiB transfer) into /tmp/site.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PATH=/tmp/bin:$PATH
export RAY_ENABLE_UV_RUN_RUNTIME_ENV=0
PY=python3

step_setup() {
  { date -u; nvidia-smi; $PY -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"; nproc; free -g; } 2>&1
  if [ ! -f /tmp/site/.done ] && [ -f .whl/site.tar.xz ]; then
    mkdir -p /tmp/site && tar xJf .whl/site.tar.xz -C /tmp/site && touch /tmp/site/.done
  fi
  # the wheels were unpacked with Python's zipfile, which drops the executable bits
  # (Ray's gcs_server and raylet then fail with "Permission denied")
  chmod -R a+x /tmp/site/ray/core 2>/dev/null; find /tmp/site -name "*.so" -exec chmod a+x {} + 2>/dev/null
  mkdir -p /tmp/bin
  printf '#!/bin/sh\nexec python3 -m ray.scripts.scripts "$@"\n' >/tmp/bin/ray
  printf '#!/bin/sh\nexec python3 -m mlflow "$@"\n' >/tmp/bin/mlflow
  printf '#!/bin/sh\nexec python3 -m search.cli "$@"\n' >/tmp/bin/awnn
  chmod +x /tmp/bin/*
  $PY -c "import ray, mlflow, optuna, torch; print('ray', ray.__version__, 'mlflow', mlflow.__version__, 'optuna', optuna.__version__)"
}

step_gputests() {
  # the CUDA tests: everything marked gpu (tests/system/test_gpu.py and the three model tests)
  $PY -m pytest tests -m gpu -v -p no:cacheprovider -o addopts="" --timeout 300 -rs
  # the bit-for-bit and step-path tests of the CPU suite, on this machine too
  $PY -m pytest tests/awnn/test_optim.py tests/awnn/test_layers.py tests/awnn/test_step_speed_paths.py tests/awnn/test_train.py tests/awnn/test_train_prior_decay.py -q -p no:cacheprovider --timeout 300
}

step_bench() {
  $PY benchmarks/step_overhead.py --device cuda --batch 128,1024 --profile
}

step_fused() {
  # fused trials on CUDA (#33): configs per GPU-hour at N = 1 .. 180, and the fused-vs-Trainer check
  $PY benchmarks/fused_trials.py --device cuda --epochs "${FUSED_EPOCHS:-3}" --repeats 2 --sizes 1,8,32,64,180 \
      --shapes 1x256@128,2x128@32,1x16@32,4x24@128
}

step_awnntests() {
  # the whole torch-level suite with a GPU visible: configs on device "auto" train on CUDA here
  $PY -m pytest tests/awnn -q -p no:cacheprovider -m "not long" --timeout 300
}

step_paperfrac() {
  # the paper's SpiralHard comparison (fixed,awnn: the paper's grids, R = 10) at PAPER_SCALE of its epochs
  # (default 0.02: 100 epochs a trial for 1 hidden layer, 200 for 2 and 4), the fixed grid fused 32 configs a
  # trial, 16 trials sharing the GPU; the report's paper_budget_projection scales its measured costs to the
  # whole paper budget (#33)
  local t0=$(date +%s) dir
  dir=$(mktemp -d)
  printf 'epoch_scale: %s\nmin_epochs: 1\nretrain_runs: 10\npatience_scale: %s\n' "${PAPER_SCALE:-0.02}" "${PAPER_SCALE:-0.02}" >"$dir/paperfrac.yaml"
  (cd "$dir" && $PY -m search.cli compare --task spiralhard --budget paperfrac.yaml --strategies fixed,awnn --fuse "${PAPER_FUSE:-32}" \
      --gpus-per-trial "${PAPER_SHARE:-0.0625}" && cp awnn-results/reports/*/summary.json "$OUT/paperfrac_summary.json" \
      && cp awnn-results/reports/*/report.md "$OUT/paperfrac_report.md")
  echo "paperfrac wall seconds: $(( $(date +%s) - t0 ))"
}

step_domains() {
  $PY benchmarks/gpu_domains.py --epochs 3
}

step_packing() {
  $PY benchmarks/gpu_packing.py ${PACKING_ARGS:---cpu}
}

step_suite() {
  # the whole suite but the GPU tests run above; fault/slow included unless SUITE_ARGS says otherwise
  timeout "${SUITE_TIMEOUT:-330}" $PY -m pytest tests -q -p no:cacheprovider --timeout 300 -m "not gpu" ${SUITE_ARGS:-}
}

step_demo() {
  # make demo's comparison (its seven strategies) on this machine's GPU, the fixed grids fused (DEMO_FUSE, default 32;
  # DEMO_ARGS: extra flags, e.g. a shorter budget)
  local t0=$(date +%s)
  (cd "$(mktemp -d)" && $PY -m search.cli compare --task spiralhard --budget quick --strategies fixed,awnn,tpe,asha,random,awnn-asha,fixedplus \
      --gpus-per-trial "${DEMO_SHARE:-0.0625}" --fuse "${DEMO_FUSE:-32}" ${DEMO_ARGS:-} && cp awnn-results/reports/*/summary.json "$OUT/demo_summary.json")
  echo "demo wall seconds: $(( $(date +%s) - t0 ))"
}

for s in "$@"; do
  echo "=== $s $(date -u +%T)"
  set -o pipefail
  "step_$s" 2>&1 | tee "$OUT/$s.log"
  echo "=== $s exit $? $(date -u +%T)"
done
