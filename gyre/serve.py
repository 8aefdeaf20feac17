"""Serve a checkpoint through the proxy, without training: ``python -m gyre.serve model.path=... proxy.port=...``.

Starts ``serve.cells`` engines (the ``rollout`` group: ``rollout=hf``, the default, or ``rollout=vllm``: on a
GPU, or on a CPU through vLLM's CPU build), the proxy over them, opens ``serve.executions`` executions and prints the base URLs and keys, then
serves until interrupted (or ``serve.duration_s``). This is how a user points any harness (Claude Code,
Codex, mini-swe-agent, plain SDKs) at a checkpoint to try or evaluate it; every call is recorded under
``run_dir`` (default ``runs/serve/<date>``) like in training.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import threading
from typing import Any

from omegaconf import DictConfig

from gyre.cli import hydra_entry
from gyre.config import to_plain, without_moved
from gyre.proxy.config import ProxyConfig

# Keys that left serve's own rollout section when it became the shared ``rollout`` group; conf/serve.yaml
# keeps them as null so that a value set for one fails naming the new key (gyre.config.without_moved).
MOVED_FROM_ROLLOUT = {"cells": "serve.cells", "torch_threads": "serve.torch_threads", "engine": "rollout.kind"}


def make_engines(cfg: DictConfig) -> list[Any]:
    """One engine per cell, each built from the ``rollout`` section by the shared engine factory."""
    from gyre.rollout import make_engine_from_config

    rollout = without_moved(cfg.rollout, "rollout", MOVED_FROM_ROLLOUT)
    cells = int(cfg.serve.cells)
    if cells < 1:
        raise ValueError(f"serve.cells must be >= 1, got {cells}")
    if cfg.serve.torch_threads:
        import torch

        torch.set_num_threads(int(cfg.serve.torch_threads))
    model_path = str(cfg.model.path)
    return [make_engine_from_config(rollout, model_path=model_path, engine_id=f"cell-{index}") for index in range(cells)]


def serve(cfg: DictConfig) -> None:
    from gyre.models import load_tokenizer
    from gyre.proxy.server import ProxyServer, build_proxy

    config = ProxyConfig.from_mapping(to_plain(cfg.proxy))
    engines = make_engines(cfg)
    proxy = build_proxy(load_tokenizer(str(cfg.model.path)), engines, config, call_capacity=int(cfg.serve.call_capacity))
    server = ProxyServer(proxy).start()
    names = [cfg.serve.execution_id] + [f"{cfg.serve.execution_id}-{i}" for i in range(1, int(cfg.serve.executions))]
    keys = {name: proxy.open_execution(name) for name in names}
    # Everything built so far (modules, model, tokenizer, template) lives as long as the process: freezing
    # it keeps the collector's full passes from walking it again and again on the request path. They took
    # 30% of this process's GIL time at 256 concurrent calls (py-spy --native); now ~10%.
    gc.freeze()
    print(f"Gyre proxy serving model {cfg.model.path} on {len(engines)} cell(s)", flush=True)
    print(f"  OpenAI base URL:    {server.openai_base_url}", flush=True)
    print(f"  Anthropic base URL: {server.anthropic_base_url}", flush=True)
    for name, key in keys.items():
        print(f"  key for execution {name}: {key}", flush=True)
    print(f"  records: {proxy.recorder.folder}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait(cfg.serve.duration_s)
    print("stopping", flush=True)
    server.stop()
    for engine in engines:
        asyncio.run(engine.close())


@hydra_entry("serve")
def main(cfg: DictConfig) -> None:
    serve(cfg)


if __name__ == "__main__":
    main()
