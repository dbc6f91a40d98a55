"""Texts as Ray 2.60 writes them, taken from real runs, for the tests that read them."""

# A trial actor's death as Ray 2.60 reports it when the worker could not load Tune's actor class (a cluster node whose
# Python lacked a module the trial's code imports; taken from a trial's error.txt, 2026-12-07, paths shortened)
ACTOR_IMPORT_DEATH = """The actor died unexpectedly before finishing this task.
\tclass_name: ImplicitFunc
\tactor_id: cade2736857179765932c43e03000000
\tpid: 10973
\tnamespace: 06c5d455-57cb-4735-90b1-87baf5b8955e
\tip: 10.0.3.7
The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker exits unexpectedly. Worker exits with an exit code None. Traceback (most recent call last):
  File "python/ray/_raylet.pyx", line 2198, in ray._raylet.execute_task
  File ".../ray/_private/function_manager.py", line 657, in temporary_actor_method
    raise RuntimeError(
RuntimeError: The actor with name ImplicitFunc failed to import on the worker. This may be because needed library dependencies are not installed in the worker environment:

Traceback (most recent call last):
  File ".../ray/_private/function_manager.py", line 696, in _load_actor_class_from_gcs
    actor_class = pickle.loads(pickled_class)
  File "/opt/site/search/__init__.py", line 1, in <module>
    raise ModuleNotFoundError("No module named 'pyarrow_missing_on_this_node'", name="pyarrow_missing_on_this_node")
ModuleNotFoundError: No module named 'pyarrow_missing_on_this_node'


During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "python/ray/_raylet.pyx", line 955, in ray._raylet.store_task_errors
RuntimeError: The actor with name ImplicitFunc failed to import on the worker. This may be because needed library dependencies are not installed in the worker environment:

An unexpected internal error occurred while the worker was executing a task."""


# `ray.init(address=...)` of a Ray 2.60.0 driver on Python 3.11.7 joining a cluster that Ray 2.59.0 on Python 3.11.2
# runs (`ray start --head` from another virtual environment, 2026-12-07): the RuntimeError's text
VERSION_MISMATCH = """Version mismatch: The cluster was started with:
    Ray: 2.59.0
    Python: 3.11.2
This process on node 192.0.2.2 was started with:
    Ray: 2.60.0
    Python: 3.11.7
"""

# The same driver joining a Ray 2.60 cluster with token authentication on, RAY_AUTH_MODE unset: after ~20 s,
# ConnectionError("Failed to connect to Ray cluster at 192.0.2.2:6412") raised from this RuntimeError (paths shortened)
AUTH_REFUSED_CAUSE = """Failed to connect to GCS. Last connection error: Traceback (most recent call last):
  File ".../ray/_private/node.py", line 996, in _init_gcs_client
    client = GcsClient(
             ^^^^^^^^^^
  File "python/ray/_raylet.pyx", line 3198, in ray._raylet.GcsClient.__cinit__
  File "python/ray/includes/gcs_client.pxi", line 78, in ray._raylet.InnerGcsClient.standalone
  File "python/ray/includes/common.pxi", line 146, in ray._raylet.check_status_timeout_as_rpc_error
  File "python/ray/includes/common.pxi", line 119, in ray._raylet.check_status
ray.exceptions.AuthenticationError: RPC error: InvalidAuthToken: Authentication token is missing or incorrect. Note: RAY_AUTH_MODE is currently 'disabled' (not 'token'). Ensure that the token for the cluster is available in a local file (e.g., ~/.ray/auth_token or via RAY_AUTH_TOKEN_PATH) or as the `RAY_AUTH_TOKEN` environment variable. To generate a token for local development, use `ray get-auth-token --generate` For remote clusters, ensure that the token is propagated to all nodes of the cluster when token authentication is enabled. For more information, see: https://docs.ray.io/en/latest/ray-security/token-auth.html
"""
# and what its C++ client wrote to stderr meanwhile, once a second (20 lines)
AUTH_REFUSED_LINE = ("[2026-12-07 14:36:48,387 W 10263 10263] gcs_client.cc:210: Failed to get cluster ID from GCS server: "
                     "Unauthenticated: RPC error: InvalidAuthToken: Authentication token is missing or incorrect")
