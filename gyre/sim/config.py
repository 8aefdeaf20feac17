"""Typed schema of the simulator's Hydra config (``conf/sim_config.yaml`` + presets in ``conf/sim/``).

The YAML files hold every value and its comment; these dataclasses hold only names and types, with no
defaults, so there is one source of truth for values. Merging the composed config into the schema makes an
unknown key (a typo in a preset or on the command line) fail with its full dotted name, and a key left out
fail as missing, instead of being silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, ValidationError

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
PRIMARY = "sim_config"
PRESETS = ("nl2repo_122b", "deepswe_122b", "terminalbench_122b", "nl2repo_2t", "calibrated")
RESTORES = ("transfer", "recompute")  # sim.parking.restore: KV back from host memory, or the prefix recomputed


class ConfigError(ValueError):
    """A bad simulator config; the message names the key."""


@dataclass
class ModelCfg:
    total_params_b: float = MISSING
    active_params_b: float = MISSING
    weight_bytes: float = MISSING
    kv_bytes_per_token: float = MISSING


@dataclass
class HardwareCfg:
    gpu_mem_gb: float = MISSING
    hbm_tb_s: float = MISSING
    peak_tflops: float = MISSING
    mem_util: float = MISSING
    bw_efficiency: float = MISSING
    decode_mfu: float = MISSING
    prefill_mfu: float = MISSING
    train_mfu: float = MISSING


@dataclass
class RolloutCfg:
    engines_per_cell: int = MISSING
    max_sessions: int = MISSING
    step_overhead_s: float = MISSING
    session_context_tokens: int | None = MISSING
    max_context_tokens: int = MISSING
    migration_gb_s: float = MISSING


@dataclass
class WorkloadCfg:
    trace: str | None = MISSING
    calls_mean: float = MISSING
    calls_sigma: float = MISSING
    long_share: float = MISSING
    long_calls_factor: float = MISSING
    max_calls: int = MISSING
    prompt_tokens_mean: float = MISSING
    prompt_tokens_sigma: float = MISSING
    prefill_tokens_mean: float = MISSING
    prefill_tokens_sigma: float = MISSING
    decode_tokens_mean: float = MISSING
    decode_tokens_sigma: float = MISSING
    tool_s_mean: float = MISSING
    tool_s_sigma: float = MISSING
    tool_gaps: str | None = MISSING
    timeout_s: float | None = MISSING


@dataclass
class ParkingCfg:
    enabled: bool = MISSING
    restore: str = MISSING
    host_gb_s: float = MISSING
    host_kv_gb_per_gpu: float | None = MISSING
    recompute_tokens_s: float | None = MISSING
    window: int = MISSING
    prior_s: float | None = MISSING


@dataclass
class TrainCfg:
    flops_per_param_token: float = MISSING
    achieved_tflops_per_gpu: float | None = MISSING
    tree_token_ratio: dict[str, float] = MISSING
    weight_sync_s: float = MISSING
    step_overhead_s: float = MISSING


@dataclass
class SwitchCfg:
    rollout_to_train_s: float = MISSING
    train_to_rollout_s: float = MISSING


@dataclass
class OutputCfg:
    dir: str | None = MISSING
    json: bool = MISSING
    png: bool = MISSING
    table: bool = MISSING


@dataclass
class SimCfg:
    name: str = MISSING
    policies: list[str] = MISSING
    steps: int = MISSING
    seed: int = MISSING
    cells: int = MISSING
    gpus_per_cell: int = MISSING
    executions: int | None = MISSING
    group_size: int = MISSING
    drain: bool = MISSING
    decide_interval_s: float = MISSING
    model: ModelCfg = MISSING
    hardware: HardwareCfg = MISSING
    rollout: RolloutCfg = MISSING
    parking: ParkingCfg = MISSING
    workload: WorkloadCfg = MISSING
    train: TrainCfg = MISSING
    switch: SwitchCfg = MISSING
    output: OutputCfg = MISSING


@dataclass
class SchedulerSection:
    batch_size: int = MISSING
    max_staleness: int = MISSING
    stale_policy: str = MISSING
    rollout_cells: int | None = MISSING
    stream_from: float = MISSING


@dataclass
class TrajectorySection:
    max_paths: int | None = MISSING


@dataclass
class RootCfg:
    run_dir: str = MISSING  # the simulation's folder (Hydra's job folder; results go there unless sim.output.dir)
    sim: SimCfg = MISSING
    scheduler: SchedulerSection = MISSING
    trajectory: TrajectorySection = MISSING


def validate(cfg: DictConfig | dict[str, Any]) -> RootCfg:
    """Typed, checked config from a composed one; raises ``ConfigError`` naming the offending key."""
    raw = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(RootCfg), raw)
        root: RootCfg = OmegaConf.to_object(merged)  # type: ignore[assignment]
    except ConfigKeyError as exc:
        raise ConfigError(f"unknown config key {exc.full_key!r} (not in the simulator's schema)") from exc
    except MissingMandatoryValue as exc:
        raise ConfigError(f"config key {exc.full_key!r} has no value") from exc
    except ValidationError as exc:
        raise ConfigError(f"config key {exc.full_key!r}: {exc.msg}") from exc
    check(root)
    return root


def _require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: {message}")


def check(root: RootCfg) -> None:
    """Range checks that the types alone do not express."""
    sim = root.sim
    from gyre.scheduler import POLICIES

    for name in sim.policies:
        _require(name in POLICIES, "sim.policies", f"unknown policy {name!r}; known: {sorted(POLICIES)}")
    _require(len(sim.policies) > 0, "sim.policies", "name at least one policy")
    _require(sim.steps >= 1, "sim.steps", f"must be >= 1, got {sim.steps}")
    _require(sim.cells >= 2, "sim.cells", f"must be >= 2 (one core and at least one satellite), got {sim.cells}")
    _require(sim.gpus_per_cell >= 1, "sim.gpus_per_cell", f"must be >= 1, got {sim.gpus_per_cell}")
    _require(sim.decide_interval_s >= 0, "sim.decide_interval_s", f"must be >= 0, got {sim.decide_interval_s}")
    _require(sim.executions is None or sim.executions >= 1, "sim.executions", "must be >= 1 or null")
    _require(sim.group_size >= 1, "sim.group_size", f"must be >= 1, got {sim.group_size}")
    _require(root.scheduler.batch_size % sim.group_size == 0, "sim.group_size",
             f"must divide scheduler.batch_size={root.scheduler.batch_size} (steps take whole groups), got {sim.group_size}")
    _require(sim.executions is None or sim.executions % sim.group_size == 0, "sim.executions",
             f"must be a multiple of sim.group_size={sim.group_size} (tasks are dispatched as whole groups)")
    engines = sim.rollout.engines_per_cell
    _require(engines >= 1 and sim.gpus_per_cell % engines == 0, "sim.rollout.engines_per_cell",
             f"must divide sim.gpus_per_cell={sim.gpus_per_cell}, got {engines}")
    _require(sim.rollout.max_sessions >= 1, "sim.rollout.max_sessions", "must be >= 1")
    _require(sim.rollout.migration_gb_s > 0, "sim.rollout.migration_gb_s", "must be > 0")
    _require(sim.rollout.max_context_tokens >= 1, "sim.rollout.max_context_tokens", "must be >= 1")
    park = sim.parking
    _require(park.restore in RESTORES, "sim.parking.restore", f"must be one of {list(RESTORES)}, got {park.restore!r}")
    _require(park.host_gb_s > 0, "sim.parking.host_gb_s", f"must be > 0, got {park.host_gb_s}")
    _require(park.host_kv_gb_per_gpu is None or park.host_kv_gb_per_gpu >= 0, "sim.parking.host_kv_gb_per_gpu",
             f"must be >= 0 or null, got {park.host_kv_gb_per_gpu}")
    _require(park.recompute_tokens_s is None or park.recompute_tokens_s > 0, "sim.parking.recompute_tokens_s",
             f"must be > 0 or null, got {park.recompute_tokens_s}")
    _require(park.window >= 1, "sim.parking.window", f"must be >= 1, got {park.window}")
    _require(park.prior_s is None or park.prior_s >= 0, "sim.parking.prior_s", f"must be >= 0 or null, got {park.prior_s}")
    for key in ("hbm_tb_s", "peak_tflops", "mem_util", "bw_efficiency", "decode_mfu", "prefill_mfu",
                "train_mfu", "gpu_mem_gb"):
        _require(getattr(sim.hardware, key) > 0, f"sim.hardware.{key}", "must be > 0")
    work = sim.workload
    for key in ("calls", "prompt_tokens", "prefill_tokens", "decode_tokens", "tool_s"):
        mean, sigma = getattr(work, f"{key}_mean"), getattr(work, f"{key}_sigma")
        _require(mean >= 0, f"sim.workload.{key}_mean", f"must be >= 0, got {mean}")
        _require(sigma >= 0, f"sim.workload.{key}_sigma", f"must be >= 0, got {sigma}")
    _require(work.calls_mean >= 1, "sim.workload.calls_mean", "must be >= 1")
    _require(work.decode_tokens_mean > 0 or work.tool_s_mean > 0, "sim.workload",
             "executions need decode tokens or tool time (both means are 0)")
    _require(work.max_calls >= 1, "sim.workload.max_calls", "must be >= 1")
    _require(0 <= work.long_share <= 1, "sim.workload.long_share", f"must be in [0, 1], got {work.long_share}")
    _require(work.long_calls_factor >= 1, "sim.workload.long_calls_factor",
             f"must be >= 1, got {work.long_calls_factor}")
    _require(work.timeout_s is None or work.timeout_s > 0, "sim.workload.timeout_s", "must be > 0 or null")
    _require(sim.train.flops_per_param_token > 0, "sim.train.flops_per_param_token", "must be > 0")
    achieved = sim.train.achieved_tflops_per_gpu
    _require(achieved is None or achieved > 0, "sim.train.achieved_tflops_per_gpu", "must be > 0 or null")
    for cap, ratio in sim.train.tree_token_ratio.items():
        _require(cap == "uncapped" or cap.isdigit(), "sim.train.tree_token_ratio",
                 f"keys are path caps ('1', '5', ...) or 'uncapped', got {cap!r}")
        _require(0 < ratio <= 1, f"sim.train.tree_token_ratio.{cap}", f"must be in (0, 1], got {ratio}")
    for key in ("weight_sync_s", "step_overhead_s"):
        _require(getattr(sim.train, key) >= 0, f"sim.train.{key}", "must be >= 0")
    for key in ("rollout_to_train_s", "train_to_rollout_s"):
        _require(getattr(sim.switch, key) >= 0, f"sim.switch.{key}", "must be >= 0")
    sched = root.scheduler
    _require(sched.batch_size >= 1, "scheduler.batch_size", "must be >= 1")
    _require(sched.max_staleness >= 0, "scheduler.max_staleness", "must be >= 0")
    _require(sched.stale_policy in ("drop", "keep"), "scheduler.stale_policy", "must be 'drop' or 'keep'")
    _require(0.0 < sched.stream_from <= 1.0, "scheduler.stream_from", f"must be in (0, 1], got {sched.stream_from}")
    _require(sched.rollout_cells is None or 1 <= sched.rollout_cells <= sim.cells - 1, "scheduler.rollout_cells",
             f"must be between 1 and sim.cells - 1 = {sim.cells - 1}, or null")
    _require(root.trajectory.max_paths is None or root.trajectory.max_paths >= 1, "trajectory.max_paths",
             "must be >= 1 or null")


def load_config(preset: str | None = None, overrides: list[str] | tuple[str, ...] = ()) -> RootCfg:
    """Compose ``conf/sim_config.yaml`` (+ ``conf/sim/<preset>.yaml``) with overrides, as the CLI would."""
    from hydra import compose, initialize_config_dir

    args = list(overrides)
    if preset is not None:
        args.insert(0, f"+sim={preset}")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(config_name=PRIMARY, overrides=args)
    return validate(cfg)
