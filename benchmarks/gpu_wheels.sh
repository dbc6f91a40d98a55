#!/usr/bin/env bash
# Build .whl/site.tar.xz (ignored by git): Ray, MLflow, Optuna and what they need
# that the GPU machine's image lacks, for its Python 3.12, as one unpacked tree
# that benchmarks/gpu_session.sh extracts to /tmp/site there (#19).
#
# Ray 2.60.0's cp312 wheel alone is 79 MB, over the device tool's 64 MiB per
# call; left out: ray/jars (the Java worker, 32 MB), RLlib, ray.llm, the
# dashboard's source maps and MLflow's UI build.  xz then packs the rest
# (276 MB unpacked) into ~45 MB.  Run on the development machine (needs pip
# and network): bash benchmarks/gpu_wheels.sh
set -eu
cd "$(dirname "$0")/.."
dl=$(mktemp -d); stage=$(mktemp -d)
python3 -m pip download --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_34_x86_64 -d "$dl" 'ray[tune]==2.60.0' mlflow optuna
# keep only what the image does not have (its package list: /work/.library/device/KINDS.md)
for p in alembic annotated_types blinker cachetools cffi colorlog cryptography databricks_sdk docker fastapi flask flask_cors \
         gitdb gitpython google_auth graphene graphql_core graphql_relay gunicorn huey importlib_metadata itsdangerous jsonschema \
         jsonschema_specifications mako mlflow mlflow_skinny mlflow_tracing opentelemetry_api opentelemetry_proto opentelemetry_sdk \
         opentelemetry_semantic_conventions optuna prettytable pyasn1 pyasn1_modules pycparser pydantic pydantic_core python_dotenv \
         ray referencing rpds_py skops smmap sqlalchemy sqlparse starlette tensorboardx typing_inspection uvicorn wcwidth; do
  f=$(ls "$dl" | grep -i "^${p}-[0-9]" | head -1)
  python3 -c "import zipfile, sys; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$dl/$f" "$stage"
done
rm -rf "$stage/ray/jars" "$stage/ray/rllib" "$stage/ray/llm" "$stage/mlflow/server/js/build"
find "$stage/ray/dashboard/client" -name "*.map" -delete
mkdir -p .whl
tar cf - -C "$stage" . | xz -T2 -6 > .whl/site.tar.xz
ls -la .whl/site.tar.xz
