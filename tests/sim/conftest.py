"""Small, fast simulator configs shared by the sim tests (overrides on top of conf/sim_config.yaml)."""

from __future__ import annotations

import pytest

# A dense 1B model whose decode is memory-bound and flat in concurrency (no KV term): per-session speed is
# 1 / (step_overhead_s + weights / bandwidth), the same at any load, so durations are easy to reason about.
FLAT_ROOFLINE = [
    "sim.gpus_per_cell=8", "sim.model.total_params_b=1", "sim.model.active_params_b=1", "sim.model.weight_bytes=2",
    "sim.model.kv_bytes_per_token=0", "sim.rollout.step_overhead_s=0.02", "sim.workload.timeout_s=null",
    "trajectory.max_paths=null", "sim.train.weight_sync_s=2", "sim.train.step_overhead_s=1",
]
ZERO_VARIANCE = [
    "sim.workload.calls_sigma=0", "sim.workload.prompt_tokens_sigma=0", "sim.workload.prefill_tokens_sigma=0",
    "sim.workload.decode_tokens_sigma=0", "sim.workload.tool_s_sigma=0",
]
WORK = [
    "sim.workload.calls_mean=40", "sim.workload.decode_tokens_mean=200", "sim.workload.tool_s_mean=10",
    "sim.workload.prefill_tokens_mean=500", "sim.workload.prompt_tokens_mean=2000",
]


@pytest.fixture
def small_heavy_tailed() -> list[str]:
    """8 cells, heavy tails (calls, tools), timeouts on: exercises drops, migrations, overload."""
    return ["sim.cells=8", "sim.steps=4", "scheduler.batch_size=48", "sim.rollout.max_sessions=8",
            "sim.workload.calls_mean=20", "sim.workload.calls_sigma=1.0", "sim.workload.timeout_s=2000",
            "sim.workload.max_calls=200"]
