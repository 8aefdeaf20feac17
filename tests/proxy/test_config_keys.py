"""Proxy keys that were removed fail naming the key and what to use instead, in every entry point; the
calls-in-flight limit per rollout cell is set beside the number of cells."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from gyre.config import ConfigError, to_plain
from gyre.proxy.config import ProxyConfig
from gyre.sim.config import CONF_DIR

ENTRY_POINTS = [("config", ["+recipe=deepswe"]), ("serve", []), ("eval", [])]


def composed(name: str, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return compose(config_name=name, overrides=list(overrides))


@pytest.mark.parametrize(("name", "base"), ENTRY_POINTS)
@pytest.mark.parametrize(("key", "names"), [
    ("cell_capacity", ["cluster.call_capacity", "serve.call_capacity", "eval.call_capacity"]),
    ("max_sessions_per_cell", ["cluster.capacity", "harness.concurrency"]),
])
def test_removed_proxy_keys_fail_saying_what_to_use(name, base, key, names):
    assert ProxyConfig.from_mapping(to_plain(composed(name, *base).proxy)).port >= 0  # left alone: builds
    with pytest.raises(ConfigError, match=rf"proxy\.{key} was removed") as info:
        ProxyConfig.from_mapping(to_plain(composed(name, *base, f"proxy.{key}=8").proxy))
    assert all(replacement in str(info.value) for replacement in names), info.value


def test_serve_and_eval_set_the_calls_per_cell():
    from gyre.models import load_tokenizer
    from gyre.proxy.server import build_proxy

    for name in ("serve", "eval"):
        assert composed(name, f"{name}.call_capacity=3")[name].call_capacity == 3
    proxy = build_proxy(load_tokenizer("tiny"), [object(), object()], ProxyConfig(), call_capacity=3)  # type: ignore[list-item]
    assert [cell.capacity for cell in proxy.router.cells.values()] == [3, 3]
    with pytest.raises(ValueError, match="call_capacity must be >= 1"):
        build_proxy(load_tokenizer("tiny"), [], ProxyConfig(), call_capacity=0)
