"""Shared fixtures. Everything runs on CPU with the built-in tiny model; GPU tests skip without CUDA."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(max(1, min(2, torch.get_num_threads())))


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA (GPU tests run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def tiny_model_path() -> str:
    """Folder of the built-in tiny checkpoint (built once into the cache)."""
    from gyre.models import tiny_path

    return str(tiny_path())


@pytest.fixture(scope="session")
def _ray_down_at_exit():
    yield
    import ray

    ray.shutdown()


@pytest.fixture(scope="module")
def ray_session(_ray_down_at_exit):
    """One local Ray cluster shared by the tests that need actors (started on first use, and again after a
    test module that needs its own cluster, tests/harness/test_execution_nodes.py, shut it down)."""
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    return ray
