"""Serve a checkpoint through the proxy, without training: ``python -m gyre.serve model.path=... proxy.port=...``.

Starts ``rollout.cells`` engines, the proxy over them, opens ``serve.executions`` executions and prints the base
URLs and keys, then serves until interrupted (or ``serve.duration_s``). This is how a user points any
harness (Claude Code, Codex, mini-swe-agent, plain SDKs) at a checkpoint to try or evaluate it; every
call is recorded under ``run_dir`` (default ``runs/serve/<date>``) like in training.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import threading
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gyre.cli import hydra_entry
from gyre.proxy.config import ProxyConfig


def make_engines(model_path: str, rollout: dict[str, Any]) -> list[Any]:
    """One engine per cell. Only the embedded ``hf`` engine is served here."""
    if rollout["engine"] != "hf":
        raise ValueError(f"rollout.engine={rollout['engine']!r}: gyre.serve runs the 'hf' engine only")
    if int(rollout["cells"]) < 1:
        raise ValueError(f"rollout.cells must be >= 1, got {rollout['cells']}")
    from gyre.rollout.hf import HFEngine

    if rollout.get("torch_threads"):
        import torch

        torch.set_num_threads(int(rollout["torch_threads"]))
    return [
        HFEngine(
            model_path,
            device=rollout["device"],
            dtype=rollout["dtype"],
            max_batch_size=int(rollout["max_batch_size"]),
            max_cached_tokens=int(rollout["max_cached_tokens"]),
            engine_id=f"hf-{index}",
            max_context=rollout["max_context"],
        )
        for index in range(int(rollout["cells"]))
    ]


def serve(cfg: DictConfig) -> None:
    from gyre.models import load_tokenizer
    from gyre.proxy.server import ProxyServer, build_proxy

    config = ProxyConfig.from_mapping(OmegaConf.to_container(cfg.proxy, resolve=True))  # type: ignore[arg-type]
    rollout = OmegaConf.to_container(cfg.rollout, resolve=True)
    engines = make_engines(str(cfg.model.path), rollout)  # type: ignore[arg-type]
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
