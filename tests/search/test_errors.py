"""search.errors.out_of_memory: what a failed allocation said, in one line,
from real allocation failures and along an error's causes; None otherwise."""
import numpy as np
import pytest
import torch

from search.errors import out_of_memory

HUGE = 10**15  # elements: more bytes than any address space holds


def _raised(fn):
    try:
        fn()
    except BaseException as e:  # noqa: BLE001 (the error itself is the subject)
        return e
    raise AssertionError("no error")


def test_torchs_cpu_allocator_failure_is_one_line_with_its_size():
    e = _raised(lambda: torch.empty(HUGE, 8))
    said = out_of_memory(e)
    assert said.startswith("DefaultCPUAllocator: can't allocate memory: you tried to allocate 32000000000000000 bytes (29802322.4 GiB)"), said
    assert "\n" not in said and "enforce fail" not in said


def test_numpys_memory_error_is_found():
    e = _raised(lambda: np.empty((HUGE, 8)))
    assert isinstance(e, MemoryError)
    assert "Unable to allocate" in out_of_memory(e)


def test_an_oom_found_along_the_causes_and_a_ray_tasks_cause():
    inner = _raised(lambda: torch.empty(HUGE, 8))
    try:
        try:
            raise inner
        except RuntimeError as e:
            raise ValueError("building the model failed") from e
    except ValueError as outer:
        assert "can't allocate memory" in out_of_memory(outer)

    class TaskError(Exception):  # as Ray's RayTaskError: its text is the remote traceback, `cause` the error
        def __init__(self, cause):
            super().__init__("ray::ImplicitFunc.train() (pid=1, ip=x)\n  File ...\n" + str(cause))
            self.cause = cause

    assert out_of_memory(TaskError(inner)).startswith("DefaultCPUAllocator: ")


def test_a_cuda_out_of_memory_by_its_type_and_text():
    class OutOfMemoryError(RuntimeError):  # torch.OutOfMemoryError's name (no GPU here to raise the real one)
        pass

    assert out_of_memory(OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has ...")).startswith("CUDA out of memory.")


@pytest.mark.parametrize("error", [RuntimeError("mat1 and mat2 shapes cannot be multiplied"), ValueError(""), KeyError("x"),
                                   OSError(28, "No space left on device")])
def test_other_errors_are_not_out_of_memory(error):
    assert out_of_memory(error) is None
