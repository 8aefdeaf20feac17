"""A rollout cell whose process dies mid-conversation, on real Ray cells, costs its sessions no call. (A
satellite lost mid-step against one trainer's update, and whole runs losing a satellite, a rollout cell, an
execution node and the core: the documented ``benchmarks/reliability.py`` run, its ``cells`` part, checked in
``tests/test_documented_commands.py``.)"""

from __future__ import annotations

import asyncio

import pytest
import ray

from gyre.models import load_tokenizer
from gyre.proxy.config import ProxyConfig
from gyre.proxy.routing import LocalRouting
from gyre.proxy.server import ProxyServer, build_proxy
from gyre.trainer.cluster import Cluster, ClusterConfig

from chat_sessions import assert_one_growing_path, converse  # tests/trainer/chat_sessions.py

pytestmark = pytest.mark.slow  # Ray cells (a minute): out of the fast tier (-m 'not slow')


SESSIONS, TURNS = 6, 4


def test_a_rollout_cell_lost_mid_conversation_costs_no_call(ray_session, tmp_path):
    pytest.importorskip("openai")  # the agents' client (chat_sessions.converse)
    proxy = build_proxy(load_tokenizer("tiny"), [], ProxyConfig(port=0, run_dir=str(tmp_path), fsync=False))
    server = ProxyServer(proxy).start()
    router = proxy.router

    async def scenario():
        cluster = Cluster(ClusterConfig(cells=2, cpus_per_cell=0.5, cell={"rollout": {"kind": "hf", "max_batch_size": 16}}),
                          routing=LocalRouting(router, server.on_loop))
        try:
            await cluster.start_rollout()
            keys = {f"ex{i}": proxy.open_execution(f"ex{i}") for i in range(SESSIONS)}
            turns_done = dict.fromkeys(keys, 0)
            clients = asyncio.gather(*[converse(server.openai_base_url, key, name, TURNS, turns_done, max_tokens=32,
                                                temperature=1.0) for name, key in keys.items()])
            # every session has a call answered, and cell1 has calls in flight: then its process dies
            while min(turns_done.values()) < 1 or router.stats()["cells"].get("cell1", {}).get("inflight", 0) == 0:
                await asyncio.sleep(0.002)
            ray.kill(cluster.cells["cell1"].engine_rank)
            await clients
            return cluster.lost, cluster.membership.state("cell1"), router.stats()
        finally:
            await cluster.close()

    try:
        lost, state, stats = asyncio.run(scenario())
    finally:
        server.stop()
    assert [entry["cell"] for entry in lost] == ["cell1"] and lost[0]["role"] == "rollout" and state == "dead"
    assert stats["cells_lost"] == 1 and list(stats["cells"]) == ["cell0"]
    records = {f"ex{i}": proxy.records(f"ex{i}") for i in range(SESSIONS)}
    for name, calls in records.items():
        assert_one_growing_path(name, calls, TURNS)
    retried = [r for calls in records.values() for r in calls
               if any(move["reason"] == "cell_lost" for move in r.meta.get("reroutes", []))]
    assert retried, "a call in flight on the lost cell was retried elsewhere"
    assert all(r.cell_id == "cell0" for r in retried)
    assert any(r.cell_id == "cell1" for calls in records.values() for r in calls)  # it did serve before

