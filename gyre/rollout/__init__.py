"""Rollout engines behind one token-in, token-out protocol (``base.RolloutEngine``).

``make_engine_from_config(cfg.rollout, model_path=..., engine_id=...)`` builds the engine a ``rollout``
config section describes: ``kind: hf`` the embedded continuous-batching engine (CPU default, GPU too),
``kind: vllm`` the vLLM adapter (GPU, or CPU through vLLM's CPU build; vLLM is imported only then).
"""

from __future__ import annotations

import inspect
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


def engine_class(kind: str) -> type:
    """The engine class of ``kind``, without building one (vLLM itself is imported only when one is built)."""
    if kind == "hf":
        from gyre.rollout.hf import HFEngine

        return HFEngine
    if kind == "vllm":
        from gyre.rollout.vllm_engine import VLLMEngine

        return VLLMEngine
    raise ValueError(f"rollout.kind={kind!r} is not an engine; choose one of {', '.join(ENGINE_KINDS)}")


def make_engine(kind: str, **kwargs: Any) -> RolloutEngine:
    """Build a rollout engine of ``kind`` (``hf`` | ``vllm``); ``kwargs`` go to its constructor. From a
    config section, use ``make_engine_from_config``."""
    return engine_class(kind)(**kwargs)


def make_engine_from_config(rollout: Mapping[str, Any], *, model_path: str, engine_id: str) -> RolloutEngine:
    """The engine a composed ``rollout`` config section describes (``conf/rollout/*.yaml`` as a plain dict):
    ``kind`` picks the engine, every other key (``device`` included) is an argument of its constructor.
    The one way training cells, ``gyre.serve`` and ``gyre.eval`` build engines. An unknown ``kind`` or key
    fails naming it (``rollout.<key>``) before anything is loaded."""
    from gyre.config import ConfigError, reject_unknown

    settings = dict(rollout.items())
    kind = settings.pop("kind", None)
    if kind not in ENGINE_KINDS:
        given = " is missing" if kind is None else f"={kind!r} is not an engine"
        raise ConfigError(f"rollout.kind{given}; known kinds: {', '.join(ENGINE_KINDS)}")
    known = set(inspect.signature(engine_class(kind)).parameters) - {"model_path", "engine_id"}
    reject_unknown(settings, known, "rollout", f"not a setting of the {kind} engine")
    if settings.get("engine_args") is not None:
        settings["engine_args"] = dict(settings["engine_args"])
    return make_engine(kind, model_path=model_path, engine_id=engine_id, **settings)


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
    "engine_class",
    "make_engine",
    "make_engine_from_config",
]
