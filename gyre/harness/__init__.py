"""Running agent harnesses as sandboxed processes against the proxy, and scoring what they leave.

- `gyre.harness.reference`: our own agent program (``python -m gyre.harness.reference``);
- `gyre.harness.harnesses`: one class per harness (reference, oracle, mini-swe-agent, claude-code, codex)
  giving its command line and environment;
- `gyre.harness.execution`: one execution from workspace to score (`ExecutionRunner`);
- `gyre.harness.pool`: many at once (`ExecutionPool`); `make_pool` builds one from the Hydra config.

See gyre/harness/README.md. This package never imports torch: names are exported lazily, so that
``python -m gyre.harness.reference`` (run once per execution) loads nothing it does not use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gyre.harness.config import ExecutionConfig, HarnessConfig
    from gyre.harness.endpoint import ModelEndpoint, ProxyEndpoint
    from gyre.harness.execution import ExecutionRequest, ExecutionRunner, is_scorable
    from gyre.harness.factory import make_pool, make_runner
    from gyre.harness.harnesses import HARNESSES, get_harness
    from gyre.harness.pool import ExecutionPool

_EXPORTS = {
    "ExecutionConfig": "gyre.harness.config",
    "HarnessConfig": "gyre.harness.config",
    "ModelEndpoint": "gyre.harness.endpoint",
    "ProxyEndpoint": "gyre.harness.endpoint",
    "ExecutionRequest": "gyre.harness.execution",
    "ExecutionRunner": "gyre.harness.execution",
    "is_scorable": "gyre.harness.execution",
    "make_pool": "gyre.harness.factory",
    "make_runner": "gyre.harness.factory",
    "HARNESSES": "gyre.harness.harnesses",
    "get_harness": "gyre.harness.harnesses",
    "ExecutionPool": "gyre.harness.pool",
}

__all__ = [
    "HARNESSES",
    "ExecutionConfig",
    "ExecutionPool",
    "ExecutionRequest",
    "ExecutionRunner",
    "HarnessConfig",
    "ModelEndpoint",
    "ProxyEndpoint",
    "get_harness",
    "is_scorable",
    "make_pool",
    "make_runner",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gyre.harness' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
