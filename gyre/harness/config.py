"""Settings of harnesses and executions (Hydra groups ``harness`` and ``execution``; every key is
explained in conf/harness/default.yaml and conf/eval.yaml).

Plain dataclasses built with `from_mapping`, which fails loudly on an unknown key and names it: a typo
in a config must not silently fall back to a default for a run that lasts hours.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

HARNESS_NAMES = ("reference", "oracle", "mini-swe-agent", "claude-code", "codex")


@dataclass
class ReferenceOptions:
    """Knobs of `gyre.harness.reference` beyond the common ones (see its command-line help)."""

    max_retries: int = 2
    context_chars: int = 24_000
    context_tokens: int | None = None
    sub_agent: bool = True
    explore: bool = True  # the exploration sub-agent before the first turn (delegate works either way)
    sub_max_turns: int = 2
    tool_timeout_s: float = 60.0
    max_output_chars: int = 8_000
    request_timeout_s: float = 600.0
    api_retries: int = 2
    tool_delay_mu: float | None = None  # simulated tool seconds per turn ~ log-normal(mu, sigma); None: off
    tool_delay_sigma: float = 1.0
    tools: list[str] | None = None  # main-agent tools offered (None: all); a short prompt for small models
    sub_tools: list[str] | None = None  # sub-agent tools offered (None: all; must include report)


@dataclass
class MiniSweAgentOptions:
    config: str = "mini.yaml"  # a config bundled with mini-swe-agent, or a path to one
    command: list[str] = field(default_factory=list)  # empty: <this python> -m minisweagent.run.mini
    step_timeout_s: float = 60.0  # seconds per bash action
    extra_config: dict[str, Any] = field(default_factory=dict)  # merged over the generated config


@dataclass
class ClaudeCodeOptions:
    executable: str = "claude"
    small_model: str | None = None  # ANTHROPIC_DEFAULT_HAIKU_MODEL (sub-agents); None: the model_name
    extra_args: list[str] = field(default_factory=list)


@dataclass
class CodexOptions:
    executable: str = "codex"
    provider: str = "gyre"  # the [model_providers.<name>] written to the generated config.toml
    extra_args: list[str] = field(default_factory=list)


@dataclass
class ExecutionConfig:
    """Limits and bookkeeping of one execution (the same for every execution of a run).

    ``run_dir`` and ``eval_retries`` are not set in the harness yaml: the run's folder and
    ``env.eval_retries`` fill them (`gyre.harness.make_pool`)."""

    run_dir: str = "runs/executions"  # each execution gets <run_dir>/<execution id>/{workspace,control,harness.log}
    time_limit_s: float | None = None  # None: the task's own agent_timeout
    max_calls: int | None = None  # stop once this many model calls are recorded (None: no limit)
    grace_s: float = 10.0  # SIGTERM, then SIGKILL after this many seconds
    poll_s: float = 0.2  # how often the call count is checked
    eval_retries: int = 2  # env.eval_retries: re-runs of an evaluation that itself failed
    hung_tests_score_zero: bool = True  # tests that time out on every try: reward 0 (the agent's code hangs)
    keep_workspaces: bool = True  # False: delete workspace after scoring (the log and control files stay)
    harness_memory_mb: int | None = None  # address-space limit of harness processes (None: sandbox's, or none for node)
    log_max_bytes: int = 20_000_000  # harness stdout+stderr kept (head and tail) in harness.log
    output_limit_mb: float | None = 256.0  # harness output past which the execution stops (output_limit)

    def __post_init__(self) -> None:
        checks = {
            "time_limit_s": self.time_limit_s is None or self.time_limit_s > 0,
            "max_calls": self.max_calls is None or self.max_calls >= 1,
            "grace_s": self.grace_s >= 0,
            "poll_s": self.poll_s > 0,
            "eval_retries": self.eval_retries >= 0,
            "harness_memory_mb": self.harness_memory_mb is None or self.harness_memory_mb > 0,
            "log_max_bytes": self.log_max_bytes >= 1024,
            "output_limit_mb": self.output_limit_mb is None or self.output_limit_mb > 0,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"execution config: invalid value for {', '.join(f'{n}={getattr(self, n)!r}' for n in bad)}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> ExecutionConfig:
        return build(cls, data or {}, "execution")


@dataclass
class HarnessConfig:
    """Which harness runs the agent (``name``), the settings every model-backed harness shares, the
    execution limits and the pool's concurrency."""

    name: str = "reference"
    model_name: str = "gyre"
    max_turns: int = 30
    max_tokens: int = 64
    temperature: float | None = None
    concurrency: int = 32
    score_concurrency: int | None = None
    progress: bool = True
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    reference: ReferenceOptions = field(default_factory=ReferenceOptions)
    mini_swe_agent: MiniSweAgentOptions = field(default_factory=MiniSweAgentOptions)
    claude_code: ClaudeCodeOptions = field(default_factory=ClaudeCodeOptions)
    codex: CodexOptions = field(default_factory=CodexOptions)

    def __post_init__(self) -> None:
        if self.name not in HARNESS_NAMES:
            raise ValueError(f"harness.name must be one of {HARNESS_NAMES}, got {self.name!r}")
        for key in ("max_turns", "max_tokens", "concurrency"):
            if getattr(self, key) < 1:
                raise ValueError(f"harness.{key} must be >= 1, got {getattr(self, key)}")
        if self.score_concurrency is not None and self.score_concurrency < 1:
            raise ValueError(f"harness.score_concurrency must be >= 1 or null, got {self.score_concurrency}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> HarnessConfig:
        data = dict(data or {})
        for key in ("run_dir", "eval_retries"):
            if key in (data.get("execution") or {}):
                where = "the run's folder" if key == "run_dir" else "env.eval_retries"
                raise ValueError(f"harness.execution.{key}: not set here; it comes from {where}")
        return build(cls, data, "harness")


def build(cls: type[T], data: Mapping[str, Any], where: str) -> T:
    """Instantiate dataclass ``cls`` from ``data``, recursing into dataclass-typed fields; unknown keys
    raise with their dotted path."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known keys are {sorted(known)}")
    values: dict[str, Any] = {}
    for name, value in data.items():
        hint = _dataclass_in(hints[name])
        values[name] = build(hint, value or {}, f"{where}.{name}") if hint is not None else _plain(value)
    return cls(**values)


def _dataclass_in(hint: Any) -> type | None:
    if dataclasses.is_dataclass(hint):
        return hint  # type: ignore[return-value]
    if isinstance(hint, types.UnionType):
        found = [arg for arg in typing.get_args(hint) if dataclasses.is_dataclass(arg)]
        return found[0] if found else None
    return None


def _plain(value: Any) -> Any:
    """OmegaConf containers to plain Python (lists and dicts stay mutable and picklable)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(v) for v in value]
    return value
