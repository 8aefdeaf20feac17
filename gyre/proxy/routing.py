"""How the cluster reaches the router when cells switch role: drain the leaving ones, route the returning ones.

- `LocalRouting`: the router of a proxy in this process (it lives on the proxy server's event loop, so
  every router operation runs there);
- `ReplicatedRouting`: the proxy replicas of the execution nodes (``cluster.execution_nodes``), each
  routing its own executions over the same cells.

Both give the driver each routed cell's in-flight calls (``inflight``: its idle accounting) and the
sessions' occupancy of the cells (``occupancy``: which hold only parked sessions, and the share of its time a
session holds a slot; the scheduler's view), the replicated one from snapshots refreshed in the background
(the driver's view is synchronous and approximate).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Coroutine
from typing import Any

from gyre.proxy.router import DrainReport, Occupancy, RoutedCell, Router

log = logging.getLogger(__name__)


class LocalRouting:
    def __init__(self, router: Router, on_router_loop: Callable[[Coroutine[Any, Any, Any]], Any] | None = None) -> None:
        self.router = router
        self.on_router_loop = on_router_loop or (lambda coroutine: coroutine)
        self._occupancy = Occupancy()

    async def drain(self, cell_ids: list[str]) -> list[DrainReport]:
        """Drain the routed ones of ``cell_ids`` together: all are marked draining first."""
        return await self.on_router_loop(self._drain(cell_ids))

    async def _drain(self, cell_ids: list[str]) -> list[DrainReport]:
        routed = [c for c in cell_ids if c in self.router.cells]
        for cell_id in routed:
            self.router.cells[cell_id].draining = True
        return list(await asyncio.gather(*[self.router.drain(cell_id) for cell_id in routed]))

    async def route(self, engines: dict[str, Any], capacity: int) -> None:
        """Let each cell take executions again: undrain it, or add it over its engine actor."""
        await self.on_router_loop(self._route(engines, capacity))

    async def _route(self, engines: dict[str, Any], capacity: int) -> None:
        from gyre.cells.remote import RemoteEngine

        for cell_id, actor in engines.items():
            routed = self.router.cells.get(cell_id)
            if routed is not None and getattr(routed.engine, "actor", actor) != actor:
                self.router.lose_cell(cell_id, "closed")  # a stale entry, of a process that is gone (a restart)
                routed = None
            if routed is not None:
                self.router.undrain(cell_id)
            else:
                self.router.add_cell(RoutedCell(cell_id, RemoteEngine(actor, cell_id), capacity=capacity))

    def inflight(self) -> dict[str, int]:
        return {cell_id: cell.inflight for cell_id, cell in self.router.cells.items()}

    def occupancy(self) -> Occupancy:
        """Read from the driver's thread while the router's loop may change it: a read that meets a change
        keeps the last one."""
        try:
            self._occupancy = self.router.occupancy()
        except RuntimeError:  # a dict changed size while it was read
            pass
        return self._occupancy

    async def lose(self, cell_ids: list[str], reason: str = "its process died") -> None:
        """The cells' processes died (or were closed): route nothing more to them (their calls in flight retry
        elsewhere)."""
        await self.on_router_loop(self._lose(cell_ids, reason))

    async def _lose(self, cell_ids: list[str], reason: str) -> None:
        for cell_id in cell_ids:
            self.router.lose_cell(cell_id, reason)


class ReplicatedRouting:
    """The cells, set on every proxy replica at once (`gyre.proxy.replica`; handles of Ray actors that have
    its ``route`` / ``drain`` / ``inflight``). Each replica routes its own executions; a cell's call capacity
    is split between the live replicas. A replica that died is left out from then on (its executions have
    failed with its node's worker)."""

    def __init__(self, replicas: list[Any]) -> None:
        if not replicas:
            raise ValueError("ReplicatedRouting needs at least one proxy replica")
        self.replicas = list(replicas)
        self._inflight = _Snapshot(lambda: self._on_all("inflight"), _summed_calls, {})
        self._occupancy = _Snapshot(lambda: self._on_all("occupancy"), Occupancy.merged, Occupancy())

    async def drain(self, cell_ids: list[str]) -> list[DrainReport]:
        """Drain on every replica concurrently; one report per cell, summed over the replicas."""
        per_replica = await self._on_all("drain", cell_ids)
        merged: dict[str, DrainReport] = {}
        for reports in per_replica:
            for report in reports:
                total = merged.setdefault(report.cell_id, DrainReport(report.cell_id))
                total.moved_executions += report.moved_executions
                total.aborted_calls += report.aborted_calls
                total.kv_imports += report.kv_imports
                total.kv_missing += report.kv_missing
                total.seconds = max(total.seconds, report.seconds)
        return [merged[c] for c in cell_ids if c in merged]

    async def route(self, engines: dict[str, Any], capacity: int) -> None:
        share = max(1, math.ceil(capacity / len(self.replicas)))
        await self._on_all("route", engines, share)

    async def lose(self, cell_ids: list[str], reason: str = "its process died") -> None:
        await self._on_all("lose", cell_ids, reason)

    async def _on_all(self, method: str, *args: Any) -> list[Any]:
        from ray.exceptions import RayActorError

        replicas = list(self.replicas)
        results = await asyncio.gather(*[getattr(r, method).remote(*args) for r in replicas], return_exceptions=True)
        kept = []
        for replica, result in zip(replicas, results):
            if isinstance(result, RayActorError):
                log.error("a proxy replica died (%s); routing on the %d others", result, len(replicas) - 1)
                self.replicas.remove(replica)
            elif isinstance(result, BaseException):
                raise result
            else:
                kept.append(result)
        return kept

    def inflight(self) -> dict[str, int]:
        """The last snapshot, summed over the replicas (asks for a fresh one, which a later call sees)."""
        return self._inflight.read()

    def occupancy(self) -> Occupancy:
        """The last snapshot, merged over the replicas (asks for a fresh one, which a later call sees)."""
        return self._occupancy.read()


class _Snapshot:
    """A value gathered from every replica in the background: ``read`` returns the last one merged and, unless
    one is under way, asks for a fresh one (the driver reads synchronously; the replicas answer later)."""

    def __init__(self, ask: Callable[[], Coroutine[Any, Any, list[Any]]], merge: Callable[[list[Any]], Any],
                 initial: Any) -> None:
        self.ask, self.merge, self.value = ask, merge, initial
        self._asking = False

    def read(self) -> Any:
        if not self._asking:
            self._asking = True
            asyncio.ensure_future(self.ask()).add_done_callback(self._answered)
        return self.value

    def _answered(self, future: asyncio.Future) -> None:
        self._asking = False
        if not future.cancelled() and future.exception() is None:
            self.value = self.merge(list(future.result()))


def _summed_calls(snapshots: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for snapshot in snapshots:
        for cell_id, calls in snapshot.items():
            total[cell_id] = total.get(cell_id, 0) + calls
    return total
