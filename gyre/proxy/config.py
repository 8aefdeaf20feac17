"""Proxy settings (the ``proxy`` group of the Hydra config; each key is explained in conf/proxy/default.yaml)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from gyre.chat.roles import DEFAULT_SUMMARY_PATTERN
from gyre.config import without_removed

# Keys that left the proxy group (kept in conf/proxy/default.yaml as null): a value set for one fails
# saying what to use instead. The router's limits per cell are set by whoever makes the cells, beside
# their number; training's cluster never read these two.
REMOVED = {
    "cell_capacity": "the calls in flight per rollout cell are set beside the number of cells: "
    "cluster.call_capacity (gyre.main), serve.call_capacity (gyre.serve), eval.call_capacity (gyre.eval)",
    "max_sessions_per_cell": "no entry point limits executions per cell through the proxy; bound concurrent "
    "executions with cluster.capacity (gyre.main, per rollout cell), harness.concurrency (gyre.eval) "
    "or serve.executions (gyre.serve)",
}


@dataclass(frozen=True)
class ParkingConfig:
    """When the router parks a session whose call returned (``proxy.parking``; gyre/scheduler/parking.py)."""

    enabled: bool = True
    window: int = 4
    prior_s: float | None = None
    restore_s: float = 0.01
    restore_s_per_1k_tokens: float = 0.005

    def __post_init__(self) -> None:
        bad = [name for name, ok in {
            "window": self.window >= 1,
            "prior_s": self.prior_s is None or self.prior_s >= 0,
            "restore_s": self.restore_s >= 0,
            "restore_s_per_1k_tokens": self.restore_s_per_1k_tokens >= 0,
        }.items() if not ok]
        if bad:
            raise ValueError(f"proxy config: invalid value for {', '.join(f'parking.{n}={getattr(self, n)!r}' for n in bad)}")

    def restore_cost_s(self, context_tokens: int) -> float:
        """What restoring a session of ``context_tokens`` is expected to cost (the park rule's threshold)."""
        return self.restore_s + self.restore_s_per_1k_tokens * context_tokens / 1000

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> ParkingConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"proxy config: unknown keys {[f'parking.{k}' for k in unknown]}; known keys are {sorted(known)}")
        return cls(**data)


@dataclass
class ProxyConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    run_dir: str = "runs/serve"
    served_model_name: str = "gyre"
    queue_timeout_s: float = 30.0
    retry_after_s: float = 1.0
    max_body_bytes: int = 32 * 1024 * 1024
    max_parse_memory_ratio: float = 4.0
    parse_memory_floor_mb: int = 8
    worker_thread_bytes: int = 65536
    max_count_tokens_calls: int = 4096
    context_window: int | None = None
    default_max_tokens: int | None = None
    max_tokens_cap: int | None = None
    max_output_tokens: int = 1_048_576
    default_temperature: float = 1.0
    history_calls: int = 64
    summary_pattern: str | None = DEFAULT_SUMMARY_PATTERN
    stream_chunk_chars: int = 32
    fsync: bool = True
    fsync_before_response: bool = False
    fsync_interval_s: float = 0.05
    log_level: str = "warning"
    # Idle seconds a client's kept-alive connection stays open. Longer than clients keep theirs (httpx 5 s, Node
    # 4-5 s): when the server closes first, a pooled request sent at that instant dies with a connection reset.
    keep_alive_s: float = 75.0
    parking: ParkingConfig = field(default_factory=ParkingConfig)

    def __post_init__(self) -> None:
        if isinstance(self.parking, dict):
            self.parking = ParkingConfig.from_mapping(self.parking)
        checks = {
            "port": 0 <= self.port <= 65535,
            "queue_timeout_s": self.queue_timeout_s >= 0,
            "retry_after_s": self.retry_after_s > 0,
            "fsync_interval_s": self.fsync_interval_s >= 0,
            "max_body_bytes": self.max_body_bytes >= 1024,
            "max_parse_memory_ratio": self.max_parse_memory_ratio >= 1,
            "parse_memory_floor_mb": self.parse_memory_floor_mb >= 0,
            "worker_thread_bytes": self.worker_thread_bytes >= 0,
            "max_count_tokens_calls": self.max_count_tokens_calls >= 0,
            "context_window": self.context_window is None or self.context_window >= 2,
            "default_max_tokens": self.default_max_tokens is None or self.default_max_tokens >= 1,
            "max_tokens_cap": self.max_tokens_cap is None or self.max_tokens_cap >= 1,
            "max_output_tokens": self.max_output_tokens >= 1,
            "default_temperature": self.default_temperature >= 0,
            "history_calls": self.history_calls >= 1,
            "stream_chunk_chars": self.stream_chunk_chars >= 1,
            "keep_alive_s": self.keep_alive_s > 0,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"proxy config: invalid value for {', '.join(f'{n}={getattr(self, n)!r}' for n in bad)}")

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> ProxyConfig:
        """Build from a plain mapping (a Hydra node); unknown and removed keys fail loudly, naming them."""
        data = without_removed(data, "proxy", REMOVED)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"proxy config: unknown keys {unknown}; known keys are {sorted(known)}")
        return cls(**data)
