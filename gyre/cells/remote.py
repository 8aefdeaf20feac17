"""A cell actor seen as a rollout engine, so the proxy's router drives remote cells like local engines.

KV states exported for a drain pass through the proxy's process on their way to the target cell (Ray's
object store carries them); on GPU clusters a direct cell-to-cell path would avoid that hop.
"""

from __future__ import annotations

from typing import Any, Iterable

from gyre.rollout.base import CellLostError, EngineAsleepError, Generation, KVState, SamplingParams


class RemoteEngine:
    def __init__(self, actor: Any, engine_id: str):
        self.actor = actor
        self.engine_id = engine_id

    async def generate(self, session_id: str, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        return await self._call("generate", session_id, prompt_ids, sampling)

    async def abort(self, session_id: str) -> bool:
        return await self._call("abort", session_id)

    async def export_session(self, session_id: str) -> KVState | None:
        return await self._call("export_session", session_id)

    async def import_session(self, session_id: str, state: KVState) -> None:
        await self._call("import_session", session_id, state)

    async def park(self, session_id: str) -> bool:
        return await self._call("park", session_id)

    async def end_session(self, session_id: str) -> None:
        await self._call("end_session", session_id)

    async def _call(self, method: str, *args: Any) -> Any:
        """The actor's method; Ray's errors turned into the router's signals: the engine is asleep, or the
        cell's process is gone (``CellLostError``)."""
        from ray.exceptions import RayActorError

        try:
            return await getattr(self.actor, method).remote(*args)
        except RayActorError as error:
            raise CellLostError(f"cell {self.engine_id} is lost: {error}") from error
        except Exception as error:  # Ray wraps the remote exception; keep the router's asleep signal
            cause = getattr(error, "cause", None)
            if isinstance(cause, EngineAsleepError) or "EngineAsleepError" in str(error):
                raise EngineAsleepError(str(cause or error)) from error
            raise

    async def sleep(self) -> None:  # role switches go through the cell, not the router
        raise NotImplementedError("switch a cell's role through the cluster, not its engine")

    async def wake(self) -> None:
        raise NotImplementedError("switch a cell's role through the cluster, not its engine")

    async def load_weights(self, weights: Iterable[tuple[str, Any]], version: int) -> None:
        raise NotImplementedError("weights reach cells through process groups (Cluster.sync_weights)")

    def stats(self) -> dict[str, float]:
        return {}


class ServesEngine:
    """The rollout engine protocol of an actor that hosts one (``self.engine``), delegated to it: what the
    router calls through a `RemoteEngine` (a cell's rank 0, `EngineHost`)."""

    engine: Any

    async def generate(self, session_id: str, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        return await self.engine.generate(session_id, prompt_ids, sampling)

    async def abort(self, session_id: str) -> bool:
        return await self.engine.abort(session_id)

    async def export_session(self, session_id: str) -> KVState | None:
        return await self.engine.export_session(session_id)

    async def import_session(self, session_id: str, state: KVState) -> None:
        await self.engine.import_session(session_id, state)

    async def park(self, session_id: str) -> bool:
        return await self.engine.park(session_id)

    async def end_session(self, session_id: str) -> None:
        await self.engine.end_session(session_id)


class EngineHost(ServesEngine):
    """A rollout engine alone in a Ray actor (``ray.remote(EngineHost)``), routable like a cell's engine rank:
    for serving a model on another node without the training side (and for benchmarks of the routing path).
    ``rollout`` is a ``conf/rollout`` section as a plain dict."""

    def __init__(self, rollout: dict[str, Any], model_path: str, engine_id: str, torch_threads: int = 1) -> None:
        import torch

        from gyre.rollout import make_engine_from_config

        torch.set_num_threads(torch_threads)
        self.engine = make_engine_from_config(rollout, model_path=model_path, engine_id=engine_id)

    def stats(self) -> dict[str, float]:
        return dict(self.engine.stats())
