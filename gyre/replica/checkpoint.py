"""Checkpoints a user can use: each one is a Hugging Face folder (``save_pretrained`` of the model and its
tokenizer, safetensors) with the trainer's own state beside it.

    <checkpoints>/step_000012/   config.json, model.safetensors, tokenizer files (model.path accepts it)
                                 trainer_state.pt (optimizer, schedule, weight version: what resuming needs)
    <checkpoints>/latest         a symlink to the newest step folder (also a valid model.path)

A checkpoint is written into a temporary folder and renamed, and ``latest`` is replaced atomically, so a
crash mid-save leaves the previous checkpoint intact and ``latest`` always names a complete one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

LATEST = "latest"
TRAINER_STATE = "trainer_state.pt"


def step_folder(checkpoints: Path, step: int) -> Path:
    return Path(checkpoints) / f"step_{step:06d}"


def save_checkpoint(folder: Path, model: Any, tokenizer: Any, trainer_state: dict[str, Any] | None = None,
                    state_dict: dict[str, Any] | None = None, dtype: str | None = None) -> Path:
    """Write ``model`` + ``tokenizer`` (+ ``trainer_state``) as an HF folder at ``folder`` (atomically: a
    staging folder renamed into place); ``state_dict``, when given, holds the weights to write instead of
    the model's own (a sharded model's, gathered); ``dtype``: the weights' dtype in the folder (the model's,
    when training keeps float32 master weights). ``latest`` is not moved: call `mark_latest` once
    everything that belongs in the checkpoint is there."""
    import torch

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.with_name(f".{folder.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    if dtype is not None:
        wanted = getattr(torch, dtype)
        weights = state_dict if state_dict is not None else model.state_dict()
        state_dict = {name: t.to(wanted) if t.is_floating_point() else t for name, t in weights.items()}
    model.save_pretrained(staging, safe_serialization=True, state_dict=state_dict)
    if dtype is not None:  # save_pretrained writes the live model's dtype (its float32 master weights)
        config = json.loads((staging / "config.json").read_text())
        config.update({key: dtype for key in ("dtype", "torch_dtype") if key in config} or {"dtype": dtype})
        (staging / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tokenizer.save_pretrained(staging)
    if trainer_state is not None:
        torch.save(trainer_state, staging / TRAINER_STATE)
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return folder


def mark_latest(folder: Path) -> None:
    """Point ``<checkpoints>/latest`` at ``folder`` (atomically replaced: never a dangling or half link)."""
    folder = Path(folder)
    link = folder.parent / f".{LATEST}.tmp"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(folder.name)
    os.replace(link, folder.parent / LATEST)


def latest_checkpoint(checkpoints: Path) -> Path | None:
    """The folder ``latest`` points to, or None when there is no checkpoint yet."""
    link = Path(checkpoints) / LATEST
    if not link.exists():
        return None
    return link.resolve()


def load_trainer_state(folder: Path) -> dict[str, Any]:
    import torch

    path = Path(folder) / TRAINER_STATE
    if not path.is_file():
        raise FileNotFoundError(f"{folder} holds no {TRAINER_STATE}: it is a model checkpoint, not a resumable one")
    return torch.load(path, map_location="cpu", weights_only=False)


def read_weights(folder: Path, dtype: Any) -> dict[str, Any]:
    """The state dict of HF checkpoint ``folder``, in ``dtype`` (a torch dtype or its name)."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, local_files_only=True).state_dict()


def load_weights_into(model: Any, folder: Path) -> None:
    """Copy the weights of HF checkpoint ``folder`` into the live ``model`` (same architecture), in place."""
    model.load_state_dict(read_weights(folder, next(model.parameters()).dtype))
