"""``make_engine_from_config``: the one way training cells, ``gyre.serve`` and ``gyre.eval`` build an engine
from the composed ``rollout`` section; a bad ``kind`` or key fails naming it before any model is loaded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from gyre.config import ConfigError
from gyre.rollout import make_engine_from_config
from gyre.rollout.base import SamplingParams
from gyre.rollout.hf import HFEngine

CONF = Path(__file__).resolve().parents[2] / "conf" / "rollout"


def section(name: str) -> dict:
    return OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml"), resolve=True)  # type: ignore[return-value]


def test_the_hf_section_builds_a_working_engine(tiny_model_path):
    rollout = {**section("hf"), "max_batch_size": 3, "max_context": 64}
    assert rollout["kind"] == "hf" and rollout["device"] == "cpu"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        engine = make_engine_from_config(rollout, model_path=tiny_model_path, engine_id="cell-5")
        assert isinstance(engine, HFEngine) and engine.engine_id == "cell-5"
        assert (engine.max_batch_size, engine.max_context) == (3, 64)
        greedy = SamplingParams(temperature=0.0, max_new_tokens=4)
        generation = asyncio.run(engine.generate("s", [20, 21, 22], greedy))
        assert len(generation.response_ids) == 4
        asyncio.run(engine.close())
    finally:
        torch.set_num_threads(threads)
    assert rollout["kind"] == "hf"  # the caller's section is left as it was


def test_an_unknown_kind_names_rollout_kind_and_the_known_kinds():
    with pytest.raises(ConfigError, match=r"rollout\.kind='sglang' is not an engine; known kinds: hf, vllm"):
        make_engine_from_config({**section("hf"), "kind": "sglang"}, model_path="tiny", engine_id="c")
    with pytest.raises(ConfigError, match=r"rollout\.kind is missing; known kinds: hf, vllm"):
        make_engine_from_config({"device": "cpu"}, model_path="tiny", engine_id="c")


def test_an_unknown_key_is_named_before_anything_loads():
    with pytest.raises(ConfigError, match=r"rollout\.max_batch: not a setting of the hf engine .*did you mean rollout\.max_batch_size\?"):
        make_engine_from_config({**section("hf"), "max_batch": 4}, model_path="tiny", engine_id="c")
    with pytest.raises(ConfigError, match=r"rollout\.engine_args: not a setting of the hf engine"):
        make_engine_from_config({**section("hf"), "engine_args": {}}, model_path="tiny", engine_id="c")
    # The vllm section's keys are all VLLMEngine's: checking them needs no vLLM (it is imported on build).
    with pytest.raises(ConfigError, match=r"rollout\.devices: not a setting of the vllm engine"):
        make_engine_from_config({**section("vllm"), "devices": "cuda"}, model_path="tiny", engine_id="c")
