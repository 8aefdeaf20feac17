"""Supervised warm start: demonstrations recorded through the real proxy, transcripts, and SFT on them."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from gyre.chat import ChatTemplate
from gyre.envs import Sandbox, load_tasks
from gyre.harness.config import HarnessConfig
from gyre.harness.demonstrations import DemonstrationError, read_demonstrations, record_demonstrations
from gyre.models import load_tokenizer
from gyre.trainer.sft import SFTConfig, SFTTrainer, lr_factor
from gyre.trainer.sft_data import load_records, load_transcripts
from gyre.trajectory import build_tree

ROOT = Path(__file__).resolve().parents[2]
HARNESS = {"max_turns": 4, "max_tokens": 96, "progress": False, "concurrency": 4,
           "reference": {"sub_agent": False, "tools": ["read_file", "write_file", "finish"]}}


def make_tasks_module():
    spec = importlib.util.spec_from_file_location("learn_make_tasks", ROOT / "recipes" / "learn" / "make_tasks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def learn(tmp_path_factory) -> Path:
    """A small learn suite of the single-conversation families (write, write2, copy): its train/ folder."""
    root = tmp_path_factory.mktemp("learn")
    make_tasks_module().generate(root, {"train": 3, "dev": 0, "test": 0}, ("write", "write2", "copy"), 45, 0)
    return root / "train"


def learn_tasks(train: Path):
    tasks = load_tasks("nl2repo", train).tasks
    return [next(t for t in tasks if f"-{family}-" in t.id) for family in ("write", "write2", "copy")]


@pytest.fixture(scope="module")
def demonstrations(tmp_path_factory, learn):
    """Two demonstrations of one task of each family, recorded through the proxy (scripted engine)."""
    run_dir = tmp_path_factory.mktemp("demos")
    run = asyncio.run(record_demonstrations(learn_tasks(learn), model_path="tiny", harness_config=HarnessConfig.from_mapping(HARNESS),
                                            sandbox=Sandbox(), run_dir=run_dir, samples_per_task=2, seed=1))
    return run


def test_demonstrations_run_the_real_harness_and_score_as_demonstrated(demonstrations):
    assert len(demonstrations.executions) == 6
    for execution in demonstrations.executions:
        behaviour = demonstrations.behaviours[execution.id]
        assert execution.status == "finished", execution.reward_detail
        # the expert solves the task; each of the demonstrator's mistakes costs reward, as it will in RL
        assert (execution.reward == 1.0) == (behaviour == "expert"), (execution.id, behaviour, execution.reward)
        # each scripted call came back as a parsed tool call, and every later call extends the earlier one
        assert all(call.meta["tool_calls"] == 1 for call in execution.calls)
        assert all(call.meta["parent_call_id"] for call in execution.calls[1:])
    copy = next(e for e in demonstrations.executions if "-copy-" in e.id)
    assert [c.agent for c in copy.calls] == ["main"] * 3  # read_file, write_file, finish


def test_a_record_file_and_a_transcript_give_the_same_training_tokens(demonstrations, learn, tmp_path):
    """The same conversation as the proxy recorded it and as an OpenAI transcript: same prompts, same
    responses, hence the same tree and the same trained tokens."""
    execution = next(e for e in demonstrations.executions if "-copy-" in e.id)
    template = ChatTemplate(load_tokenizer("tiny"))
    task = next(t for t in learn_tasks(learn) if execution.id.startswith(f"demo-{t.id}-"))
    workspace = Path(execution.workspace)
    # Rebuild the conversation the harness held, from the task and what the calls did.
    from gyre.harness.reference import MAIN_SYSTEM, main_tools

    replies = [template.decode_response(call.response_ids) for call in execution.calls]
    calls = [json.loads(reply.split("<tool_call>\n", 1)[1].split("\n</tool_call>", 1)[0]) for reply in replies]
    source = calls[0]["arguments"]["path"]
    results = [(learn / task.id / "workspace" / source).read_text(), f"wrote {len(calls[1]['arguments']['content'])} characters to {calls[1]['arguments']['path']}"]
    messages = [{"role": "system", "content": MAIN_SYSTEM}, {"role": "user", "content": f"Task:\n{task.instruction}"}]
    for index, call in enumerate(calls):
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{index}", "type": "function", "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}]})
        if index < 2:
            messages.append({"role": "tool", "tool_call_id": f"c{index}", "content": results[index]})
    transcript = tmp_path / "transcripts.jsonl"
    transcript.write_text(json.dumps({"messages": messages, "tools": main_tools(("read_file", "write_file", "finish"))}) + "\n")
    assert (workspace / calls[1]["arguments"]["path"]).is_file()

    recorded = load_records([demonstrations.records / f"{execution.id}.jsonl"]).examples[0].calls
    replayed = load_transcripts([transcript], template).examples[0].calls
    assert [c.prompt_ids for c in replayed] == [c.prompt_ids for c in recorded]
    assert [c.response_ids for c in replayed] == [c.response_ids for c in recorded]
    a, b = build_tree(recorded), build_tree(replayed)
    assert np.array_equal(a.ids, b.ids) and np.array_equal(a.is_policy, b.is_policy)


def test_malformed_demonstration_lines_are_named_counted_and_skipped(demonstrations, tmp_path):
    template = ChatTemplate(load_tokenizer("tiny"))
    good = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    lines = [json.dumps(good), "{not json", json.dumps({"messages": [{"role": "wizard", "content": "x"}]}),
             json.dumps({"messages": [{"role": "user", "content": "no reply"}]}), json.dumps(good)]
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    data = load_transcripts([tmp_path / "t.jsonl"], template)
    assert len(data.examples) == 2 and len(data.skipped) == 3
    assert [message.split(":")[1] for message in data.skipped] == ["2", "3", "4"]
    assert "role" in data.skipped[1] and "no assistant turn" in data.skipped[2]

    record_file = next(demonstrations.records.glob("*.jsonl"))
    broken = tmp_path / "records" / record_file.name
    broken.parent.mkdir()
    text = record_file.read_text().splitlines()
    broken.write_text(text[0] + "\n{\"truncated\": \n" + "\n".join(text[1:]) + "\n")
    data = load_records([broken.parent])
    assert len(data.skipped) >= 1 and f"{broken}:2" in data.skipped[0]
    assert data.summary().endswith(f"{len(data.skipped)} malformed line(s) skipped")

    bad = tmp_path / "demonstrations.jsonl"
    bad.write_text(json.dumps({"behaviour": "x", "probability": 0.5, "calls": [{"name": "finish", "arguments": {}}]}) + "\n")
    with pytest.raises(DemonstrationError, match="add up to 0.5000"):
        read_demonstrations(bad, "t")
    bad.write_text('{"calls": [{"name": 3}]}\n')
    with pytest.raises(DemonstrationError, match=r"demonstrations.jsonl:1: calls\[0\]"):
        read_demonstrations(bad, "t")


def test_sft_drives_the_demonstration_loss_down_and_its_checkpoint_serves(demonstrations, tmp_path):
    from gyre.rollout.base import SamplingParams
    from gyre.rollout.hf import HFEngine

    data = load_records([demonstrations.records])
    assert len(data.examples) == 6 and not data.skipped
    trainer = SFTTrainer(SFTConfig(steps=30, batch_executions=6, lr=3e-3, warmup_steps=2, save_every=15, log_every=5),
                         "tiny", tmp_path, progress=False)
    final = trainer.fit(data.examples)
    losses = [row["sft/loss"] for row in trainer.history]
    assert losses[-1] < 0.5 * losses[0], losses
    assert final.name == "step_000030" and (tmp_path / "checkpoints" / "latest").resolve() == final
    assert (tmp_path / "checkpoints" / "step_000015" / "trainer_state.pt").is_file()
    assert (tmp_path / "sft_loss.png").stat().st_size > 1000
    engine = HFEngine(str(tmp_path / "checkpoints" / "latest"), engine_id="sft")
    try:
        prompt = data.examples[0].calls[0].prompt_ids
        generation = asyncio.run(engine.generate("s", prompt, SamplingParams(temperature=0.0, max_new_tokens=8)))
        assert len(generation.response_ids) >= 1
    finally:
        asyncio.run(engine.close())


def test_sft_resumes_where_it_stopped(demonstrations, tmp_path):
    data = load_records([demonstrations.records])
    cfg = dict(batch_executions=4, lr=1e-3, min_lr_ratio=1.0, warmup_steps=1, save_every=3)  # a constant rate
    whole = SFTTrainer(SFTConfig(steps=6, **cfg), "tiny", tmp_path / "whole", progress=False)
    whole.fit(data.examples)
    first = SFTTrainer(SFTConfig(steps=3, **cfg), "tiny", tmp_path / "split", progress=False)
    first.fit(data.examples)
    second = SFTTrainer(SFTConfig(steps=6, resume=True, **cfg), "tiny", tmp_path / "split", progress=False)
    second.fit(data.examples)
    assert [row["sft/loss"] for row in second.history] == pytest.approx([row["sft/loss"] for row in whole.history], rel=1e-4)
    shutil.rmtree(tmp_path)


def test_a_held_peak_is_the_constant_run_resumed_onto_the_cosine_tail():
    """hold_peak_until reproduces in one run what a constant-lr run resumed with a decaying schedule trained
    (recipes/learn/README.md): the peak up to that step, then exactly the whole run's cosine from there."""
    held = SFTConfig(steps=2400, lr=1e-3, min_lr_ratio=0.1, warmup_steps=20, hold_peak_until=1800)
    constant = SFTConfig(steps=1800, lr=1e-3, min_lr_ratio=1.0, warmup_steps=20)
    resumed = SFTConfig(steps=2400, lr=1e-3, min_lr_ratio=0.1, warmup_steps=20)
    for step in (0, 10, 19, 20, 500, 1799):
        assert lr_factor(step, held) == lr_factor(step, constant)
    for step in (1800, 2000, 2399):
        assert lr_factor(step, held) == lr_factor(step, resumed)
    assert lr_factor(1799, held) == 1.0 and lr_factor(1800, held) == pytest.approx(0.234, abs=1e-3)  # the step down
    assert lr_factor(2399, held) == pytest.approx(0.1, abs=1e-4)
    short = SFTConfig(steps=100, lr=1e-3, min_lr_ratio=0.1, warmup_steps=20, hold_peak_until=1800)  # a shorter try
    assert all(lr_factor(step, short) == 1.0 for step in range(20, 100))
    with pytest.raises(ValueError, match="hold_peak_until"):
        SFTConfig(steps=100, hold_peak_until=-1)
