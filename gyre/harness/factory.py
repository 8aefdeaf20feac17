"""Building a runner and a pool from the Hydra config (``harness`` and ``env`` sections).

The training launcher and `gyre.eval` both go through `make_pool`, so an execution runs the same way in
training and in evaluation.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gyre.config import to_plain
from gyre.harness.config import HarnessConfig
from gyre.harness.endpoint import ModelEndpoint, ProxyEndpoint
from gyre.harness.execution import ExecutionRunner
from gyre.harness.harnesses import get_harness
from gyre.harness.pool import ExecutionPool

if TYPE_CHECKING:
    from gyre.envs import Sandbox
    from gyre.proxy.server import ProxyServer


def check_isolation(harness: Any, sandbox: Sandbox) -> None:
    """Fail at once, naming the key to set, when a model-using harness would run unisolated (the process
    sandbox without ``env.sandbox.allow_unisolated``); ``harness`` is the ``harness`` config section."""
    from gyre.envs import SandboxError

    config = HarnessConfig.from_mapping(to_plain(harness))
    if get_harness(config.name).uses_model:
        refusal = sandbox.unisolated_refusal()
        if refusal is not None:
            raise SandboxError(f"harness {config.name!r}: {refusal}")


def make_runner(
    harness_config: HarnessConfig,
    *,
    sandbox: Sandbox,
    run_dir: str | Path,
    eval_retries: int = 2,
    endpoint: ModelEndpoint | None = None,
) -> ExecutionRunner:
    """A runner for ``harness_config.name`` whose executions live under ``run_dir``."""
    execution = dataclasses.replace(harness_config.execution, run_dir=str(run_dir), eval_retries=eval_retries)
    config = dataclasses.replace(harness_config, execution=execution)
    harness = get_harness(config.name)
    return ExecutionRunner(harness, sandbox, config, endpoint if harness.uses_model else None)


def make_pool(
    cfg: Any,
    *,
    proxy: Any = None,
    server: ProxyServer | None = None,
    sandbox: Sandbox | None = None,
    run_dir: str | Path | None = None,
    endpoint: ModelEndpoint | None = None,
) -> ExecutionPool:
    """The pool for a composed config: ``cfg.harness`` picks and tunes the harness, ``cfg.env`` gives
    ``eval_retries`` and the sandbox (unless ``sandbox`` is given). Executions go to
    ``<run_dir>/executions``. ``server`` (a started `ProxyServer`) or ``endpoint`` is needed by every
    harness but the oracle; ``proxy`` is accepted for symmetry with the launcher and not used (the
    server holds it)."""
    from gyre.envs import Sandbox

    harness_config = HarnessConfig.from_mapping(to_plain(cfg.harness))
    env = to_plain(cfg.env) if "env" in cfg else {}
    if sandbox is None:
        sandbox = Sandbox.from_config(env.get("sandbox"))
    if endpoint is None and server is not None:
        endpoint = ProxyEndpoint(server)
    folder = Path(run_dir if run_dir is not None else cfg.run_dir) / "executions"
    runner = make_runner(
        harness_config, sandbox=sandbox, run_dir=folder, eval_retries=int(env.get("eval_retries", 2)), endpoint=endpoint
    )
    return ExecutionPool(
        runner,
        concurrency=harness_config.concurrency,
        score_concurrency=harness_config.score_concurrency,
        progress=harness_config.progress,
        label=harness_config.name,
    )
