"""Supervised warm start: ``python -m gyre.sft model.path=small data.demonstrations=2`` (Hydra; conf/sft.yaml).

Trains a checkpoint on demonstrations (call records, OpenAI chat transcripts, or demonstrations recorded
from a suite's tasks through the proxy) with the same trees and packing as RL, and writes HF checkpoint
folders under ``<run_dir>/checkpoints`` (``latest`` points to the newest): ``model.path`` of a training
run, ``gyre.eval`` or ``gyre.serve`` accepts them.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from gyre.cli import hydra_entry


@hydra_entry("sft")
def main(cfg: DictConfig) -> None:
    from gyre.config import to_plain
    from gyre.trainer.warm_start import supervised_run

    data = to_plain(cfg.data)
    known = {"records", "transcripts", "demonstrations", "also_demonstrate"}
    if unknown := sorted(set(data) - known):
        raise ValueError(f"data: unknown key(s) {unknown}; known: {', '.join(sorted(known))}")
    final = supervised_run(cfg, cfg.sft, Path(cfg.run_dir).resolve(), records=data["records"] or [],
                           transcripts=data["transcripts"] or [], demonstrations=int(data["demonstrations"]),
                           also_demonstrate=data.get("also_demonstrate") or [], tracking=cfg.tracking)
    print(f"checkpoint: {final}  (use it as model.path=...)", flush=True)


if __name__ == "__main__":
    main()
