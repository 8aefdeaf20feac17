"""Latency the proxy adds per call over calling the engine directly, at 1 and 256 concurrent sessions.

Identical engines (tiny model, greedy decoding, the same prompt ids, the same number of new tokens):
one called in-process through ``engine.generate`` ("direct"), one behind the proxy served by
``python -m gyre.serve`` in a subprocess and called over loopback HTTP with ``/v1/chat/completions`` (aiohttp client: httpx's connection pool costs
milliseconds per request at hundreds of connections, which would be charged to the proxy)
("proxy": HTTP client + server + chat rendering/tokenizing + routing + parsing + durable recording with
fsync). Rounds alternate, side by side in one run, so machine load drifts hit every side alike.
The added latency at a percentile is ``proxy percentile - direct percentile``.

A third engine ("bare") is served in a subprocess by the same HTTP stack (uvicorn + httptools on uvloop,
same client) with no proxy logic at all: each request's body is read and ignored, the fixed prompt ids
are generated and a minimal JSON object goes back. It splits the added latency into what any HTTP front
over this engine costs on this machine (``transport_*``: bare - direct) and what the proxy's own work
costs on top (``logic_*``: proxy - bare).

    python benchmarks/proxy_overhead.py --out results.json [--calls 300] [--rounds-256 6] [--new-tokens 4]

``--out`` writes a flat JSON object with ``p50_added_ms_1``, ``p50_added_ms_256``, ``p99_added_ms_256``
(and the underlying percentiles).

``--replicated`` measures instead the layout of ``cluster.execution_nodes``: proxy replicas in their own
processes (Ray actors, as on execution nodes, ``gyre.proxy.replica``) in front of one engine actor. At 256
concurrent sessions, rounds alternate between the sessions all going through 1 replica and split over 2
replicas (and the engine called directly over Ray, the baseline): keys
``replicas_<n>_p50_added_ms_256`` / ``_p99_``, their percentiles and each replica's CPU per call. The engine
stands in for an accelerator by default (`TimedEngine`: wall time, no host CPU); ``--replicated-engine hf``
runs the tiny model on the host's cores instead.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MESSAGES = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "List the files in the repository."}]


def start_proxy(sessions: int, new_tokens: int, run_dir: str) -> tuple[subprocess.Popen, str, list[str]]:
    """``gyre.serve`` on a free port with one engine sized for ``sessions``; returns (process, base url, keys)."""
    command = [
        sys.executable, "-m", "gyre.serve", "model.path=tiny", "proxy.port=0", f"run_dir={run_dir}",
        f"serve.call_capacity={sessions}", f"rollout.max_batch_size={sessions}", "serve.torch_threads=1",
        f"serve.executions={sessions}", "proxy.log_level=error",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    base, keys = "", []
    assert process.stdout is not None
    for line in process.stdout:
        if match := re.search(r"OpenAI base URL:\s+(\S+)", line):
            base = match.group(1)
        if match := re.search(r"key for execution \S+: (\S+)", line):
            keys.append(match.group(1))
        if "records:" in line:
            break
    if not base or len(keys) != sessions:
        process.kill()
        raise RuntimeError(f"gyre.serve did not start (base={base!r}, {len(keys)} keys)")
    threading.Thread(target=process.stdout.read, daemon=True).start()  # keep the pipe from filling up
    return process, base, keys


def serve_bare(sessions: int) -> None:
    """The "bare" side (run as ``--serve-bare N`` in a subprocess): one engine behind uvicorn, no proxy."""
    import torch
    import uvicorn

    from gyre.proxy.server import bind_socket, new_event_loop
    from gyre.rollout.base import SamplingParams
    from gyre.rollout.hf import HFEngine

    torch.set_num_threads(1)
    prompt_ids = bench_prompt_ids()
    engine = HFEngine("tiny", max_batch_size=sessions)

    async def app(scope: dict, receive, send) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        session = next((v.decode() for k, v in scope["headers"] if k == b"authorization"), "anonymous")
        max_tokens = int(scope["query_string"] or b"4")
        generation = await engine.generate(session, prompt_ids, SamplingParams(temperature=0.0, max_new_tokens=max_tokens))
        body = json.dumps({"usage": {"completion_tokens": len(generation.response_ids)}, "ids": generation.response_ids}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    sock = bind_socket("127.0.0.1", 0)
    gc.freeze()  # as gyre.serve does once started
    sock.listen(4096)  # connections wait in the backlog until uvicorn accepts them
    print(f"bare server on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="error", lifespan="off", backlog=4096, server_header=False, date_header=False)
    loop = new_event_loop()
    loop.run_until_complete(uvicorn.Server(config).serve(sockets=[sock]))


def start_bare(sessions: int) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, __file__, "--serve-bare", str(sessions)]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        if match := re.search(r"bare server on (\S+)", line):
            threading.Thread(target=process.stdout.read, daemon=True).start()
            return process, match.group(1)
    process.kill()
    raise RuntimeError("the bare engine server did not start")


def bench_prompt_ids() -> list[int]:
    """The token ids the proxy renders for MESSAGES: the direct and bare sides generate from the same prompt."""
    from gyre.chat import ChatTemplate, Conversation, Message
    from gyre.models import load_tokenizer

    template = ChatTemplate(load_tokenizer("tiny"))
    conversation = Conversation(tuple(Message(m["role"], m["content"]) for m in MESSAGES))
    return template.encode(template.render_prompt(conversation))


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def direct_round(engine, prompt_ids: list[int], sessions: int, calls: int, new_tokens: int) -> list[float]:
    from gyre.rollout.base import SamplingParams

    sampling = SamplingParams(temperature=0.0, max_new_tokens=new_tokens)
    latencies: list[float] = []

    async def session(index: int) -> None:
        for _ in range(calls):
            start = time.perf_counter()
            generation = await engine.generate(f"direct-{index}", prompt_ids, sampling)
            latencies.append(time.perf_counter() - start)
            assert len(generation.response_ids) == new_tokens

    await asyncio.gather(*(session(i) for i in range(sessions)))
    return latencies


async def http_round(client, path: str, keys: list[str], sessions: int, calls: int, new_tokens: int) -> list[float]:
    """``calls`` sequential chat requests per session, the sessions concurrent; each session's own key."""
    return await spread_round([(client, key) for key in keys[:sessions]], path, calls, new_tokens)


async def spread_round(targets: list[tuple[Any, str]], path: str, calls: int, new_tokens: int) -> list[float]:
    """As ``http_round``, each session to its own (client, key): sessions spread over several servers."""
    body = json.dumps({"model": "m", "messages": MESSAGES, "max_tokens": new_tokens, "temperature": 0}).encode()
    latencies: list[float] = []

    async def session(index: int) -> None:
        client, key = targets[index]
        headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
        for _ in range(calls):
            start = time.perf_counter()
            async with client.post(path, data=body, headers=headers) as response:
                payload = await response.read()
            latencies.append(time.perf_counter() - start)
            assert response.status == 200, payload
            assert json.loads(payload)["usage"]["completion_tokens"] == new_tokens

    await asyncio.gather(*(session(i) for i in range(len(targets))))
    return latencies


async def measure(sessions: int, calls: int, rounds: int, new_tokens: int, run_dir: str) -> dict[str, float]:
    import aiohttp
    import torch

    from gyre.rollout.hf import HFEngine

    torch.set_num_threads(1)
    prompt_ids = bench_prompt_ids()
    engine = HFEngine("tiny", max_batch_size=sessions)
    process, base, keys = start_proxy(sessions, new_tokens, run_dir)
    bare_process, bare_base = start_bare(sessions)
    gc.freeze()  # the servers freeze their start-up objects; so does the direct side
    bare_keys = [f"bare-{index}" for index in range(sessions)]  # the bare server's session ids
    latencies: dict[str, list[float]] = {"direct": [], "bare": [], "proxy": []}
    cpu = {"direct": 0.0, "bare": 0.0, "proxy": 0.0}
    try:
        async with (
            aiohttp.ClientSession(base_url=base.removesuffix("v1"), connector=aiohttp.TCPConnector(limit=sessions + 8)) as client,
            aiohttp.ClientSession(base_url=bare_base, connector=aiohttp.TCPConnector(limit=sessions + 8)) as bare_client,
        ):
            await direct_round(engine, prompt_ids, sessions, 1, new_tokens)  # warm-up every side
            await http_round(bare_client, f"/?{new_tokens}", bare_keys, sessions, 1, new_tokens)
            await http_round(client, "v1/chat/completions", keys, sessions, 1, new_tokens)
            for _ in range(rounds):  # alternate, so load drifts on a shared machine hit every side alike
                start = time.process_time()
                latencies["direct"] += await direct_round(engine, prompt_ids, sessions, calls, new_tokens)
                cpu["direct"] += time.process_time() - start
                start = process_cpu_s(bare_process.pid)
                latencies["bare"] += await http_round(bare_client, f"/?{new_tokens}", bare_keys, sessions, calls, new_tokens)
                cpu["bare"] += process_cpu_s(bare_process.pid) - start
                start = process_cpu_s(process.pid)
                latencies["proxy"] += await http_round(client, "v1/chat/completions", keys, sessions, calls, new_tokens)
                cpu["proxy"] += process_cpu_s(process.pid) - start
    finally:
        for server in (process, bare_process):
            server.terminate()
            server.wait(30)
        await engine.close()
    out: dict[str, float] = {f"calls_{sessions}": float(len(latencies["proxy"]))}
    for side, values in latencies.items():
        ms = np.array(values) * 1e3
        out[f"{side}_p50_ms_{sessions}"] = float(np.percentile(ms, 50))
        out[f"{side}_p99_ms_{sessions}"] = float(np.percentile(ms, 99))
    # CPU per call of the process holding the engine: the direct side's own, the bare server's, the proxy's.
    for side, name in (("direct", "direct"), ("bare", "bare_server"), ("proxy", "server")):
        out[f"{name}_cpu_ms_per_call_{sessions}"] = cpu[side] * 1e3 / len(latencies[side])
    for q in ("p50", "p99"):
        direct, bare, proxy = (out[f"{side}_{q}_ms_{sessions}"] for side in ("direct", "bare", "proxy"))
        out[f"{q}_added_ms_{sessions}"] = proxy - direct
        out[f"transport_{q}_added_ms_{sessions}"] = bare - direct
        out[f"logic_{q}_added_ms_{sessions}"] = proxy - bare
    return out


class TimedEngine:
    """Stands in for an engine on an accelerator (replicated mode): every call takes ``seconds`` of wall time
    and no host CPU, as a GPU's batched decode does, so the host's cores are left to the proxies being
    measured. It returns ``new_tokens`` tokens that end by length. (With ``--replicated-engine hf`` the tiny
    model runs on the host's cores instead, competing with the proxies.)"""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def generate(self, session_id: str, prompt_ids: list[int], sampling: Any) -> Any:
        from gyre.rollout.base import Generation

        await asyncio.sleep(self.seconds)
        ids = list(prompt_ids[-sampling.max_new_tokens:])
        return Generation(ids, [0.0] * len(ids), "length", 0)

    async def abort(self, session_id: str) -> bool:
        return False

    async def export_session(self, session_id: str) -> None:
        return None

    async def import_session(self, session_id: str, state: Any) -> None:
        return None


def replica_class() -> Any:
    """A proxy replica that also reports its process's CPU seconds (for CPU per call)."""
    from gyre.proxy.replica import ProxyReplica

    class MeasuredReplica(ProxyReplica):
        def cpu_s(self) -> float:
            return time.process_time()

    return MeasuredReplica


async def measure_replicated(sessions: int, rounds: int, new_tokens: int, run_dir: str, engine_kind: str,
                             engine_ms: float) -> dict[str, float]:
    import aiohttp
    import ray

    from gyre.cells.remote import EngineHost, RemoteEngine
    from gyre.proxy.routing import ReplicatedRouting
    from gyre.single_controller.local_ray import LocalRay

    local = LocalRay()  # (gyre.single_controller.local_ray: a start a loaded machine cannot abort)
    try:
        if engine_kind == "hf":
            actor = ray.remote(EngineHost).options(num_cpus=0, max_concurrency=10_000).remote(
                {"kind": "hf", "max_batch_size": sessions}, "tiny", "bench")
        else:
            actor = ray.remote(TimedEngine).options(num_cpus=0, max_concurrency=10_000).remote(engine_ms / 1e3)
        replica = ray.remote(replica_class()).options(num_cpus=0, max_concurrency=1000)
        # Layout 1: every session through one replica; layout 2: split over two (the cell's capacity split too).
        hosts = {1: [replica.remote({"log_level": "error"}, "tiny", run_dir)],
                 2: [replica.remote({"log_level": "error"}, "tiny", run_dir) for _ in range(2)]}
        for layout in hosts.values():
            await ReplicatedRouting(layout).route({"cell-0": actor}, sessions)
        engine = RemoteEngine(actor, "bench")
        prompt_ids = bench_prompt_ids()
        clients: list[Any] = []
        layouts: dict[int, list[tuple[Any, str]]] = {}
        for replicas, layout in hosts.items():  # session i goes through replica i % replicas
            # Idle between its rounds: the client drops a connection before uvicorn's 5 s keep-alive does.
            own = [aiohttp.ClientSession(base_url=await host.base_url.remote(), connector=aiohttp.TCPConnector(
                limit=sessions + 8, keepalive_timeout=3)) for host in layout]
            clients += own
            layouts[replicas] = [(own[i % replicas], await layout[i % replicas].open_execution.remote(f"r{replicas}-s{i}"))
                                 for i in range(sessions)]
        latencies: dict[str, list[float]] = {"direct": [], "replicas_1": [], "replicas_2": []}
        cpu = {"replicas_1": 0.0, "replicas_2": 0.0}
        path = "v1/chat/completions"
        try:
            await direct_round(engine, prompt_ids, sessions, 1, new_tokens)  # warm-up every side
            for replicas in (1, 2):
                await spread_round(layouts[replicas], path, 1, new_tokens)
            for _ in range(rounds):  # alternate, so load drifts on a shared machine hit every side alike
                latencies["direct"] += await direct_round(engine, prompt_ids, sessions, 1, new_tokens)
                for replicas in (1, 2):
                    before = sum(await asyncio.gather(*[h.cpu_s.remote() for h in hosts[replicas]]))
                    latencies[f"replicas_{replicas}"] += await spread_round(layouts[replicas], path, 1, new_tokens)
                    after = sum(await asyncio.gather(*[h.cpu_s.remote() for h in hosts[replicas]]))
                    cpu[f"replicas_{replicas}"] += after - before
        finally:
            for client in clients:
                await client.close()
    finally:
        local.shutdown()
    out: dict[str, float] = {}
    for side, values in latencies.items():
        ms = np.array(values) * 1e3
        for q in (50, 99):
            out[f"{side}_p{q}_ms_{sessions}"] = float(np.percentile(ms, q))
    for replicas in (1, 2):
        side = f"replicas_{replicas}"
        for q in ("p50", "p99"):
            out[f"{side}_{q}_added_ms_{sessions}"] = out[f"{side}_{q}_ms_{sessions}"] - out[f"direct_{q}_ms_{sessions}"]
        out[f"{side}_cpu_ms_per_call_{sessions}"] = cpu[side] * 1e3 / len(latencies[side])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the results as flat JSON here")
    parser.add_argument("--calls", type=int, default=300, help="calls per side at concurrency 1 (alternating one by one)")
    parser.add_argument("--rounds-256", type=int, default=6, help="alternating rounds of 256 concurrent calls per side")
    parser.add_argument("--new-tokens", type=int, default=4, help="tokens generated per call (greedy)")
    parser.add_argument("--replicated", action="store_true",
                        help="measure 1 vs 2 proxy replicas in their own processes (cluster.execution_nodes) instead")
    parser.add_argument("--replicated-engine", choices=("timed", "hf"), default="timed",
                        help="replicated mode's engine: timed (an accelerator's wall time, no host CPU) or the tiny hf model")
    parser.add_argument("--engine-ms", type=float, default=50.0, help="the timed engine's milliseconds per call")
    parser.add_argument("--serve-bare", type=int, metavar="SESSIONS", help=argparse.SUPPRESS)  # the bare side's subprocess
    args = parser.parse_args()
    if args.serve_bare:
        serve_bare(args.serve_bare)
        return
    results: dict[str, float] = {"new_tokens": float(args.new_tokens)}
    if args.replicated:
        with tempfile.TemporaryDirectory() as run_dir:
            results.update(asyncio.run(measure_replicated(256, args.rounds_256, args.new_tokens, run_dir,
                                                          args.replicated_engine, args.engine_ms)))
        print(f"{'side':>11} {'p50':>9} {'added p50':>10} {'p99':>9} {'added p99':>10}  (ms, 256 sessions; added = side - direct)")
        for side in ("direct", "replicas_1", "replicas_2"):
            p50, p99 = results[f"{side}_p50_ms_256"], results[f"{side}_p99_ms_256"]
            print(f"{side:>11} {p50:>9.2f} {p50 - results['direct_p50_ms_256']:>10.2f} {p99:>9.2f} "
                  f"{p99 - results['direct_p99_ms_256']:>10.2f}")
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=2, sort_keys=True))
        return
    with tempfile.TemporaryDirectory() as run_dir:
        for sessions, rounds in ((1, args.calls), (256, args.rounds_256)):
            results.update(asyncio.run(measure(sessions, 1, rounds, args.new_tokens, run_dir)))
            print(f"measured {sessions} session(s)", file=sys.stderr, flush=True)
    print(f"{'sessions':>8} {'side':>7} {'p50':>9} {'added p50':>10} {'p99':>9} {'added p99':>10}  (ms; added = side - direct)")
    for sessions in (1, 256):
        for side in ("direct", "bare", "proxy"):
            p50, p99 = results[f"{side}_p50_ms_{sessions}"], results[f"{side}_p99_ms_{sessions}"]
            base50, base99 = results[f"direct_p50_ms_{sessions}"], results[f"direct_p99_ms_{sessions}"]
            print(f"{sessions:>8} {side:>7} {p50:>9.2f} {p50 - base50:>10.2f} {p99:>9.2f} {p99 - base99:>10.2f}")
    print("proxy logic alone (proxy - bare), p50 ms: " + ", ".join(f"{n} sessions {results[f'logic_p50_added_ms_{n}']:.2f}" for n in (1, 256)))
    print("CPU per call (ms): " + ", ".join(
        f"{n} sessions: direct {results[f'direct_cpu_ms_per_call_{n}']:.2f}, bare server {results[f'bare_server_cpu_ms_per_call_{n}']:.2f}, "
        f"proxy server {results[f'server_cpu_ms_per_call_{n}']:.2f}" for n in (1, 256)
    ))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
