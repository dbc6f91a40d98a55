"""The cluster files: docker-compose.yml, .env.example, cluster/Dockerfile,
cluster/ray-cluster.yaml, cluster/kuberay/ and their helper scripts.

No Docker engine runs here, so these tests check what can be checked
without one: the compose file's structure and security settings, that
`docker-compose config` accepts it (when the command is installed), that
the launcher YAML passes Ray's own validation, that every file names the
same image and Ray version as the Dockerfile, and that the commands the
files and docs give parse with the real `awnn` CLI.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "cluster" / "Dockerfile"
LAUNCHER = ROOT / "cluster" / "ray-cluster.yaml"
KUBERAY = ROOT / "cluster" / "kuberay"
BIN = ROOT / "cluster" / "bin"
DOCS = ROOT / "docs" / "cluster.md"  # its section "Launching sweeps on a Ray cluster" (moved from the README, issue #32)
STORAGE = "/mnt/ray-results"  # the shared checkpoint path of all three launch paths

SERVICES = {"postgres", "minio", "minio-setup", "mlflow", "mlflow-user", "ray-head", "ray-worker"}
ONE_SHOT = {"minio-setup", "mlflow-user"}
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|_KEY$|ACCESS_KEY")
VAR_REF = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def env_example() -> dict[str, str]:
    out = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


def dockerfile_args() -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)", DOCKERFILE.read_text(), flags=re.M))


def expected_tag(variant: str) -> str:
    a = dockerfile_args()
    return f"ray{a['RAY_VERSION']}-{a['PYTHON_TAG']}-{variant}"


def kuberay_docs() -> dict[str, dict]:
    docs = {}
    for path in sorted(KUBERAY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            docs[doc["kind"]] = doc
    return docs


def ray_cluster_specs() -> dict[str, dict]:
    """kind -> RayClusterSpec (the RayCluster's spec, the RayJob's rayClusterSpec)."""
    docs = kuberay_docs()
    return {"RayCluster": docs["RayCluster"]["spec"], "RayJob": docs["RayJob"]["spec"]["rayClusterSpec"]}


def pod_specs(spec: dict) -> list[tuple[str, dict]]:
    pods = [("head", spec["headGroupSpec"]["template"]["spec"])]
    pods += [(g["groupName"], g["template"]["spec"]) for g in spec["workerGroupSpecs"]]
    return pods


def awnn_args(command: str) -> "argparse.Namespace":  # noqa: F821
    """Parse an `awnn ...` command line with the real CLI parser."""
    from search.cli import build_parser

    words = shlex.split(command)
    assert words[0] == "awnn", command
    return build_parser().parse_args(words[1:])


# ---------------------------------------------------------------- compose
def test_compose_has_the_services_and_volumes():
    c = compose()
    assert set(c["services"]) == SERVICES
    # a named volume per stateful service, plus the shared checkpoint volume
    mounts = {name: [str(v) for v in s.get("volumes", [])] for name, s in c["services"].items()}
    assert "postgres-data:/var/lib/postgresql/data" in mounts["postgres"]
    assert "minio-data:/data" in mounts["minio"]
    assert f"ray-results:{STORAGE}" in mounts["ray-head"] and f"ray-results:{STORAGE}" in mounts["ray-worker"]
    declared = set(c["volumes"])
    used = {m.split(":")[0] for ms in mounts.values() for m in ms if not m.startswith((".", "/"))}
    assert used == declared


def test_compose_workers_reserve_nvidia_gpus_and_scale():
    worker = compose()["services"]["ray-worker"]
    devices = worker["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    # each replica claims its own GPUs (Docker gives every `count: N` reservation the first N)
    assert worker["command"][0] == "awnn-gpu-slot"
    # --scale needs replicas without fixed names or host ports
    assert "container_name" not in worker and "ports" not in worker
    assert worker["build"]["args"]["VARIANT"] == "gpu"


def test_compose_ray_nodes_have_shared_memory_for_the_object_store():
    services = compose()["services"]
    for name in ("ray-head", "ray-worker"):
        assert re.fullmatch(r"\$\{RAY_SHM_SIZE:-\d+gb\}", services[name]["shm_size"]), name


def test_compose_services_have_healthchecks_and_start_in_order():
    services = compose()["services"]
    for name, s in services.items():
        if name in ONE_SHOT:
            assert s["restart"] == "no", name
        else:
            assert s["restart"] == "unless-stopped", name
            assert s["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name
    order = {name: {dep: cond["condition"] for dep, cond in s.get("depends_on", {}).items()} for name, s in services.items()}
    assert order == {
        "postgres": {},
        "minio": {},
        "minio-setup": {"minio": "service_healthy"},
        "mlflow": {"postgres": "service_healthy", "minio-setup": "service_completed_successfully"},
        "mlflow-user": {"mlflow": "service_healthy"},
        "ray-head": {"mlflow-user": "service_completed_successfully"},
        "ray-worker": {"ray-head": "service_healthy"},
    }


def test_compose_publishes_ports_on_localhost_only():
    published = []
    for name, s in compose()["services"].items():
        for port in s.get("ports", []):
            if isinstance(port, dict):
                assert port.get("host_ip") == "127.0.0.1", (name, port)
            else:
                assert str(port).startswith("127.0.0.1:"), (name, port)
            published.append(name)
    assert sorted(published) == ["minio", "mlflow", "ray-head"]  # no database, no S3 API, no GCS


def test_compose_holds_no_literal_secrets():
    text = COMPOSE.read_text()
    for name, s in compose()["services"].items():
        env = s.get("environment", {})
        assert isinstance(env, dict), f"{name}: use the mapping form of environment"
        for key, value in env.items():
            if SECRET_NAME.search(key) and key != "RAY_AUTH_MODE":
                # only a required reference: no value, and no default, in the file
                assert re.fullmatch(r"\$\{\w+:\?[^}]*\}", str(value)), f"{name}: {key}={value!r} is not a required ${{VAR}}"
    # credentials inside URIs are references too
    for user, password in re.findall(r"://([^:/@\s]+):([^@\s]+)@", text):
        assert user.startswith("${") and password.startswith("${"), (user, password)
    # .env holds the secrets and is never committed
    assert subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT).returncode == 0
    tracked = subprocess.run(["git", "ls-files", ".env"], cwd=ROOT, capture_output=True, text=True).stdout
    assert tracked.strip() == ""


def test_compose_variables_are_all_in_env_example():
    refs = {m.group(1): (m.group(2), m.group(3)) for m in VAR_REF.finditer(COMPOSE.read_text())}
    example = env_example()
    missing = sorted(set(refs) - set(example))
    assert not missing, f".env.example lacks {missing}"
    unused = sorted(set(example) - set(refs))
    assert not unused, f".env.example has settings docker-compose.yml does not use: {unused}"
    for var, value in example.items():
        if SECRET_NAME.search(var) and var != "MLFLOW_S3_ACCESS_KEY":
            assert value == "", f".env.example ships a value for the secret {var}"
            assert refs[var][0] == ":?", f"docker-compose.yml must require {var} (${{{var}:?...}})"


def test_compose_turns_on_authentication():
    services = compose()["services"]
    for name in ("ray-head", "ray-worker"):
        env = services[name]["environment"]
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN:?"), name
    mlflow = services["mlflow"]
    assert mlflow["command"][0] == "awnn-mlflow-server"
    assert "--app-name basic-auth" in (BIN / "awnn-mlflow-server").read_text()
    hosts = next(a.split("=", 1)[1] for a in mlflow["command"] if a.startswith("--allowed-hosts="))
    assert {"mlflow", "mlflow:5000"} <= set(hosts.split(",")) and "*" not in hosts.split(",")
    # the sweep logs as an ordinary user, not as the admin
    assert services["ray-head"]["environment"]["MLFLOW_TRACKING_USERNAME"].startswith("${MLFLOW_TRACKING_USERNAME:?")
    assert "MLFLOW_AUTH_ADMIN_PASSWORD" not in services["ray-head"]["environment"]


def _compose_command() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return None


@pytest.fixture
def filled_env(tmp_path) -> Path:
    path = tmp_path / "env"
    p = subprocess.run(["bash", str(ROOT / "cluster" / "new-env.sh"), str(path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return path


def test_compose_config_accepted_by_docker_compose(filled_env, tmp_path):
    cmd = _compose_command()
    if cmd is None:
        pytest.skip("neither docker-compose nor `docker compose` is installed (tests/system_deps.sh installs Debian's docker-compose)")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}  # nothing leaks in from this shell
    base = cmd + ["--project-directory", str(ROOT), "-f", str(COMPOSE)]
    p = subprocess.run(base + ["--env-file", str(filled_env), "config"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert p.returncode == 0, p.stderr
    resolved = yaml.safe_load(p.stdout)
    assert set(resolved["services"]) == SERVICES
    # without secrets compose refuses to start, naming the missing one
    p = subprocess.run(base + ["--env-file", str(ENV_EXAMPLE), "config"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert p.returncode != 0
    assert "in .env" in p.stderr


def test_new_env_fills_every_secret_and_refuses_to_overwrite(filled_env):
    example, filled = env_example(), {}
    for line in filled_env.read_text().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            filled[k] = v
    assert set(filled) == set(example)
    for k, v in example.items():
        assert filled[k] == v if v else re.fullmatch(r"[0-9a-f]{48}", filled[k]), k
    assert filled_env.stat().st_mode & 0o077 == 0  # readable by its owner only
    p = subprocess.run(["bash", str(ROOT / "cluster" / "new-env.sh"), str(filled_env)], capture_output=True, text=True)
    assert p.returncode == 1 and "exists" in p.stderr


def test_gpu_slot_gives_each_worker_its_own_gpus(tmp_path):
    if not shutil.which("flock"):
        pytest.skip("flock (util-linux) is not installed")
    env = {**os.environ, "GPU_SLOT_DIR": str(tmp_path / "slots"), "GPU_SLOT_TOTAL": "4", "RAY_WORKER_GPUS": "2"}
    script = str(BIN / "awnn-gpu-slot")
    hold = [subprocess.Popen(["bash", script, "bash", "-c", 'echo "$CUDA_VISIBLE_DEVICES"; sleep 30'], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        seen = sorted(p.stdout.readline().strip() for p in hold)
        assert seen == ["0,1", "2,3"]
        full = subprocess.run(["bash", script, "true"], env=env, capture_output=True, text=True, timeout=30)
        assert full.returncode == 1 and "all 4 GPUs are taken" in full.stderr
    finally:
        for p in hold:
            p.kill()
            p.wait()
    # a stopped worker frees its slot
    again = subprocess.run(["bash", script, "bash", "-c", 'echo "$CUDA_VISIBLE_DEVICES"'], env=env, capture_output=True, text=True, timeout=30)
    assert again.stdout.strip() == "0,1"
    none = subprocess.run(["bash", script, "bash", "-c", 'echo "[$CUDA_VISIBLE_DEVICES]"'], env={**env, "GPU_SLOT_TOTAL": "0"},
                          capture_output=True, text=True, timeout=30)
    assert none.stdout.strip() == "[]" and "no GPU visible" in none.stderr


def test_mlflow_server_script_requires_its_secrets(tmp_path):
    env = {"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path)}
    p = subprocess.run(["bash", str(BIN / "awnn-mlflow-server")], env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "MLFLOW_BACKEND_STORE_URI" in p.stderr
    p = subprocess.run(["bash", str(BIN / "awnn-mlflow-server")], env={**env, "MLFLOW_BACKEND_STORE_URI": "sqlite:///x.db"},
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "MLFLOW_FLASK_SERVER_SECRET_KEY" in p.stderr


# ---------------------------------------------------------------- one image, one Ray
def test_dockerfile_builds_on_the_projects_ray_and_python():
    import mlflow
    import ray

    args = dockerfile_args()
    assert "FROM rayproject/ray:${RAY_VERSION}-${PYTHON_TAG}-${VARIANT}" in DOCKERFILE.read_text()
    assert args["VARIANT"] == "cpu"
    # a driver refuses a cluster of another Ray or Python: the image must run the project's
    assert args["RAY_VERSION"] == ray.__version__, f"cluster/Dockerfile has Ray {args['RAY_VERSION']}, the project runs {ray.__version__}: bump RAY_VERSION and the image tags"
    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    assert args["PYTHON_TAG"] == py, f"cluster/Dockerfile has {args['PYTHON_TAG']}, the project runs {py}"
    assert args["MLFLOW_VERSION"].split(".")[0] == mlflow.__version__.split(".")[0]


def test_every_file_names_the_same_image_and_ray_version():
    args = dockerfile_args()
    ray_version = args["RAY_VERSION"]
    refs: list[tuple[str, str, str]] = []  # (where, image, expected variant)
    for name, s in compose()["services"].items():
        if "awnn-search" in s.get("image", ""):
            variant = "gpu" if name == "ray-worker" else "cpu"
            refs.append((f"docker-compose.yml {name}", s["image"], variant))
            if "build" in s:
                build = s["build"]
                assert build["dockerfile"] == "cluster/Dockerfile"
                assert build["args"]["RAY_VERSION"] == ray_version and build["args"]["PYTHON_TAG"] == args["PYTHON_TAG"]
                assert build["args"]["VARIANT"] == variant
    launcher = yaml.safe_load(LAUNCHER.read_text())
    for key in ("image", "head_image", "worker_image"):
        if key in launcher["docker"]:
            refs.append((f"ray-cluster.yaml docker.{key}", launcher["docker"][key], "gpu"))
    for kind, spec in ray_cluster_specs().items():
        assert spec["rayVersion"] == ray_version, f"{kind} rayVersion"
        for group, pod in pod_specs(spec):
            for container in pod["containers"]:
                refs.append((f"{kind} {group}", container["image"], "cpu" if group == "head" else "gpu"))
    assert len(refs) >= 8
    for where, image, variant in refs:
        tag = image.rsplit(":", 1)[1]
        assert tag == expected_tag(variant), f"{where}: {image} should end in :{expected_tag(variant)}"
        repo = image.rsplit(":", 1)[0]
        assert repo.endswith("/awnn-search") or repo == "${AWNN_IMAGE:-awnn-search}", f"{where}: {image}"


# ---------------------------------------------------------------- ray up
def test_launcher_yaml_passes_rays_validation():
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = prepare_config(yaml.safe_load(LAUNCHER.read_text()))
    validate_config(config)
    assert config["head_node_type"] in config["available_node_types"]


def test_launcher_yaml_uses_token_auth_and_shared_storage():
    c = yaml.safe_load(LAUNCHER.read_text())
    assert c["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    for cmd in (c["head_start_ray_commands"][-1], c["worker_start_ray_commands"][-1]):
        assert "RAY_AUTH_MODE=token ray start" in cmd
    assert "--env RAY_AUTH_MODE=token" in c["docker"]["run_options"]
    assert f"--volume {STORAGE}:{STORAGE}" in c["docker"]["run_options"]
    assert any(f" {STORAGE}" in cmd and "mount -t nfs4" in cmd for cmd in c["initialization_commands"])
    # the head offers no trial resources; it runs the drivers
    assert c["available_node_types"][c["head_node_type"]]["resources"] == {"CPU": 0}
    assert "--dashboard-host=127.0.0.1" in c["head_start_ray_commands"][-1]


# ---------------------------------------------------------------- KubeRay
def test_kuberay_manifests_use_token_auth_and_the_shared_volume():
    docs = kuberay_docs()
    assert set(docs) == {"RayCluster", "RayJob", "PersistentVolumeClaim"}
    pvc = docs["PersistentVolumeClaim"]
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    for kind, spec in ray_cluster_specs().items():
        assert docs[kind]["apiVersion"] == "ray.io/v1"
        assert spec["authOptions"] == {"mode": "token"}, kind
        assert spec["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
        for group, pod in pod_specs(spec):
            claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
            mounts = {m["mountPath"]: m["name"] for c in pod["containers"] for m in c.get("volumeMounts", [])}
            assert claims.get(mounts.get(STORAGE)) == pvc["metadata"]["name"], f"{kind} {group}: {STORAGE} is not the shared claim"
            shm = {v["name"]: v for v in pod["volumes"]}.get(mounts.get("/dev/shm"), {})
            assert shm.get("emptyDir", {}).get("medium") == "Memory", f"{kind} {group}: no memory-backed /dev/shm"
        for group, pod in pod_specs(spec)[1:]:
            assert all(c["resources"]["limits"].get("nvidia.com/gpu") for c in pod["containers"]), f"{kind} {group}"


def test_rayjob_runs_awnn_compare_with_shared_storage():
    from search.grid import find_grid
    from search.strategies import GRID_OF

    job = kuberay_docs()["RayJob"]["spec"]
    args = awnn_args(job["entrypoint"])
    assert args.command == "compare"
    assert args.storage == STORAGE
    assert 0 < args.gpus_per_trial <= 1
    for strategy in args.strategies.split(","):
        find_grid(args.task, GRID_OF[strategy])  # raises when the task or strategy has no grid (tpe/asha/random search the fixed grid)
    assert job["shutdownAfterJobFinishes"] is True


# ---------------------------------------------------------------- docs
def test_docs_commands_parse_with_the_real_cli():
    text = DOCS.read_text()
    text = text[text.index("## Launching sweeps on a Ray cluster"):]
    blocks = re.findall(r"```(?:bash|sh|console)?\n(.*?)```", text, flags=re.S)
    commands = []
    for block in blocks:
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            m = re.search(r"(?:^|\s|--\s)(awnn (?:sweep|compare)\b.*)$", line.strip())
            if m:
                commands.append(m.group(1))
    assert len(commands) >= 3, "docs/cluster.md's cluster section should show the sweep command of each launch path"
    from search.grid import find_grid
    from search.strategies import GRID_OF

    for cmd in commands:
        args = awnn_args(cmd)
        strategies = args.strategies.split(",") if args.command == "compare" else [args.strategy]
        for strategy in strategies:
            find_grid(args.task, GRID_OF[strategy])  # raises when the task or strategy has no grid (tpe/asha/random search the fixed grid)
        if args.storage:
            assert args.storage == STORAGE or args.storage.startswith("s3://"), cmd
