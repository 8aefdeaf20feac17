"""An engine that replays given responses, for demonstrations recorded through the real proxy.

A demonstration is a harness run in which the "model" is a script: each call of an execution gets the
next response of that execution's script. Served behind the proxy like any engine, the harness, its
tools, the sandbox and the recorder all run for real, so the recorded calls are exactly what the policy
will later see and produce in such a conversation (same prompts, same token-exact extensions).

The execution is read from the session id the proxy gives engines (``<execution id>/<lineage>``). A
script that has run out answers with the end-of-turn token alone (an empty reply). Log-probs are 0: the
demonstrator chose each token with certainty.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from gyre.rollout.base import Generation, KVState, SamplingParams


class ScriptedEngine:
    def __init__(self, engine_id: str = "scripted", max_context: int | None = None) -> None:
        self.engine_id = engine_id
        self.max_context = max_context
        self.weight_version = 0
        self._scripts: dict[str, deque[list[int]]] = {}
        self._lock = threading.Lock()  # scripts are added from the driver's loop, read on the proxy's
        self.calls = 0
        self.exhausted = 0

    def add_script(self, execution_id: str, responses: Sequence[Sequence[int]]) -> None:
        """The responses, in order, that calls of ``execution_id`` get."""
        if "/" in execution_id:
            raise ValueError(f"execution id {execution_id!r} must not contain '/' (session ids use it)")
        with self._lock:
            self._scripts[execution_id] = deque(list(ids) for ids in responses)

    def remaining(self, execution_id: str) -> int:
        with self._lock:
            return len(self._scripts.get(execution_id, ()))

    async def generate(self, session_id: str, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        execution_id = session_id.split("/", 1)[0]
        with self._lock:
            self.calls += 1
            script = self._scripts.get(execution_id)
            ids = script.popleft() if script else None
        if ids is None:
            self.exhausted += 1
            ids = [sampling.stop_token_ids[0]] if sampling.stop_token_ids else []
        cut = ids[: sampling.max_new_tokens]
        stopped = bool(cut) and cut[-1] in sampling.stop_token_ids
        return Generation(cut, [0.0] * len(cut), "stop" if stopped else "length", self.weight_version)

    async def abort(self, session_id: str) -> bool:
        return False

    async def park(self, session_id: str) -> bool:
        return False  # no KV to free

    async def end_session(self, session_id: str) -> None:
        return None

    async def export_session(self, session_id: str) -> KVState | None:
        return None

    async def import_session(self, session_id: str, state: KVState) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def wake(self) -> None:
        return None

    async def load_weights(self, weights: Iterable[tuple[str, Any]], version: int) -> None:
        self.weight_version = version

    async def close(self) -> None:
        return None

    def stats(self) -> dict[str, float]:
        return {"calls": float(self.calls), "exhausted_scripts": float(self.exhausted)}
