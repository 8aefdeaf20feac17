"""Role switches in both directions while executions are live: no call lost or duplicated."""

from __future__ import annotations

import asyncio

import pytest

from gyre.models import load_tokenizer
from gyre.proxy.config import ProxyConfig
from gyre.proxy.routing import LocalRouting
from gyre.proxy.server import ProxyServer, build_proxy
from gyre.scheduler.state import Role
from gyre.trainer.cluster import Cluster, ClusterConfig

from chat_sessions import assert_one_growing_path, converse  # tests/trainer/chat_sessions.py

pytestmark = pytest.mark.slow  # Ray cells switching under live executions (minutes): out of the fast tier (-m 'not slow')

SESSIONS, TURNS = 8, 4


def test_switches_during_live_executions_lose_and_duplicate_nothing(ray_session, tmp_path):
    pytest.importorskip("openai")  # the agents' client (chat_sessions.converse)
    proxy = build_proxy(load_tokenizer("tiny"), [], ProxyConfig(port=0, run_dir=str(tmp_path), fsync=False))
    server = ProxyServer(proxy).start()

    async def scenario():
        cluster = Cluster(ClusterConfig(cells=2, cpus_per_cell=0.5, cell={"rollout": {"kind": "hf", "max_batch_size": 16}}),
                          routing=LocalRouting(proxy.router, server.on_loop))
        await cluster.start_rollout()
        keys = {f"ex{i}": proxy.open_execution(f"ex{i}") for i in range(SESSIONS)}
        turns_done = dict.fromkeys(keys, 0)
        clients = asyncio.gather(*[converse(server.openai_base_url, key, name, TURNS, turns_done, max_tokens=24,
                                            temperature=1.0) for name, key in keys.items()])
        # Every session is mid-conversation, each with a call answered on its first cell. (A sum over sessions let
        # fast ones make up for slow ones: under load all of cell1's sessions could still be in their first
        # call, which the drain moved to cell0 before anything was recorded on cell1.)
        while min(turns_done.values()) < 1:
            await asyncio.sleep(0.05)
        await cluster.switch("cell1", Role.TRAIN)  # drain: its sessions move to cell0 with their KV
        await asyncio.sleep(0.2)
        await cluster.switch("cell1", Role.ROLLOUT)
        await clients
        kinds = [entry["kind"] for entry in cluster.switch_log]
        drains = cluster.drain_reports
        await cluster.close()
        return kinds, drains

    try:
        kinds, drains = asyncio.run(scenario())
    finally:
        server.stop()
    assert kinds == ["rollout_to_train_s", "train_to_rollout_s"]
    assert drains and drains[0].moved_executions >= 1
    for i in range(SESSIONS):
        assert_one_growing_path(f"ex{i}", proxy.records(f"ex{i}"), TURNS)
    moved = [r for i in range(SESSIONS) for r in proxy.records(f"ex{i}") if r.meta.get("reroutes")]
    assert len({r.cell_id for i in range(SESSIONS) for r in proxy.records(f"ex{i}")}) == 2
    assert len(moved) == drains[0].aborted_calls  # every interrupted call was retried and says so


REPLICATED_TURNS = 6


def test_drains_with_sessions_spread_over_two_proxy_replicas_lose_and_duplicate_nothing(ray_session, tmp_path):
    """Two proxy replicas (Ray actors, as on two execution nodes) route over the same cells; sessions alternate
    between them. cell1 leaves for training and comes back, then cell0 does: the second drain moves every live
    session, whichever replica serves it. Every call is answered once and recorded once."""
    pytest.importorskip("openai")  # the agents' client (chat_sessions.converse)
    import ray

    from gyre.proxy.replica import ProxyReplica
    from gyre.proxy.routing import ReplicatedRouting

    replicas = [ray.remote(ProxyReplica).options(num_cpus=0).remote({"fsync": False}, "tiny", str(tmp_path))
                for _ in range(2)]
    names = [f"ex{i}" for i in range(SESSIONS)]
    replica_of = {name: replicas[i % 2] for i, name in enumerate(names)}

    async def scenario():
        cluster = Cluster(ClusterConfig(cells=2, cpus_per_cell=0.5, cell={"rollout": {"kind": "hf", "max_batch_size": 16}}),
                          routing=ReplicatedRouting(replicas))
        await cluster.start_rollout()
        keys = {name: await replica_of[name].open_execution.remote(name) for name in names}
        urls = {name: await replica_of[name].base_url.remote() for name in names}
        turns_done = dict.fromkeys(names, 0)

        async def mid_conversation(turns: int) -> None:
            while min(turns_done.values()) < turns:
                await asyncio.sleep(0.05)

        clients = asyncio.gather(*[converse(f"{urls[name]}/v1", keys[name], name, REPLICATED_TURNS, turns_done,
                                            max_tokens=24, temperature=1.0) for name in names])
        for cell, turns in (("cell1", 1), ("cell0", 2)):
            await mid_conversation(turns)
            await cluster.switch(cell, Role.TRAIN)  # drain on both replicas: sessions move with their KV
            await asyncio.sleep(0.2)
            await cluster.switch(cell, Role.ROLLOUT)
        await clients
        drains = cluster.drain_reports
        await cluster.close()
        records = {name: await replica_of[name].records.remote(name) for name in names}
        return drains, records

    try:
        drains, records = asyncio.run(scenario())
    finally:
        for replica in replicas:
            ray.get(replica.stop.remote())
            ray.kill(replica)
    assert [d.cell_id for d in drains] == ["cell1", "cell0"] and all(d.moved_executions >= 1 for d in drains)
    moved_by_replica = {0: 0, 1: 0}
    for i, name in enumerate(names):
        mine = records[name]
        assert_one_growing_path(name, mine, REPLICATED_TURNS)
        moved_by_replica[i % 2] += len({r.cell_id for r in mine}) > 1
    assert all(moved_by_replica.values()), moved_by_replica  # sessions of both replicas were moved
    interrupted = [r for name in names for r in records[name] if r.meta.get("reroutes")]
    assert len(interrupted) == sum(d.aborted_calls for d in drains)  # every interrupted call was retried once


TOOL_S = 1.0  # each session's tool time between its calls: far above the restore cost, so the router parks it


def test_a_switch_moves_parked_sessions_with_their_kv_and_changes_no_output(ray_session, tmp_path):
    """Sessions waiting on tools are parked on their cell's engine (KV in host memory). That cell is chosen to
    train: the drain exports each parked KV, imports it on the other cell and parks it there; the sessions'
    next calls restore it there. Nothing is lost or duplicated, and at temperature 0 every call returns the
    tokens and log-probs a fresh engine gives for the same prompt (a restored KV is the KV)."""
    pytest.importorskip("openai")  # the agents' client (chat_sessions.converse)
    from gyre.rollout.base import SamplingParams
    from gyre.rollout.hf import HFEngine

    # prior_s: park from the first call on, before a session has a history of tool gaps to predict from
    config = ProxyConfig(port=0, run_dir=str(tmp_path), fsync=False, parking={"prior_s": 10.0})
    proxy = build_proxy(load_tokenizer("tiny"), [], config)
    server = ProxyServer(proxy).start()

    async def scenario():
        cluster = Cluster(ClusterConfig(cells=2, cpus_per_cell=0.5, cell={"rollout": {"kind": "hf", "max_batch_size": 16}}),
                          routing=LocalRouting(proxy.router, server.on_loop))
        await cluster.start_rollout()
        keys = {f"ex{i}": proxy.open_execution(f"ex{i}") for i in range(SESSIONS)}
        turns_done = dict.fromkeys(keys, 0)
        # the agents run a tool after each call: the router parks their sessions meanwhile
        clients = asyncio.gather(*[converse(server.openai_base_url, key, name, TURNS, turns_done, max_tokens=16,
                                            temperature=0.0, tool_s=TOOL_S) for name, key in keys.items()])
        while min(turns_done.values()) < 1:  # every session has made its first call and is in its tool
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)  # the parks settle
        await cluster.switch("cell1", Role.TRAIN)  # drain: its parked sessions move to cell0 with their KV
        await cluster.switch("cell1", Role.ROLLOUT)
        await clients
        stats = await cluster.engine_stats()
        drains = cluster.drain_reports
        await cluster.close()
        return drains, stats

    try:
        drains, stats = asyncio.run(scenario())
    finally:
        server.stop()
    assert drains[0].cell_id == "cell1" and drains[0].moved_executions >= 1
    # the moved sessions were parked: their KV was exported, imported on cell0 and parked there
    assert drains[0].parked >= 1 and drains[0].kv_imports >= drains[0].parked, drains[0]
    assert drains[0].aborted_calls == 0  # nothing was mid-call: every session was in its tool
    assert stats["cell0"]["restores"] >= drains[0].parked, stats  # ... and their next calls restored it there
    records = {f"ex{i}": proxy.records(f"ex{i}") for i in range(SESSIONS)}
    moved = [name for name, mine in records.items() if [r.cell_id for r in mine][:2] == ["cell1", "cell0"]]
    assert moved, {name: [r.cell_id for r in mine] for name, mine in records.items()}
    for name, mine in records.items():
        assert_one_growing_path(name, mine, TURNS)

    async def fresh_generations():
        engine = HFEngine("tiny", engine_id="fresh")
        try:
            return {record.call_id: await engine.generate(
                        f"fresh-{record.call_id}", record.prompt_ids,
                        SamplingParams(temperature=0.0, max_new_tokens=len(record.response_ids)))
                    for mine in records.values() for record in mine}
        finally:
            await engine.close()

    fresh = asyncio.run(fresh_generations())
    for name, mine in records.items():
        for record in mine:
            where = (name, record.call_id, record.cell_id)
            assert fresh[record.call_id].response_ids == record.response_ids, where
            assert fresh[record.call_id].logprobs == pytest.approx(record.response_logprobs, abs=1e-5), where
