"""Build a training run from the composed Hydra config and run it: Ray cells, the proxy, the harness pool,
the scheduling policy, tracking; then the driver loop until ``trainer.total_steps``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from gyre.algo.losses import LossConfig
from gyre.config import build, to_plain, without_moved
from gyre.models import resolve_device
from gyre.scheduler import SchedulerConfig, make_policy
from gyre.trainer.cluster import ClusterConfig
from gyre.trainer.fit import LoopConfig
from gyre.trajectory.processor import TrajectoryConfig

log = logging.getLogger(__name__)


@dataclass
class TrainerSection:
    """Every key of ``conf/trainer``, typed: the driver loop's, the optimiser's and the step's."""

    total_steps: int
    group_size: int
    lr: float
    weight_decay: float
    max_grad_norm: float | None
    ppo_epochs: int
    max_tokens_per_microbatch: int
    attention_backend: str
    attention_block_size: int
    save_every: int
    resume: bool
    val_every: int
    val_samples: int
    val_at_start: bool
    val_fraction: float
    timeline_every: int
    poll_s: float


# Keys that left conf/trainer; their old names stay there as null so that a value set for one fails naming
# the new key (gyre.config.without_moved).
MOVED_FROM_TRAINER = {"max_staleness": "scheduler.max_staleness", "stale_policy": "scheduler.stale_policy"}


def loop_config(cfg: DictConfig) -> LoopConfig:
    trainer = build(TrainerSection, without_moved(cfg.trainer, "trainer", MOVED_FROM_TRAINER), "trainer")
    if trainer.ppo_epochs < 1:
        raise ValueError(f"trainer.ppo_epochs must be >= 1, got {trainer.ppo_epochs}")
    if trainer.ppo_epochs > 1 and cfg.algo.proximal != "behavior":
        # recompute takes the proximal log-probs from each pass's own forward: the later passes would have a
        # ratio of 1 and nothing would bound how far they move.
        raise ValueError(f"trainer.ppo_epochs={trainer.ppo_epochs} needs algo.proximal=behavior (got "
                         f"{cfg.algo.proximal!r}): the later passes must be clipped against a fixed policy")
    loop_keys = set(LoopConfig.__dataclass_fields__) - {"seed"}
    return LoopConfig(**{k: getattr(trainer, k) for k in loop_keys}, seed=cfg.seed)


@dataclass
class ExecutionNodes:
    """Where executions run: the driver's machine (``count`` 0) or one worker per Ray node with a ``sandbox``
    resource (``gyre.harness.nodes``); the ``cluster.execution_nodes`` keys."""

    count: int = 0  # cluster.execution_nodes
    sandbox_per_execution: float = 1.0
    simulate: bool = False  # cluster.simulate_execution_nodes: start the nodes on this machine

    @classmethod
    def from_config(cls, cfg: DictConfig) -> ExecutionNodes:
        cluster = cfg.cluster
        nodes = cls(int(cluster.get("execution_nodes", 0) or 0), float(cluster.get("sandbox_per_execution", 1.0)),
                    bool(cluster.get("simulate_execution_nodes", False)))
        if nodes.count < 0:
            raise ValueError(f"cluster.execution_nodes must be >= 0, got {nodes.count}")
        return nodes


EXECUTION_NODE_KEYS = ("execution_nodes", "sandbox_per_execution", "simulate_execution_nodes")


def cluster_config(cfg: DictConfig) -> ClusterConfig:
    cluster = {k: v for k, v in to_plain(cfg.cluster).items() if k not in EXECUTION_NODE_KEYS}
    rollout = to_plain(cfg.rollout)
    loss = build(LossConfig, cfg.algo, "algo")  # validate before the actors see it
    cell = {
        "model_path": cfg.model.path,
        "dtype": cfg.model.dtype,
        "device": resolve_device(rollout.get("device", "cpu")),  # the training replica's device
        "rollout": rollout,
        # algo.kl_coef > 0: every trainer replica holds the starting policy, frozen, as its reference
        "reference_path": cfg.model.path if loss.kl_coef else None,
        "lr": cfg.trainer.lr,
        "weight_decay": cfg.trainer.weight_decay,
        "loss": to_plain(cfg.algo),
        "step": {"attention_backend": cfg.trainer.attention_backend,
                 "attention_block_size": cfg.trainer.attention_block_size,
                 "max_grad_norm": cfg.trainer.max_grad_norm},
        "torch_threads": cluster.pop("torch_threads", 1),
    }
    return build(ClusterConfig, cluster, "cluster", cell=cell)


def split_tasks(tasks: list[Any], val_fraction: float, seed: int) -> tuple[list[Any], list[Any]]:
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"trainer.val_fraction must be in [0, 1), got {val_fraction}")
    order = list(tasks)
    random.Random(seed).shuffle(order)
    n_val = int(round(len(order) * val_fraction))
    return order[n_val:], order[:n_val]


def run(cfg: DictConfig) -> int:
    """The whole job; returns the number of training steps done."""
    import ray

    from gyre.envs.config import EnvConfig
    from gyre.harness import make_pool
    from gyre.harness.factory import check_isolation
    from gyre.models import load_tokenizer
    from gyre.proxy.config import ProxyConfig
    from gyre.proxy.routing import LocalRouting
    from gyre.proxy.server import ProxyServer, build_proxy
    from gyre.tracking import Tracker
    from gyre.trainer.cluster import Cluster, CoreLostError
    from gyre.trainer.faults import FaultPlan
    from gyre.trainer.figures import plot_timeline
    from gyre.trainer.fit import Driver

    run_dir = Path(cfg.run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    if cfg.get("warm_start"):
        from gyre.trainer.warm_start import warm_start

        with open_dict(cfg):
            cfg.model.path = warm_start(cfg, run_dir)  # the recipe's supervised start (built once, then cached)
    loop_cfg = loop_config(cfg)
    on_policy = {"max_staleness": 0} if cfg.scheduler.name == "colocate" else {}  # colocate generates nothing ahead
    scheduler_cfg = build(SchedulerConfig, cfg.scheduler, "scheduler", **on_policy)
    if scheduler_cfg.batch_size % loop_cfg.group_size:
        raise ValueError(
            f"scheduler.batch_size={scheduler_cfg.batch_size} must be a multiple of trainer.group_size={loop_cfg.group_size}"
        )
    policy = make_policy(scheduler_cfg)
    trajectory_cfg = build(TrajectoryConfig, cfg.trajectory, "trajectory", seed=cfg.seed)
    cluster_cfg = cluster_config(cfg)

    env = EnvConfig.from_config(cfg.env)
    check_isolation(cfg.harness, env.sandbox)  # before anything starts: no agent runs unisolated by default
    loaded = env.load()  # the loader warns about each broken task it skips
    if not loaded.tasks:
        raise ValueError(f"env.path={env.path!r} ({env.resolved_path()}) holds no loadable {env.domain} task")
    held_out = env.load_val()
    if held_out is None:
        tasks, val_tasks = split_tasks(loaded.tasks, cfg.trainer.val_fraction, cfg.seed)
    else:
        tasks, val_tasks = loaded.tasks, held_out.tasks

    nodes = ExecutionNodes.from_config(cfg)
    simulated = None
    if not ray.is_initialized():
        runtime_env = {"env_vars": {k: v for k, v in os.environ.items() if k.startswith("GYRE_")}}
        if nodes.count and nodes.simulate:
            from gyre.harness.nodes import SimulatedNodes

            per_node = int(cfg.harness.concurrency * nodes.sandbox_per_execution)
            simulated = SimulatedNodes(nodes.count, per_node, runtime_env=runtime_env)
        elif os.environ.get("RAY_ADDRESS"):  # the cluster it names
            ray.init(address=os.environ["RAY_ADDRESS"], include_dashboard=False, log_to_driver=False,
                     configure_logging=False, runtime_env=runtime_env)
        else:  # a fresh local instance (never a stray one on a shared machine), up until this process exits: the
            # points of a sweep (one process) share it, as they shared ray.init's
            from gyre.single_controller.local_ray import LocalRay

            LocalRay(runtime_env=runtime_env)
    server = None
    try:
        sandbox = env.sandbox
        if nodes.count:  # a worker and a proxy replica on each execution node (gyre.harness.nodes)
            from gyre.harness.nodes import NodePool, start_workers
            from gyre.proxy.routing import ReplicatedRouting

            slots = start_workers(nodes.count, harness=to_plain(cfg.harness), env=to_plain(cfg.env),
                                  proxy=to_plain(cfg.proxy), model_path=cfg.model.path, run_dir=str(run_dir),
                                  sandbox_per_execution=nodes.sandbox_per_execution)
            routing: Any = ReplicatedRouting([slot.handle for slot in slots])
        else:
            proxy_cfg = ProxyConfig.from_mapping({**to_plain(cfg.proxy), "run_dir": str(run_dir)})
            proxy = build_proxy(load_tokenizer(cfg.model.path), [], proxy_cfg)
            server = ProxyServer(proxy).start()
            routing = LocalRouting(proxy.router, server.on_loop)

        faults = FaultPlan(cluster_cfg.kill_cells, [f"cell{i}" for i in range(cluster_cfg.cells)],
                           [f"worker{i}" for i in range(nodes.count)])

        async def attempt(tracker: Any, resume: bool) -> int:
            """The cells, the executions and the loop, from the last checkpoint when ``resume``."""
            cluster = Cluster(cluster_cfg, routing=routing)
            if nodes.count:
                pool = NodePool(slots, progress=bool(cfg.harness.get("progress", True)), label=str(cfg.harness.name))
            else:
                pool = make_pool(cfg, server=server, sandbox=sandbox, run_dir=run_dir)
            driver = Driver(replace(loop_cfg, resume=resume), trajectory_cfg, policy, cluster, pool, tasks, tracker,
                            run_dir, val_tasks=val_tasks, progress=ProgressLine(), faults=faults)
            try:
                steps = await driver.run()
                plot_timeline(driver)
                return steps
            finally:
                if nodes.count:
                    await pool.stop()  # the workers outlive an attempt: the next one (a core restart) reuses them
                else:
                    await pool.close()
                await cluster.close()

        async def main() -> int:
            config = OmegaConf.to_container(cfg, resolve=True)
            with Tracker(run_dir, backends=list(cfg.tracking.backends), project=cfg.tracking.project,
                         run_name=cfg.tracking.run_name, config=config, wandb_mode=cfg.tracking.wandb_mode,
                         resume=loop_cfg.resume) as tracker:
                try:
                    return await attempts(tracker)
                finally:
                    if nodes.count:
                        from gyre.harness.nodes import end_workers

                        await end_workers(slots)

        async def attempts(tracker: Any) -> int:
            """Attempts until one ends the run; a lost core restarts the cells from the last checkpoint."""
            restarts = 0
            while True:
                try:
                    steps = await attempt(tracker, resume=loop_cfg.resume or restarts > 0)
                    if faults.missed():
                        log.warning("cluster.kill_cells that never found their moment: %s", faults.missed())
                    return steps
                except CoreLostError as error:
                    restarts += 1
                    if restarts > cluster_cfg.max_cell_restarts:
                        raise CoreLostError(f"{error}; cluster.max_cell_restarts={cluster_cfg.max_cell_restarts} "
                                            "restarts spent") from error
                    log.error("%s: the cells restart from the last checkpoint (restart %d of at most %d)",
                              error, restarts, cluster_cfg.max_cell_restarts)
                    with (run_dir / "core_restarts.jsonl").open("a") as restarts_log:
                        restarts_log.write(json.dumps({"time": time.time(), "error": str(error)[:500]}) + "\n")

        return asyncio.run(main())
    finally:
        if server is not None:
            server.stop()
        if simulated is not None:
            simulated.shutdown()


class ProgressLine:
    """A live status line: executions running / ready, the step, each cell's role."""

    def __init__(self) -> None:
        from gyre.progress import progress_console

        self.console = progress_console()
        self._last = 0.0

    def __call__(self, driver: Any) -> None:
        import time

        now = time.monotonic()
        if now - self._last < 2.0:
            return
        self._last = now
        roles = " ".join(f"{v.id}:{v.role.value[0].upper()}" for v in driver.cluster.views())
        self.console.print(
            f"[dim]step {driver.steps_done}/{driver.cfg.total_steps} | running {driver.buffer.running} | "
            f"ready {driver.buffer.ready_count} | training {'yes' if driver.training else 'no'} | "
            f"version {driver.cluster.version} | {roles}[/dim]",
            soft_wrap=True,  # one line, however many cells
        )
