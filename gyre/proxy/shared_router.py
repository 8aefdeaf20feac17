"""One router shared by several proxy replicas: the routing state lives in a Ray actor they all consult.

With executions spread over several machines (``cluster.execution_nodes``), each execution node runs its
own proxy replica next to its harnesses (the HTTP front, chat rendering, parsing and durable recording:
the per-call CPU work). What must stay in one place is the routing state: which cell each execution's
sessions live on, the cells' in-flight calls and capacity, drains. `RouterService` holds the usual
`Router` (same placement, backpressure and drain code as the single proxy) inside a Ray actor;
`RemoteRouter` is what a replica's `Proxy` uses in place of a `Router`: each call's ``generate`` goes to
the actor, which runs it on the execution's cell (cells are `RemoteEngine`s over the cell actors, so any
node reaches them). A drain therefore moves every session exactly once, whichever replica its calls came
through: the retry after an abort happens inside the actor's ``generate``, invisible to the replica.

Cost: one Ray actor call per model call (about a millisecond of loopback RPC), paid to spread the proxy's
own CPU over the replicas' processes and machines.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gyre.proxy.router import DrainReport, OverloadedError, RoutedCell, RoutedGeneration, Router
from gyre.rollout.base import EngineAsleepError, PromptTooLongError, SamplingError, SamplingParams

log = logging.getLogger(__name__)

# Errors the proxy turns into API answers (429/529, 400): re-raised as themselves on the replica's side.
_PASSED_THROUGH = (OverloadedError, PromptTooLongError, SamplingError, EngineAsleepError, ValueError, KeyError)


class RouterService:
    """The shared `Router`, as a Ray actor (``ray.remote(RouterService)``; async, so calls interleave).

    Cells are added as Ray actor handles with the rollout engine interface (a cell's engine rank, or
    `gyre.cells.remote.EngineHost`)."""

    def __init__(self, queue_timeout_s: float = 30.0, retry_after_s: float = 1.0) -> None:
        self.router = Router(queue_timeout_s=queue_timeout_s, retry_after_s=retry_after_s)

    # Calls, from the replicas ---------------------------------------------------------------------

    async def generate(self, execution_id: str, session_id: str, prompt_ids: list[int],
                       sampling: SamplingParams) -> RoutedGeneration:
        return await self.router.generate(execution_id, session_id, list(prompt_ids), sampling)

    async def admit(self, execution_id: str) -> str:
        return await self.router.admit(execution_id)

    async def release(self, execution_id: str) -> None:
        self.router.release(execution_id)

    # Membership and drains, from the driver ---------------------------------------------------------

    async def route(self, cell_id: str, engine_actor: Any, capacity: int) -> None:
        """Let ``cell_id`` take executions: undrain it, or add it over ``engine_actor``."""
        from gyre.cells.remote import RemoteEngine

        if cell_id in self.router.cells:
            self.router.undrain(cell_id)
        else:
            self.router.add_cell(RoutedCell(cell_id, RemoteEngine(engine_actor, cell_id), capacity=capacity))

    async def drain(self, cell_ids: list[str]) -> list[DrainReport]:
        """Drain the routed ones of ``cell_ids`` together (all marked draining first, so no session moves
        onto a cell that is itself leaving)."""
        routed = [c for c in cell_ids if c in self.router.cells]
        for cell_id in routed:
            self.router.cells[cell_id].draining = True
        return list(await asyncio.gather(*[self.router.drain(cell_id) for cell_id in routed]))

    async def inflight(self) -> dict[str, int]:
        return {cell_id: cell.inflight for cell_id, cell in self.router.cells.items()}

    async def cell_of(self, execution_id: str) -> str | None:
        return self.router.cell_of(execution_id)

    async def stats(self) -> dict[str, Any]:
        return self.router.stats()


def unwrap_remote_error(error: BaseException) -> BaseException:
    """The exception a Ray actor raised, when it is one the proxy answers itself (else ``error``)."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, _PASSED_THROUGH) else error


class RemoteRouter:
    """A proxy replica's router: every routing decision is the shared `RouterService`'s.

    Has the parts of `Router` the `Proxy` uses (``generate``, ``admit``, ``release``, ``cells``, ``stats``).
    ``cells`` is empty: the replica holds no engine (the context window comes from ``proxy.context_window``)."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.cells: dict[str, RoutedCell] = {}
        self.counters = {"calls": 0, "released": 0}

    async def generate(self, execution_id: str, session_id: str, prompt_ids: list[int],
                       sampling: SamplingParams) -> RoutedGeneration:
        self.counters["calls"] += 1
        try:
            return await self.service.generate.remote(execution_id, session_id, list(prompt_ids), sampling)
        except Exception as error:
            cause = unwrap_remote_error(error)
            if cause is error:
                raise
            raise cause from None

    async def admit(self, execution_id: str) -> str:
        try:
            return await self.service.admit.remote(execution_id)
        except Exception as error:
            cause = unwrap_remote_error(error)
            if cause is error:
                raise
            raise cause from None

    def release(self, execution_id: str) -> None:
        """Forget the execution's placement (asynchronously: the caller may be the replica's event loop)."""
        self.counters["released"] += 1
        self.service.release.remote(execution_id)

    def stats(self) -> dict[str, Any]:
        return {"shared": True, **self.counters}
