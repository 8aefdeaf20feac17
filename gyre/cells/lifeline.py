"""Knowing at once that a cell's process died: each rank actor holds one call that never returns
(``CellRank.lifeline``); Ray fails it with ``RayActorError`` the moment the actor dies (its process, or its
node), and the watcher tells its owner which cell is lost. Nothing polls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def is_process_death(error: BaseException) -> bool:
    """Whether ``error`` is Ray's word that an actor's process is gone (not an error raised inside it)."""
    from ray.exceptions import RayActorError

    return isinstance(error, RayActorError)


class CellWatch:
    """Watches cells' rank actors; ``on_lost(cell_id, error)`` runs once per cell whose process died."""

    def __init__(self, on_lost: Callable[[str, BaseException], None]) -> None:
        self.on_lost = on_lost
        self._tasks: dict[str, asyncio.Task] = {}
        self.stopped = False

    def watch(self, cell_id: str, rank_actors: list[Any]) -> None:
        """Start watching ``cell_id`` (again, for a replacement of a lost cell); needs a running loop."""
        old = self._tasks.pop(cell_id, None)
        if old is not None:
            old.cancel()
        self._tasks[cell_id] = asyncio.ensure_future(self._watch(cell_id, rank_actors))

    async def _watch(self, cell_id: str, rank_actors: list[Any]) -> None:
        try:
            await asyncio.gather(*[actor.lifeline.remote() for actor in rank_actors])
        except Exception as error:  # noqa: BLE001 - only a process death is news; anything else is logged
            if self.stopped:
                return
            if is_process_death(error):
                self.on_lost(cell_id, error)
            else:
                log.error("the lifeline of cell %s failed without its process dying: %s", cell_id, error)

    def stop(self) -> None:
        """Closing: the actors are about to be killed on purpose."""
        self.stopped = True
        for task in self._tasks.values():
            task.cancel()
        self._tasks.clear()
