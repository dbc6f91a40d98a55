#!/usr/bin/env bash
# System packages some tests use (installed only where missing and where we
# may: as root with apt).  Tests that need a package that could not be
# installed skip with that reason.
set -u
need=()
command -v pg_ctl >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing system packages for the tests: ${need[*]}"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null) \
    || echo "warning: could not install ${need[*]}; the tests needing them will be skipped"
else
  echo "note: ${need[*]} missing and apt-get not usable; the tests needing them will be skipped"
fi
exit 0
