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
    body = json.dumps({"model": "m", "messages": MESSAGES, "max_tokens": new_tokens, "temperature": 0}).encode()
    latencies: list[float] = []

    async def session(index: int) -> None:
        headers = {"authorization": f"Bearer {keys[index]}", "content-type": "application/json"}
        for _ in range(calls):
            start = time.perf_counter()
            async with client.post(path, data=body, headers=headers) as response:
                payload = await response.read()
            latencies.append(time.perf_counter() - start)
            assert response.status == 200, payload
            assert json.loads(payload)["usage"]["completion_tokens"] == new_tokens

    await asyncio.gather(*(session(i) for i in range(sessions)))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the results as flat JSON here")
    parser.add_argument("--calls", type=int, default=300, help="calls per side at concurrency 1 (alternating one by one)")
    parser.add_argument("--rounds-256", type=int, default=6, help="alternating rounds of 256 concurrent calls per side")
    parser.add_argument("--new-tokens", type=int, default=4, help="tokens generated per call (greedy)")
    parser.add_argument("--serve-bare", type=int, metavar="SESSIONS", help=argparse.SUPPRESS)  # the bare side's subprocess
    args = parser.parse_args()
    if args.serve_bare:
        serve_bare(args.serve_bare)
        return
    results: dict[str, float] = {"new_tokens": float(args.new_tokens)}
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
