"""Model and tokenizer factory (``model.path=tiny`` / ``small`` or a local HF folder)."""

from gyre.models.factory import (
    load_model,
    load_model_and_tokenizer,
    load_tokenizer,
    resolve_device,
    resolve_model_path,
)
from gyre.models.tiny import BUILTIN_MODELS, VLLM_CPU_MODEL, TinySpec, tiny_path

__all__ = ["BUILTIN_MODELS", "VLLM_CPU_MODEL", "TinySpec", "load_model", "load_model_and_tokenizer", "load_tokenizer", "resolve_device", "resolve_model_path", "tiny_path"]
