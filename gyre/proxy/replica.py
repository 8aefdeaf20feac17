"""A proxy replica: the proxy of one execution node, on that node's loopback, routing its own executions.

With executions spread over several machines (``cluster.execution_nodes``), each execution node runs a
replica next to its harnesses, so the per-call work (HTTP, chat rendering, parsing, durable recording) is
spread over the nodes and a call crosses the network once, from the replica to its cell's engine.

Routing state is partitioned, not centralised: every execution is served by exactly one replica (the one on
its node), so its session affinity, in-flight calls and KV moves are that replica's own, held by the usual
`Router`. What every replica must agree on, the cells (which exist, which are draining, their capacity), is
set by the driver on all of them at once (`gyre.proxy.routing.ReplicatedRouting`): a drain runs on every
replica concurrently and each moves its own executions, so each session still moves exactly once. A cell's
call capacity is split between the replicas. Why not one central router that every call consults: that
is one Ray round trip per call (about a millisecond of CPU each on a 2-core host), paid serially in the one
router process, which then bounds the whole cluster's call rate (at 256 concurrent sessions it added
~0.5 s to the median call, whatever the number of replicas).

Use it in-process (`gyre.harness.nodes.ExecutionWorker` does) or as a Ray actor (``ray.remote(ProxyReplica)``).
"""

from __future__ import annotations

from typing import Any

from gyre.protocol import CallRecord
from gyre.proxy.router import DrainReport, Occupancy


class ProxyReplica:
    def __init__(self, proxy: dict[str, Any], model_path: str, run_dir: str) -> None:
        from gyre.models import load_tokenizer
        from gyre.proxy.config import ProxyConfig
        from gyre.proxy.routing import LocalRouting
        from gyre.proxy.server import ProxyServer, build_proxy

        config = ProxyConfig.from_mapping({**proxy, "host": "127.0.0.1", "port": 0, "run_dir": run_dir})
        self.server = ProxyServer(build_proxy(load_tokenizer(model_path), [], config)).start()
        self.routing = LocalRouting(self.server.proxy.router, self.server.on_loop)

    # Cells, set by the driver on every replica ----------------------------------------------------------

    async def route(self, engines: dict[str, Any], capacity: int) -> None:
        await self.routing.route(engines, capacity)

    async def drain(self, cell_ids: list[str]) -> list[DrainReport]:
        return await self.routing.drain(cell_ids)

    async def lose(self, cell_ids: list[str], reason: str = "its process died") -> None:
        await self.routing.lose(cell_ids, reason)

    async def inflight(self) -> dict[str, int]:
        async def snapshot() -> dict[str, int]:  # read on the router's own loop
            return self.routing.inflight()

        return await self.server.on_loop(snapshot())

    async def occupancy(self) -> Occupancy:
        async def snapshot() -> Occupancy:  # read on the router's own loop
            return self.server.proxy.router.occupancy()

        return await self.server.on_loop(snapshot())

    # Executions (harnesses reach the replica over HTTP; these are for the node's worker, tests, benchmarks)

    def base_url(self) -> str:
        return self.server.base_url

    def open_execution(self, execution_id: str) -> str:
        return self.server.call(self._open(execution_id))

    async def _open(self, execution_id: str) -> str:
        return self.server.proxy.open_execution(execution_id)

    def records(self, execution_id: str) -> list[CallRecord]:
        return self.server.proxy.records(execution_id)

    def stop(self) -> None:
        self.server.stop()
