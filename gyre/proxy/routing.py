"""How the cluster reaches the router when cells switch role: drain the leaving ones, route the returning ones.

- `LocalRouting`: the router of a proxy in this process (it lives on the proxy server's event loop, so
  every router operation runs there);
- `SharedRouting`: the `RouterService` actor that proxy replicas on several nodes share
  (``cluster.execution_nodes``).

Both give the driver each routed cell's in-flight calls (``inflight``: its idle accounting), the shared one
from a snapshot refreshed in the background (the driver's accounting is synchronous and approximate).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from gyre.proxy.router import DrainReport, RoutedCell, Router


class LocalRouting:
    def __init__(self, router: Router, on_router_loop: Callable[[Coroutine[Any, Any, Any]], Any] | None = None) -> None:
        self.router = router
        self.on_router_loop = on_router_loop or (lambda coroutine: coroutine)

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
            if cell_id in self.router.cells:
                self.router.undrain(cell_id)
            else:
                self.router.add_cell(RoutedCell(cell_id, RemoteEngine(actor, cell_id), capacity=capacity))

    def inflight(self) -> dict[str, int]:
        return {cell_id: cell.inflight for cell_id, cell in self.router.cells.items()}


class SharedRouting:
    def __init__(self, service: Any) -> None:
        self.service = service
        self._inflight: dict[str, int] = {}
        self._refreshing = False

    async def drain(self, cell_ids: list[str]) -> list[DrainReport]:
        return await self.service.drain.remote(cell_ids)

    async def route(self, engines: dict[str, Any], capacity: int) -> None:
        await asyncio.gather(*[self.service.route.remote(cell_id, actor, capacity) for cell_id, actor in engines.items()])

    def inflight(self) -> dict[str, int]:
        """The last snapshot (asks for a fresh one, which a later call sees)."""
        if not self._refreshing:
            self._refreshing = True
            self.service.inflight.remote().future().add_done_callback(self._refreshed)
        return self._inflight

    def _refreshed(self, future: Any) -> None:
        self._refreshing = False
        if future.exception() is None:
            self._inflight = future.result()
