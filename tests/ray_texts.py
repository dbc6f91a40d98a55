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
