"""Model and tokenizer factory: a built-in preset (``tiny``, ``small``) or a local HF checkpoint folder.
Never a hub download."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from gyre.models.tiny import BUILTIN_MODELS, tiny_path


def resolve_model_path(path: str, tiny_overrides: dict[str, Any] | None = None) -> Path:
    """Turn ``model.path`` into a local folder: a preset name (``tiny``, ``small``) builds that built-in model
    (``tiny_overrides`` change its spec), anything else must be a local checkpoint folder."""
    path = str(path)
    if path in BUILTIN_MODELS:
        return tiny_path(replace(BUILTIN_MODELS[path], **(tiny_overrides or {})))
    folder = Path(path).expanduser()
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"model.path={path!r} is not a local HF checkpoint folder (no config.json there); Gyre never "
            f"downloads from a hub: pass a local path or a built-in model ({', '.join(BUILTIN_MODELS)})"
        )
    return folder


def resolve_device(device: str) -> str:
    """A torch device name; ``auto`` is ``cuda`` where a GPU is visible, else ``cpu``."""
    if str(device) != "auto":
        return str(device)
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# Tokenizer classes loaded directly rather than through AutoTokenizer: the plain tokenizers-library ones, with no
# model-specific code. AutoTokenizer would load the same class, but importing it pulls transformers' auto-model
# machinery (generation, torch._dynamo, DTensor: ~1.4 CPU-s) into every process that only needs a tokenizer
# (each job's driver, proxy replicas, gyre.eval / gyre.serve, benchmarks).
PLAIN_TOKENIZER_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")


def load_tokenizer(path: str, tiny_overrides: dict[str, Any] | None = None):
    folder = resolve_model_path(path, tiny_overrides)
    if (name := tokenizer_class_name(folder)) in PLAIN_TOKENIZER_CLASSES:
        import transformers

        return getattr(transformers, name).from_pretrained(folder, local_files_only=True)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def tokenizer_class_name(folder: Path) -> str | None:
    """The ``tokenizer_class`` a checkpoint's ``tokenizer_config.json`` names (None when it names none)."""
    try:
        return json.loads((folder / "tokenizer_config.json").read_text()).get("tokenizer_class")
    except (OSError, ValueError, AttributeError):
        return None  # AutoTokenizer decides, and reports a broken file in its own words


def load_model(
    path: str,
    *,
    dtype: str = "float32",
    attn_implementation: str = "sdpa",
    device: str = "cpu",
    tiny_overrides: dict[str, Any] | None = None,
):
    """A causal LM in ``dtype`` on ``device``; ``attn_implementation`` may be a Gyre tree backend."""
    import torch
    from transformers import AutoModelForCausalLM

    if attn_implementation.startswith("gyre_"):
        from gyre.ops.tree_attention import register_tree_attention

        register_tree_attention()
    model = AutoModelForCausalLM.from_pretrained(
        resolve_model_path(path, tiny_overrides),
        dtype=getattr(torch, dtype),
        attn_implementation=attn_implementation,
        local_files_only=True,
    )
    return model.to(device)


def load_model_and_tokenizer(path: str, **kwargs: Any):
    tiny_overrides = kwargs.get("tiny_overrides")
    return load_model(path, **kwargs), load_tokenizer(path, tiny_overrides)
