#!/usr/bin/env bash
# Write a .env for docker-compose.yml: .env.example with every empty value
# filled with a fresh random secret (48 hex digits).
#   bash cluster/new-env.sh            # writes ./.env next to docker-compose.yml
#   bash cluster/new-env.sh PATH       # writes PATH
# Refuses to overwrite an existing file: some secrets are fixed at the first
# start (the MLflow admin password, the database password).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${1:-$root/.env}"
if [ -e "$target" ]; then
  echo "cluster/new-env.sh: $target exists; edit it instead" >&2
  exit 1
fi
secret() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
umask 077
while IFS= read -r line || [ -n "$line" ]; do
  if [[ "$line" =~ ^([A-Z0-9_]+)=$ ]]; then
    echo "${BASH_REMATCH[1]}=$(secret)"
  else
    echo "$line"
  fi
done < "$root/.env.example" > "$target"
echo "wrote $target (mode 600)" >&2
