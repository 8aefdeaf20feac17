"""The main job with ``rollout=vllm`` (vLLM's CPU build here), end to end: two elastic steps on two cells,
a satellite switching roles, the new weights loaded into every vLLM engine after each step, and every
recorded call stamped with the version of the weights that generated it, checked by recomputing its
log-probs with that version's weights (the checkpoint of that step; version 0: the starting model).

The weights must move for the check to mean anything: the built-in model earns no reward on the suite
(all advantages 0), so an entropy bonus and a large learning rate make each step change the policy, and
the test asserts that the wrong version's weights would not have matched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gyre.models import VLLM_CPU_MODEL

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

MATCH = 1e-3  # vLLM (fp32) against the trainer's model at the same weights; measured ~1e-6
MOVED = 1e-2  # a step's update moves the log-probs of a call's response at least this much


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("vllm-run") / "run"
    overrides = [
        "+recipe=deepswe", "rollout=vllm", f"model.path={VLLM_CPU_MODEL}", f"run_dir={run_dir}",
        # max_staleness=0: step 2's batch is generated after step 1's weights are loaded, so some calls carry
        # version 1 however fast the machine (with look-ahead every call may finish on version 0)
        "scheduler=elastic", "scheduler.max_staleness=0", "trainer.total_steps=2", "cluster.cells=2",
        "scheduler.batch_size=4",
        "trainer.group_size=2", "trainer.lr=1e-3", "algo.entropy_coef=0.01",
        "rollout.dtype=float32", "rollout.max_cached_tokens=65536", "rollout.enforce_eager=true",
        "harness.max_turns=4", "harness.progress=false", "tracking.backends=[jsonl]",
    ]
    env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    done = subprocess.run([sys.executable, "-m", "gyre.main", *overrides], capture_output=True, text=True, check=False,
                          timeout=900, env={**env, "RAY_AUTH_MODE": "disabled"})
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir


def test_two_elastic_steps_with_role_switches(run_dir):
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(s["step"], s["version"]) for s in steps] == [(1, 1), (2, 2)]
    assert all(s["executions/trained"] >= 4 and s["grad_norm"] > 0 for s in steps)
    roles = [json.loads(line) for line in (run_dir / "timeline.jsonl").read_text().splitlines()]
    satellite = [r["role"] for r in roles if r.get("cell") == "cell1"]
    # the satellite served, joined training, and went back to serving
    assert "train" in satellite and "rollout" in satellite[satellite.index("train"):]


def test_every_call_carries_the_version_of_the_weights_that_generated_it(run_dir):
    from gyre.models import load_model
    from gyre.proxy.record_format import read_record_file

    calls = [call for path in sorted((run_dir / "records").glob("*.jsonl")) for call in read_record_file(path)]
    models = {0: load_model(VLLM_CPU_MODEL).eval()}
    for version in (1, 2):
        models[version] = load_model(str(run_dir / "checkpoints" / f"step_{version:06d}")).eval()
    versions = {call.weight_version for call in calls}
    assert {1, 2} & versions, "no call was served with weights loaded after a step"

    def logprobs(version: int, call) -> torch.Tensor:
        ids = torch.tensor([call.prompt_ids + call.response_ids])
        with torch.no_grad():
            logits = models[version](ids).logits[0, len(call.prompt_ids) - 1: -1].float()
        return torch.log_softmax(logits, -1)[torch.arange(len(call.response_ids)), torch.tensor(call.response_ids)]

    checked = spanning = 0
    told_apart = dict.fromkeys(models, 0)  # calls per version shown to match no other version's weights
    for call in calls:
        if not call.response_ids:
            continue
        recorded = torch.tensor(call.response_logprobs)
        first = int(call.timings.get("weight_version_first", call.weight_version))
        if first == call.weight_version:
            diff = (logprobs(call.weight_version, call) - recorded).abs().max().item()
            assert diff <= MATCH, (call.call_id, call.weight_version, diff)
            if told_apart[call.weight_version] < 8:  # a sample: the recompute is the test's cost
                others = [v for v in models if v != call.weight_version]
                wrong = min((logprobs(v, call) - recorded).abs().max().item() for v in others)
                assert wrong > MOVED, (call.call_id, "another version's weights match as well", wrong)
                told_apart[call.weight_version] += 1
        else:  # a load landed during the call: its first tokens are one version's, the rest the next's
            before = (logprobs(first, call) - recorded).abs() <= MATCH
            after = (logprobs(call.weight_version, call) - recorded).abs() <= MATCH
            assert any(bool(before[:k].all() and after[k:].all()) for k in range(len(recorded) + 1)), call.call_id
            spanning += 1
        checked += 1
    assert checked == len([c for c in calls if c.response_ids]) and checked > 30, (checked, spanning)
    assert sum(told_apart.values()) >= 9, told_apart
