"""The stream of executions the simulated cluster rolls out.

An execution is a sequence of model calls (new prefill tokens + decode tokens) each followed by tool time.
The simulator only needs each execution's totals (calls, prefill, decode, tool seconds, tree tokens): within
an execution it interleaves model work and tool time uniformly (see ``rollout.py``), so the per-call lists
are reduced to sums as soon as they are drawn. That keeps 10,000 executions of hundreds of calls cheap.

Executions come from log-normal draws (``sim.workload.*_mean`` / ``*_sigma``, parametrised by the mean so
that widening the tail keeps the expected work fixed; ``long_share`` of them ``long_calls_factor`` times
longer for bimodal lengths) or from a trace (jsonl, one execution per line:
``{"calls": [{"prefill": int, "decode": int, "tool_s": float}, ...]}``), sampled with replacement.
The stream is drawn in fixed-size chunks seeded by ``(seed, chunk)``: every policy sees the same executions
in the same order, however many it ends up dispatching.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gyre.sim.config import CONF_DIR, ConfigError, WorkloadCfg

CHUNK = 1024  # executions drawn per chunk


@dataclass
class Executions:
    """Per-execution totals, one array entry per execution."""

    calls: np.ndarray  # model calls
    prefill: np.ndarray  # new (uncached) prompt tokens over all calls, the task prompt included
    decode: np.ndarray  # generated tokens over all calls
    tool_s: np.ndarray  # tool/environment seconds over all calls

    def __len__(self) -> int:
        return len(self.calls)

    @property
    def tree_tokens(self) -> np.ndarray:
        """Tokens of the uncapped trajectory tree: every prompt and response token once (prefix-shared)."""
        return self.prefill + self.decode

    def slice(self, start: int, stop: int) -> Executions:
        return Executions(self.calls[start:stop], self.prefill[start:stop], self.decode[start:stop],
                          self.tool_s[start:stop])

    @staticmethod
    def concat(parts: list[Executions]) -> Executions:
        return Executions(*(np.concatenate([getattr(p, k) for p in parts]) for k in ("calls", "prefill", "decode",
                                                                                        "tool_s")))


def lognormal(rng: np.random.Generator, mean: float, sigma: float, size: int) -> np.ndarray:
    """Log-normal draws with the given *mean* (not median); sigma=0 gives exactly ``mean``."""
    if mean <= 0:
        return np.zeros(size)
    if sigma == 0:
        return np.full(size, float(mean))
    mu = np.log(mean) - sigma * sigma / 2
    return np.exp(mu + sigma * rng.standard_normal(size))


def draw_lognormal(cfg: WorkloadCfg, rng: np.random.Generator, size: int) -> Executions:
    """``size`` executions from the log-normal workload model (per-call draws summed per execution)."""
    calls = lognormal(rng, cfg.calls_mean, cfg.calls_sigma, size)
    if cfg.long_share > 0:  # bimodal lengths: a share of executions makes long_calls_factor times more calls
        calls = np.where(rng.random(size) < cfg.long_share, calls * cfg.long_calls_factor, calls)
    calls = np.clip(np.rint(calls), 1, cfg.max_calls).astype(np.int64)
    total = int(calls.sum())
    starts = np.concatenate(([0], np.cumsum(calls)[:-1]))

    def per_execution(mean: float, sigma: float) -> np.ndarray:
        per_call = lognormal(rng, mean, sigma, total)
        return np.add.reduceat(per_call, starts) if total else np.zeros(size)

    prompt = lognormal(rng, cfg.prompt_tokens_mean, cfg.prompt_tokens_sigma, size)
    prefill = np.rint(per_execution(cfg.prefill_tokens_mean, cfg.prefill_tokens_sigma) + prompt)
    decode = np.rint(per_execution(cfg.decode_tokens_mean, cfg.decode_tokens_sigma))
    tool = per_execution(cfg.tool_s_mean, cfg.tool_s_sigma)
    return Executions(calls.astype(float), prefill, decode, tool)


def resolve_trace(path: str | Path) -> Path:
    """A trace path as given, or, when relative and not found there, relative to ``conf/sim/`` (where
    ``calibrate.py`` writes a preset's trace beside it)."""
    path = Path(path)
    if path.is_file() or path.is_absolute():
        return path
    beside_presets = CONF_DIR / "sim" / path
    return beside_presets if beside_presets.is_file() else path


def read_trace(path: str | Path) -> Executions:
    """Totals of every execution in a trace file; errors name the line and the field."""
    path = resolve_trace(path)
    if not path.is_file():
        raise ConfigError(f"sim.workload.trace: no such file {str(path)!r} (relative paths: from the current "
                          "folder, then conf/sim/)")
    rows: list[tuple[float, float, float, float]] = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not JSON ({exc.msg})") from exc
        calls = record.get("calls") if isinstance(record, dict) else None
        if not isinstance(calls, list) or not calls:
            raise ConfigError(f"{where}: field 'calls' must be a non-empty list of calls")
        sums = [0.0, 0.0, 0.0]
        for index, call in enumerate(calls):
            for slot, key in enumerate(("prefill", "decode", "tool_s")):
                value = call.get(key, 0) if isinstance(call, dict) else None
                if not isinstance(value, (int, float)) or value < 0:
                    raise ConfigError(f"{where}: calls[{index}].{key} must be a number >= 0, got {value!r}")
                sums[slot] += value
        rows.append((float(len(calls)), *sums))
    if not rows:
        raise ConfigError(f"sim.workload.trace: {str(path)!r} holds no executions")
    calls, prefill, decode, tool = (np.array(col) for col in zip(*rows))
    return Executions(calls, prefill, decode, tool)


class WorkloadStream:
    """Execution ``i`` of the run, for any ``i``, drawn lazily chunk by chunk (deterministic per seed)."""

    def __init__(self, cfg: WorkloadCfg, seed: int):
        self.cfg, self.seed = cfg, seed
        self.trace = read_trace(cfg.trace) if cfg.trace else None
        self.chunks: list[Executions] = []

    def _chunk(self, index: int) -> Executions:
        while len(self.chunks) <= index:
            rng = np.random.default_rng([self.seed, len(self.chunks)])
            if self.trace is not None:
                pick = rng.integers(0, len(self.trace), CHUNK)
                part = Executions(*(getattr(self.trace, k)[pick] for k in ("calls", "prefill", "decode", "tool_s")))
            else:
                part = draw_lognormal(self.cfg, rng, CHUNK)
            self.chunks.append(part)
        return self.chunks[index]

    def take(self, start: int, count: int) -> Executions:
        """Executions ``start .. start + count - 1``."""
        parts = []
        pos, end = start, start + count
        while pos < end:
            chunk, offset = divmod(pos, CHUNK)
            take = min(CHUNK - offset, end - pos)
            parts.append(self._chunk(chunk).slice(offset, offset + take))
            pos += take
        return Executions.concat(parts) if parts else Executions(*(np.zeros(0) for _ in range(4)))

    def means(self, sample: int = 2 * CHUNK) -> dict[str, float]:
        """Mean totals over the first ``sample`` executions (what the rate model and the ideal bound use)."""
        head = self.take(0, sample)
        return {"calls": float(head.calls.mean()), "prefill": float(head.prefill.mean()),
                "decode": float(head.decode.mean()), "tool_s": float(head.tool_s.mean())}
