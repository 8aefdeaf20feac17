"""Rollout engines behind one token-in, token-out protocol (``base.RolloutEngine``).

``make_engine("hf", ...)`` builds the embedded continuous-batching engine (CPU default, GPU too);
``make_engine("vllm", ...)`` the vLLM adapter (GPU; vLLM is imported only then).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gyre.rollout.base import (
    EngineAsleepError,
    Generation,
    InvalidTokenError,
    KVState,
    PromptTooLongError,
    RolloutEngine,
    SamplingError,
    SamplingParams,
)

ENGINE_KINDS = ("hf", "vllm")


def make_engine(kind: str, **kwargs: Any) -> RolloutEngine:
    """Build a rollout engine of ``kind`` (``hf`` | ``vllm``); ``kwargs`` go to its constructor."""
    if kind == "hf":
        from gyre.rollout.hf import HFEngine

        return HFEngine(**kwargs)
    if kind == "vllm":
        from gyre.rollout.vllm_engine import VLLMEngine

        return VLLMEngine(**kwargs)
    raise ValueError(f"rollout.kind={kind!r} is not an engine; choose one of {', '.join(ENGINE_KINDS)}")


def make_engine_from_config(config: Mapping[str, Any], **overrides: Any) -> RolloutEngine:
    """Build the engine a ``rollout`` config group describes (``conf/rollout/*.yaml``): ``kind`` picks
    the class, the other keys are its constructor arguments; ``overrides`` (e.g. ``model_path``,
    ``engine_id``) win over the config."""
    settings = dict(config.items())
    if "kind" not in settings:
        raise ValueError("rollout config has no `kind` (hf | vllm)")
    kind = settings.pop("kind")
    if "engine_args" in settings and settings["engine_args"] is not None:
        settings["engine_args"] = dict(settings["engine_args"])
    settings.update(overrides)
    return make_engine(kind, **settings)


__all__ = [
    "ENGINE_KINDS",
    "EngineAsleepError",
    "Generation",
    "InvalidTokenError",
    "KVState",
    "PromptTooLongError",
    "RolloutEngine",
    "SamplingError",
    "SamplingParams",
    "make_engine",
    "make_engine_from_config",
]
