"""Fixtures for the harness tests: a live proxy over two real tiny-model HFEngine cells, the default
sandbox (bwrap where it works), and the built-in task suites.

Generation is kept short (16 tokens a call) so that several executions finish in seconds on a CPU.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gyre.envs import Sandbox, Task, load_tasks

ROOT = Path(__file__).resolve().parents[2]
SUITES = {
    "swe": ROOT / "recipes" / "deepswe" / "tasks",
    "nl2repo": ROOT / "recipes" / "nl2repo" / "tasks",
    "terminal": ROOT / "recipes" / "terminalbench" / "tasks",
}


@pytest.fixture(scope="session")
def builtin_tasks() -> dict[str, list[Task]]:
    """domain -> the tasks of its built-in suite (domains whose suite folder is missing are absent)."""
    loaded = {}
    for domain, path in SUITES.items():
        if path.exists():
            result = load_tasks(domain, path)
            assert not result.errors, f"broken built-in tasks in {path}: {result.errors}"
            loaded[domain] = result.tasks
    return loaded


@pytest.fixture(scope="session")
def sandbox() -> Sandbox:
    """The machine's default sandbox (bwrap where it works); GYRE_TEST_SANDBOX=process forces the fallback.

    Where that is the process kind, the tests opt in to running model-using harnesses unisolated (they
    test harnesses, not isolation; tests/harness/test_isolation.py checks the refusal)."""
    kind = os.environ.get("GYRE_TEST_SANDBOX", "auto")
    made = Sandbox(kind=kind, timeout=120, cpu_seconds=120, memory_mb=4096, max_processes=256)
    return made.replace(allow_unisolated=made.resolved_kind() == "process")


@pytest.fixture(scope="session")
def server(tiny_model_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The proxy on loopback over two engines, one torch thread (fastest on a small shared CPU)."""
    import torch

    from gyre.models import load_tokenizer
    from gyre.proxy import ProxyConfig
    from gyre.proxy.server import ProxyServer, build_proxy
    from gyre.rollout.hf import HFEngine

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    engines = [HFEngine("tiny", engine_id=f"hf-{i}", max_batch_size=32) for i in range(2)]
    config = ProxyConfig(port=0, run_dir=str(tmp_path_factory.mktemp("proxy")), default_max_tokens=16, fsync=False)
    with ProxyServer(build_proxy(load_tokenizer("tiny"), engines, config)) as running:
        yield running
    for engine in engines:
        asyncio.run(engine.close())
    torch.set_num_threads(threads)


@pytest.fixture
def no_leftover_processes() -> Iterator[None]:
    """Fails the test if it leaves a child process of this test process running.

    Subtrees already running before the test (a Ray cluster or a server that another test file on the same
    pytest-xdist worker started, whose workers come and go) are not the test's: they are left out."""
    from gyre.envs import proctree

    me = os.getpid()
    before = {pid: proctree.start_time(pid) for pid in proctree.descendants(me)}
    yield
    children = proctree.children_map(proctree.parent_map())
    left, stack = [], list(children.get(me, ()))
    while stack:
        pid = stack.pop()
        if pid in before and proctree.start_time(pid) == before[pid]:
            continue  # running before the test, with all it starts
        left.append(pid)
        stack.extend(children.get(pid, ()))
    left = [pid for pid in left if proctree.alive(pid)]
    names = {pid: (proctree.command_line(pid) or "?")[:80] for pid in left}
    assert not left, f"processes left running after the test: {names}"

