"""A live proxy on loopback, backed by two real HFEngine cells with the tiny model, shared by the proxy tests.

Defaults keep calls short on CPU: requests that name no token budget get 16 tokens. Tests that need
other settings change ``proxy.config`` / router fields and restore them (``tuned`` fixture).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
from collections.abc import Iterator
from typing import Any

import pytest

from gyre.proxy import ProxyConfig
from gyre.proxy.server import ProxyServer, build_proxy

_serial = itertools.count()


@pytest.fixture(scope="session")
def engines(tiny_model_path: str) -> Iterator[list[Any]]:
    """Two engines on one torch thread: on a small shared CPU, two intra-op threads contending with other
    processes make the tiny model's forward ~50x slower (OpenMP spin-waits)."""
    import torch

    from gyre.rollout.hf import HFEngine

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    made = [HFEngine("tiny", engine_id=f"hf-{i}", max_batch_size=32) for i in range(2)]
    yield made
    for engine in made:
        asyncio.run(engine.close())
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def server(engines: list[Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyServer]:
    from gyre.models import load_tokenizer

    config = ProxyConfig(
        port=0,
        run_dir=str(tmp_path_factory.mktemp("proxy-run")),
        default_max_tokens=16,
        queue_timeout_s=10.0,
        max_body_bytes=1024 * 1024,
    )
    proxy = build_proxy(load_tokenizer("tiny"), engines, config)
    with ProxyServer(proxy) as running:
        yield running


@pytest.fixture
def proxy(server: ProxyServer):
    return server.proxy


@pytest.fixture
def execution(request: pytest.FixtureRequest, server: ProxyServer) -> Iterator[tuple[str, str]]:
    """(execution_id, key) of a fresh execution, closed after the test."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:120]
    execution_id = f"t-{name}-{next(_serial)}"
    key = server.proxy.open_execution(execution_id)
    yield execution_id, key
    with contextlib.suppress(KeyError):
        server.proxy.close_execution(key)


@pytest.fixture
def openai_client(server: ProxyServer, execution: tuple[str, str]):
    import openai

    return openai.OpenAI(base_url=server.openai_base_url, api_key=execution[1], max_retries=0, timeout=60)


@pytest.fixture
def anthropic_client(server: ProxyServer, execution: tuple[str, str]):
    import anthropic

    return anthropic.Anthropic(base_url=server.anthropic_base_url, api_key=execution[1], max_retries=0, timeout=60)


@pytest.fixture
def tuned(server: ProxyServer) -> Iterator[Any]:
    """``tuned(obj, **fields)`` sets attributes for the test and restores them afterwards."""
    saved: list[tuple[Any, str, Any]] = []

    def tune(obj: Any, **fields: Any) -> None:
        for name, value in fields.items():
            saved.append((obj, name, getattr(obj, name)))
            setattr(obj, name, value)

    yield tune
    for obj, name, value in reversed(saved):
        setattr(obj, name, value)
