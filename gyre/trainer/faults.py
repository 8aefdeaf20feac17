"""Faults injected into a run on purpose, to see it survive them (``cluster.kill_cells``; tests and
``benchmarks/reliability.py``). Each entry kills one cell's processes, or one execution worker, at a chosen
moment:

    cluster.kill_cells=[{cell: cell2, step: 2, during: step}, {cell: cell1, step: 3, during: rollout},
                        {worker: worker1, step: 2}]

- ``during: step``: once the cell has trained a micro-batch of step ``step`` (a trainer mid-step: the core, or
  a satellite that joined it);
- ``during: rollout``: once ``step - 1`` steps are done and the cell serves rollouts with a call in flight;
- ``worker``: an execution worker (``cluster.execution_nodes`` > 0; ``worker<i>`` is the i-th node's) once
  ``step - 1`` steps are done and it runs executions. Its process dies as it would with its node: its
  executions fail as ``worker_lost`` and its proxy replica leaves the routing.

A kill that never finds its moment (the cell never trained in that step) is reported at the end, not forced.
The run's own loss handling does the rest (``Cluster.lose``); nothing here helps it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

MOMENTS = ("step", "rollout")


@dataclass
class CellKill:
    cell: str  # a cell id, or an execution worker's name when ``during`` is "worker"
    step: int
    during: str = "step"
    landed: bool = False

    @classmethod
    def parse(cls, entry: Any, cells: list[str], workers: list[str] = ()) -> CellKill:
        if isinstance(entry, dict) and not isinstance(entry.get("step", 1), int):
            raise ValueError(f"cluster.kill_cells entry {entry!r}: step is a step number (an integer >= 1)")
        if isinstance(entry, dict) and "worker" in entry:
            if set(entry) - {"worker", "step"} or "step" not in entry:
                raise ValueError(f"cluster.kill_cells entry {entry!r}: expected {{worker: <name>, step: <n>}}")
            kill = cls(str(entry["worker"]), int(entry["step"]), "worker")
            if kill.cell not in workers:
                raise ValueError(f"cluster.kill_cells: no execution worker {kill.cell!r}; workers are {list(workers)} "
                                 "(cluster.execution_nodes)")
        elif not isinstance(entry, dict) or set(entry) - {"cell", "step", "during"} or not {"cell", "step"} <= set(entry):
            raise ValueError(f"cluster.kill_cells entry {entry!r}: expected {{cell: <id>, step: <n>, during: step|rollout}} "
                             "or {worker: <name>, step: <n>}")
        else:
            kill = cls(str(entry["cell"]), int(entry["step"]), str(entry.get("during", "step")))
            if kill.cell not in cells:
                raise ValueError(f"cluster.kill_cells: no cell {kill.cell!r}; cells are {cells}")
            if kill.during not in MOMENTS:
                raise ValueError(f"cluster.kill_cells entry {entry!r}: during is one of {MOMENTS}")
        if kill.step < 1:
            raise ValueError(f"cluster.kill_cells entry {entry!r}: step >= 1")
        return kill


class FaultPlan:
    """The kills still to land; ``check(driver)`` lands those whose moment has come (called every loop turn).
    Kept across a restart of the cells (a kill that landed does not land again)."""

    def __init__(self, entries: list[Any], cells: list[str], workers: list[str] = ()) -> None:
        self.kills = [CellKill.parse(entry, cells, workers) for entry in entries]

    def check(self, driver: Any) -> None:
        for kill in self.kills:
            if not kill.landed and self._due(kill, driver):
                self._land(kill, driver)

    @staticmethod
    def _due(kill: CellKill, driver: Any) -> bool:
        if kill.during == "worker":
            slot = _worker(driver, kill.cell)
            return driver.steps_done >= kill.step - 1 and slot.alive and slot.running > 0
        cluster = driver.cluster
        if cluster.membership.is_dead(kill.cell):
            return False
        if kill.during == "step":
            step = cluster.step
            return driver.steps_done == kill.step - 1 and step is not None and step.done_by.get(kill.cell, 0) >= 1
        serving = cluster.membership.state(kill.cell) == "rollout"
        inflight = cluster.routing.inflight().get(kill.cell, 0) if cluster.routing is not None else 0
        return driver.steps_done >= kill.step - 1 and serving and inflight > 0

    @staticmethod
    def _land(kill: CellKill, driver: Any) -> None:
        import ray

        kill.landed = True
        if kill.during == "worker":
            log.warning("fault injection: killing execution worker %s (executions of step %d)", kill.cell, kill.step)
            ray.kill(_worker(driver, kill.cell).handle)
            return
        log.warning("fault injection: killing cell %s (%s of step %d)", kill.cell, kill.during, kill.step)
        for actor in driver.cluster.cells[kill.cell].ranks.members:
            ray.kill(actor)

    def missed(self) -> list[dict[str, Any]]:
        return [{"cell": k.cell, "step": k.step, "during": k.during} for k in self.kills if not k.landed]


def _worker(driver: Any, name: str) -> Any:
    """The execution worker's slot in the driver's pool (a `gyre.harness.nodes.NodePool`)."""
    return next(slot for slot in driver.pool.slots if slot.name == name)
