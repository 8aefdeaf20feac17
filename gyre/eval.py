"""Evaluate a checkpoint on a task suite: ``python -m gyre.eval +recipe=deepswe model.path=... eval.samples=k``.

Starts ``eval.cells`` rollout engines and the proxy over them (the same serving stack as training),
runs every task of the suite ``eval.samples`` times through the `ExecutionPool` with the configured
harness, then prints per domain pass@1 (over the k samples), pass@k, mean partial score, timeouts and
crashes, and writes them as JSON (``eval.output``, default ``<run_dir>/eval.json``) with one row per
execution. ``harness.name=oracle`` runs the tasks' reference solutions instead, with no model at all:
a check that the suite, the sandbox and the scorers agree (every task should score 1.0).

The definitions of the numbers are in gyre/harness/report.py; conf/eval.yaml explains every key.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from gyre.cli import hydra_entry
from gyre.harness.config import HarnessConfig
from gyre.config import to_plain as plain
from gyre.harness.factory import make_pool
from gyre.harness.harnesses import get_harness
from gyre.harness.report import execution_rows, format_table, summarise



def select_tasks(tasks: list[Any], ids: list[str] | None, limit: int | None) -> list[Any]:
    """``eval.tasks`` (ids, in that order; an unknown id fails naming it) then ``eval.limit`` (first N)."""
    if ids:
        by_id = {task.id: task for task in tasks}
        missing = [task_id for task_id in ids if task_id not in by_id]
        if missing:
            raise ValueError(f"eval.tasks: unknown task id(s) {missing}; the suite has {sorted(by_id)[:20]}...")
        tasks = [by_id[task_id] for task_id in ids]
    if limit is not None:
        if limit < 1:
            raise ValueError(f"eval.limit must be >= 1 or null, got {limit}")
        tasks = tasks[:limit]
    return tasks


class Serving:
    """Rollout engines and the proxy over them, for harnesses that call a model."""

    def __init__(self, cfg: DictConfig, run_dir: Path) -> None:
        from gyre.models import load_tokenizer  # torch only when a model is served
        from gyre.proxy.config import ProxyConfig
        from gyre.proxy.server import ProxyServer, build_proxy
        from gyre.rollout import make_engine_from_config

        if cfg.eval.cells < 1:
            raise ValueError(f"eval.cells must be >= 1, got {cfg.eval.cells}")
        if cfg.eval.torch_threads:
            import torch

            torch.set_num_threads(int(cfg.eval.torch_threads))
        rollout = plain(cfg.rollout)
        model_path = str(cfg.model.path)
        self.engines = [
            make_engine_from_config(rollout, model_path=model_path, engine_id=f"cell-{index}") for index in range(cfg.eval.cells)
        ]
        config = ProxyConfig.from_mapping({**plain(cfg.proxy), "run_dir": str(run_dir / "proxy")})
        proxy = build_proxy(load_tokenizer(model_path), self.engines, config, call_capacity=int(cfg.eval.call_capacity))
        self.server = ProxyServer(proxy).start()

    def close(self) -> None:
        self.server.stop()
        for engine in self.engines:
            asyncio.run(engine.close())


async def _run_all(pool: Any, tasks: list[Any], samples: int) -> list[Any]:
    async with pool:
        return await pool.run(tasks, samples)


def evaluate(cfg: DictConfig, choices: dict[str, str] | None = None) -> dict[str, Any]:
    """Run the evaluation the config describes; returns (and writes) the report."""
    from gyre.envs.config import EnvConfig

    env = EnvConfig.from_config(cfg.env)
    loaded = env.load()  # the loader warns about each broken task it skips
    tasks = select_tasks(loaded.tasks, plain(cfg.eval.tasks), cfg.eval.limit)
    if not tasks:
        raise ValueError(f"no task to evaluate in {env.resolved_path()} (domain {env.domain}); {len(loaded.errors)} broken")
    samples = int(cfg.eval.samples)
    if samples < 1:
        raise ValueError(f"eval.samples must be >= 1, got {samples}")
    harness_config = HarnessConfig.from_mapping(plain(cfg.harness))
    run_dir = Path(cfg.run_dir).absolute()
    run_dir.mkdir(parents=True, exist_ok=True)

    serving = Serving(cfg, run_dir) if get_harness(harness_config.name).uses_model else None
    try:
        pool = make_pool(cfg, server=serving.server if serving else None, sandbox=env.sandbox, run_dir=run_dir)
        executions = asyncio.run(_run_all(pool, tasks, samples))
    finally:
        if serving is not None:
            serving.close()

    summary = summarise(executions)
    report = {
        "suite": {"domain": env.domain, "path": str(env.resolved_path()), "tasks": len(tasks), "broken": [str(e) for e in loaded.errors]},
        "choices": choices or {},
        "model": str(cfg.model.path) if serving else None,
        "harness": harness_config.name,
        "samples": samples,
        "summary": summary,
        "executions": execution_rows(executions),
    }
    output = Path(cfg.eval.output) if cfg.eval.output else run_dir / "eval.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1, default=str))
    print(format_table(summary), flush=True)
    print(f"report: {output}", flush=True)
    return report


@hydra_entry("eval")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    choices = {k: str(v) for k, v in HydraConfig.get().runtime.choices.items() if not k.startswith("hydra")}
    evaluate(cfg, choices)


if __name__ == "__main__":
    main()
