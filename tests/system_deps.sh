#!/usr/bin/env bash
# System packages some tests use, installed only where missing and where we
# may (as root, with apt).  `make test` runs this before pytest.  A test that
# needs a package that could not be installed skips and names it.
#   postgresql      tests/tracking/test_tracking_server.py: MLflow on PostgreSQL (initdb, pg_ctl)
#   docker-compose  tests/system/test_cluster_files.py: `docker-compose config` accepts
#                   docker-compose.yml (no Docker engine needed)
#   util-linux      flock, for cluster/bin/awnn-gpu-slot's test
#   chromium        tests/tracking/test_report.py: the HTML report rendered headless, plots decoded
set -u
need=()
command -v pg_ctl >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need+=(postgresql)
command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || need+=(docker-compose)
command -v flock >/dev/null 2>&1 || need+=(util-linux)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing system packages for the tests: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null 2>&1 || echo "warning: apt-get update failed; trying the package lists at hand"
  for pkg in "${need[@]}"; do
    # one at a time: a package missing from this distribution must not block the others
    apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null 2>&1 \
      || echo "warning: could not install $pkg; the tests needing it will be skipped"
  done
else
  echo "note: ${need[*]} missing and apt-get not usable; the tests needing them will be skipped"
fi
exit 0
