#!/usr/bin/env bash
# One call on a lent GPU machine (#19): set up, then run the named steps, each
# logging to $OUT/<step>.log (the device tool brings $OUT back).
#
#   bash benchmarks/gpu_session.sh setup gputests bench domains
#   bash benchmarks/gpu_session.sh setup packing
#   bash benchmarks/gpu_session.sh setup suite
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
  # make demo's comparison on this machine's GPU (DEMO_ARGS: extra flags, e.g. a shorter budget)
  local t0=$(date +%s)
  (cd "$(mktemp -d)" && $PY -m search.cli compare --task spiralhard --budget quick --strategies fixed,awnn,tpe,asha,random \
      --gpus-per-trial "${DEMO_SHARE:-0.125}" ${DEMO_ARGS:-} && cat awnn-results/reports/*/summary.json | head -c 4000)
  echo "demo wall seconds: $(( $(date +%s) - t0 ))"
}

for s in "$@"; do
  echo "=== $s $(date -u +%T)"
  set -o pipefail
  "step_$s" 2>&1 | tee "$OUT/$s.log"
  echo "=== $s exit $? $(date -u +%T)"
done
