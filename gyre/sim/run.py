"""Run the configured policies on one world (same workload stream, same rate models, same ideal bound)."""

from __future__ import annotations

from gyre.scheduler import SchedulerConfig
from gyre.sim.config import RootCfg
from gyre.sim.engine import Simulator
from gyre.sim.result import SimResult
from gyre.sim.world import World


def scheduler_config(root: RootCfg, policy: str, world: World) -> SchedulerConfig:
    """The ``SchedulerConfig`` a policy runs with: ``scheduler.*`` plus the async split when left null."""
    sched = root.scheduler
    rollout_cells = sched.rollout_cells if sched.rollout_cells is not None else world.async_rollout_cells()
    return SchedulerConfig(name=policy, batch_size=sched.batch_size, max_staleness=sched.max_staleness,
                           stale_policy=sched.stale_policy, rollout_cells=rollout_cells,
                           stream_from=sched.stream_from)


def simulate(root: RootCfg, policies: list[str] | None = None, world: World | None = None) -> list[SimResult]:
    """One ``SimResult`` per policy (``sim.policies`` unless given), in order."""
    world = world or World(root)
    return [Simulator(world, scheduler_config(root, name, world)).run() for name in (policies or root.sim.policies)]
