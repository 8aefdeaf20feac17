"""The model factory: the built-in tiny model and local checkpoints, never a hub download."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import Qwen3ForCausalLM

from gyre.models import load_model, load_tokenizer, resolve_model_path
from gyre.models.tiny import TinySpec, tiny_path


def test_tiny_model_is_a_qwen3_checkpoint_that_loads_from_its_folder(tiny_model_path):
    model = load_model("tiny")
    assert isinstance(model, Qwen3ForCausalLM)
    assert str(resolve_model_path("tiny")) == tiny_model_path
    again = load_model(tiny_model_path)  # a plain local HF folder
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), name


def test_tiny_build_is_deterministic(tmp_path, monkeypatch):
    monkeypatch.setenv("GYRE_CACHE", str(tmp_path))
    spec = TinySpec(hidden_size=32, intermediate_size=64, num_hidden_layers=1, vocab_size=600)
    first = tiny_path(spec)
    saved = (first / "tokenizer.json").read_text(), (first / "model.safetensors").read_bytes()
    import shutil

    shutil.rmtree(first)
    second = tiny_path(spec)
    assert ((second / "tokenizer.json").read_text(), (second / "model.safetensors").read_bytes()) == saved
    assert json.loads((second / "config.json").read_text())["hidden_size"] == 32


def test_tiny_tokenizer_round_trips_and_renders_qwen_tool_calls():
    tokenizer = load_tokenizer("tiny")
    text = "def f(x):\n    return x + 1  # ünïcode ✓"
    assert tokenizer.decode(tokenizer(text).input_ids) == text
    messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    rendered = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert '<tools>\n{"type": "function"' in rendered
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>' in rendered
    assert "<|im_start|>user\n<tool_response>\na.py\n</tool_response><|im_end|>\n<|im_start|>assistant\n" in rendered
    for special in ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"):
        assert len(tokenizer(special, add_special_tokens=False).input_ids) == 1, special


def test_missing_local_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a local HF checkpoint folder.*never downloads"):
        load_model(str(tmp_path / "nowhere"))


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_a_plain_tokenizer_loads_as_autotokenizer_would_load_it(preset):
    """load_tokenizer skips AutoTokenizer for the plain tokenizers-library classes (a cheaper import): what it
    loads must be what AutoTokenizer loads from the same folder, to the token."""
    from transformers import AutoTokenizer

    direct = load_tokenizer(preset)
    auto = AutoTokenizer.from_pretrained(resolve_model_path(preset), local_files_only=True)
    assert type(direct) is type(auto)
    assert direct.get_vocab() == auto.get_vocab() and direct.added_tokens_decoder == auto.added_tokens_decoder
    assert direct.special_tokens_map == auto.special_tokens_map and direct.chat_template == auto.chat_template
    assert (direct.eos_token_id, direct.pad_token_id, direct.model_max_length) == (
        auto.eos_token_id, auto.pad_token_id, auto.model_max_length)
    messages = [{"role": "user", "content": "read <tool_call> ünïcode ✓\n  x"}, {"role": "assistant", "content": "ok"}]
    assert direct.apply_chat_template(messages, tokenize=True) == auto.apply_chat_template(messages, tokenize=True)
    assert direct("a  b\tc<|im_end|>").input_ids == auto("a  b\tc<|im_end|>").input_ids


def test_a_checkpoint_of_another_tokenizer_class_goes_through_autotokenizer(tmp_path):
    """A tokenizer class with model-specific code (here Qwen2Tokenizer, as real Qwen checkpoints name) is left to
    AutoTokenizer, which resolves it."""
    import shutil

    folder = tmp_path / "ckpt"
    shutil.copytree(resolve_model_path("tiny"), folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "tokenizer_class": "Qwen2Tokenizer"}))
    assert type(load_tokenizer(str(folder))).__name__ == "Qwen2Tokenizer"
