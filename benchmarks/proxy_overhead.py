"""Latency the proxy adds per call over calling the engine directly, at 1 and 256 concurrent sessions.

Two identical engines (tiny model, greedy decoding, the same prompt ids, the same number of new tokens):
one called in-process through ``engine.generate`` ("direct"), one behind the proxy served by
``python -m gyre.serve`` in a subprocess and called over loopback HTTP with ``/v1/chat/completions`` (aiohttp client: httpx's connection pool costs
milliseconds per request at hundreds of connections, which would be charged to the proxy)
("proxy": HTTP client + server + chat rendering/tokenizing + routing + parsing + durable recording with
fsync). Rounds of the two alternate, side by side in one run, so machine load drifts hit both.
The added latency at a percentile is ``proxy percentile - direct percentile``.

    python benchmarks/proxy_overhead.py --out results.json [--calls 300] [--rounds-256 6] [--new-tokens 4]

``--out`` writes a flat JSON object with ``p50_added_ms_1``, ``p50_added_ms_256``, ``p99_added_ms_256``
(and the underlying percentiles).
"""

from __future__ import annotations

import argparse
import asyncio
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
        sys.executable, "-m", "gyre.serve", "model.path=tiny", "proxy.port=0", f"proxy.run_dir={run_dir}",
        f"proxy.cell_capacity={sessions}", f"rollout.max_batch_size={sessions}", "rollout.torch_threads=1",
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


async def proxy_round(client, keys: list[str], sessions: int, calls: int, new_tokens: int) -> list[float]:
    body = json.dumps({"model": "m", "messages": MESSAGES, "max_tokens": new_tokens, "temperature": 0}).encode()
    latencies: list[float] = []

    async def session(index: int) -> None:
        headers = {"authorization": f"Bearer {keys[index]}", "content-type": "application/json"}
        for _ in range(calls):
            start = time.perf_counter()
            async with client.post("v1/chat/completions", data=body, headers=headers) as response:
                payload = await response.read()
            latencies.append(time.perf_counter() - start)
            assert response.status == 200, payload
            assert json.loads(payload)["usage"]["completion_tokens"] == new_tokens

    await asyncio.gather(*(session(i) for i in range(sessions)))
    return latencies


async def measure(sessions: int, calls: int, rounds: int, new_tokens: int, run_dir: str) -> dict[str, float]:
    import aiohttp
    import torch

    from gyre.chat import ChatTemplate, Conversation, Message
    from gyre.models import load_tokenizer
    from gyre.rollout.hf import HFEngine

    torch.set_num_threads(1)
    template = ChatTemplate(load_tokenizer("tiny"))
    conversation = Conversation(tuple(Message(m["role"], m["content"]) for m in MESSAGES))
    prompt_ids = template.encode(template.render_prompt(conversation))
    engine = HFEngine("tiny", max_batch_size=sessions)
    process, base, keys = start_proxy(sessions, new_tokens, run_dir)
    direct: list[float] = []
    proxied: list[float] = []
    connector = aiohttp.TCPConnector(limit=sessions + 8)
    try:
        async with aiohttp.ClientSession(base_url=base.removesuffix("v1"), connector=connector) as client:
            await direct_round(engine, prompt_ids, sessions, 1, new_tokens)  # warm-up both
            await proxy_round(client, keys, sessions, 1, new_tokens)
            direct_cpu = proxy_cpu = 0.0
            for _ in range(rounds):  # alternate, so load drifts on a shared machine hit both sides alike
                start = time.process_time()
                direct += await direct_round(engine, prompt_ids, sessions, calls, new_tokens)
                direct_cpu += time.process_time() - start
                start = process_cpu_s(process.pid)
                proxied += await proxy_round(client, keys, sessions, calls, new_tokens)
                proxy_cpu += process_cpu_s(process.pid) - start
    finally:
        process.terminate()
        process.wait(30)
        await engine.close()
    d, p = np.array(direct) * 1e3, np.array(proxied) * 1e3
    out = {
        f"direct_p50_ms_{sessions}": float(np.percentile(d, 50)),
        f"direct_p99_ms_{sessions}": float(np.percentile(d, 99)),
        f"proxy_p50_ms_{sessions}": float(np.percentile(p, 50)),
        f"proxy_p99_ms_{sessions}": float(np.percentile(p, 99)),
        f"calls_{sessions}": float(len(p)),
    }
    # CPU per call: the direct side's process (engine) vs the server process (engine + proxy).
    out[f"direct_cpu_ms_per_call_{sessions}"] = direct_cpu * 1e3 / len(d)
    out[f"server_cpu_ms_per_call_{sessions}"] = proxy_cpu * 1e3 / len(p)
    out[f"p50_added_ms_{sessions}"] = out[f"proxy_p50_ms_{sessions}"] - out[f"direct_p50_ms_{sessions}"]
    out[f"p99_added_ms_{sessions}"] = out[f"proxy_p99_ms_{sessions}"] - out[f"direct_p99_ms_{sessions}"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the results as flat JSON here")
    parser.add_argument("--calls", type=int, default=300, help="calls per side at concurrency 1 (alternating one by one)")
    parser.add_argument("--rounds-256", type=int, default=6, help="alternating rounds of 256 concurrent calls per side")
    parser.add_argument("--new-tokens", type=int, default=4, help="tokens generated per call (greedy)")
    args = parser.parse_args()
    results: dict[str, float] = {"new_tokens": float(args.new_tokens)}
    with tempfile.TemporaryDirectory() as run_dir:
        for sessions, rounds in ((1, args.calls), (256, args.rounds_256)):
            results.update(asyncio.run(measure(sessions, 1, rounds, args.new_tokens, run_dir)))
            print(f"measured {sessions} session(s)", file=sys.stderr, flush=True)
    print(f"{'sessions':>8} {'direct p50':>11} {'proxy p50':>10} {'added p50':>10} {'direct p99':>11} {'proxy p99':>10} {'added p99':>10}  (ms)")
    for sessions in (1, 256):
        r = {k.rsplit("_", 1)[0]: v for k, v in results.items() if k.endswith(f"_{sessions}")}
        print(
            f"{sessions:>8} {r['direct_p50_ms']:>11.2f} {r['proxy_p50_ms']:>10.2f} {r['p50_added_ms']:>10.2f} "
            f"{r['direct_p99_ms']:>11.2f} {r['proxy_p99_ms']:>10.2f} {r['p99_added_ms']:>10.2f}"
        )
    print("CPU per call (ms): " + ", ".join(
        f"{n} sessions: direct {results[f'direct_cpu_ms_per_call_{n}']:.2f}, server {results[f'server_cpu_ms_per_call_{n}']:.2f}" for n in (1, 256)
    ))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
