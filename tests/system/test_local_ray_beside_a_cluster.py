"""`awnn` without `--address` starts a Ray of its own, also on a machine where
a user's `ray start` runs a cluster (Ray's default temp dir names it in
/tmp/ray/ray_current_cluster, and a bare `ray.init()` joins it, refusing
the command's `num_cpus`: before the fix the command died with a traceback,
"When connecting to an existing cluster, num_cpus and num_gpus must not be
provided"); `--address auto` joins that cluster on purpose."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_awnn
from servers import ServerUnavailable, ray_cluster
from tracking.contract import Tag

pytestmark = pytest.mark.slow


@pytest.fixture
def users_cluster(tmp_path):
    try:
        with ray_cluster(tmp_path, nodes=1, cpus_per_node=1, default_temp_dir=True) as c:
            yield c
    except ServerUnavailable as e:
        pytest.skip(str(e))


def _trial_nodes(uri: str) -> set[str]:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("awnn-doublemoon")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial"]
    assert trials and all(r.info.status == "FINISHED" for r in trials)
    return {r.data.tags[Tag.NODE_ID] for r in trials}


def test_without_address_a_local_ray_of_its_own_and_with_auto_the_users_cluster(users_cluster, tmp_path):
    args = ["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke", "--cpus-per-trial", "1"]
    own = tmp_path / "own"
    own.mkdir()
    p = run_awnn([*args, "--num-cpus", "2"], cwd=own, timeout=400)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "num_cpus and num_gpus must not be provided" not in p.stderr
    assert not _trial_nodes(f"sqlite:///{own / 'mlflow.db'}") & set(users_cluster.node_ids)  # not on the user's node
    # the user's cluster is still there, and `--address auto` runs the trials on it
    joined = tmp_path / "joined"
    joined.mkdir()
    env = users_cluster.client_env()
    env.pop("RAY_ADDRESS")
    p = run_awnn([*args, "--address", "auto"], cwd=joined, timeout=400, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert _trial_nodes(f"sqlite:///{joined / 'mlflow.db'}") == set(users_cluster.node_ids)
