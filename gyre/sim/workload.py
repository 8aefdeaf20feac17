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

Tool gaps. Per-call tool seconds are log-normal, or, with ``sim.workload.tool_gaps``, a recorded session's
gaps in order (``gyre/sim/gaps.py``), scaled to ``tool_s_mean``. With parking (``sim.parking``) the per-call
gaps decide, before they are summed, which gaps the router's rule parks (``gyre.scheduler.parking``: from
the session's earlier gaps only) and what each restore costs (the session's context at that gap): each
execution then carries its parked tool seconds and its restore seconds. Neither depends on the policy, so
every policy sees the same ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from gyre.scheduler.parking import ParkRule
from gyre.sim.config import CONF_DIR, ConfigError, WorkloadCfg

CHUNK = 1024  # executions drawn per chunk


@dataclass
class Executions:
    """Per-execution totals, one array entry per execution."""

    calls: np.ndarray  # model calls
    prefill: np.ndarray  # new (uncached) prompt tokens over all calls, the task prompt included
    decode: np.ndarray  # generated tokens over all calls
    tool_s: np.ndarray  # tool/environment seconds over all calls
    parked_s: np.ndarray | None = None  # the part of tool_s spent parked (no engine slot held); None: 0
    restore_s: np.ndarray | None = None  # seconds restoring parked KV before calls (in a slot, not decoding); None: 0

    def __post_init__(self) -> None:
        if self.parked_s is None:
            self.parked_s = np.zeros_like(self.tool_s, dtype=float)
        if self.restore_s is None:
            self.restore_s = np.zeros_like(self.tool_s, dtype=float)

    def __len__(self) -> int:
        return len(self.calls)

    @property
    def tree_tokens(self) -> np.ndarray:
        """Tokens of the uncapped trajectory tree: every prompt and response token once (prefix-shared)."""
        return self.prefill + self.decode

    def columns(self) -> tuple[np.ndarray, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def pick(self, index: np.ndarray | slice) -> Executions:
        return Executions(*(column[index] for column in self.columns()))

    def slice(self, start: int, stop: int) -> Executions:
        return self.pick(slice(start, stop))

    @staticmethod
    def concat(parts: list[Executions]) -> Executions:
        return Executions(*(np.concatenate(columns) for columns in zip(*(p.columns() for p in parts))))

    @staticmethod
    def empty() -> Executions:
        return Executions(*(np.zeros(0) for _ in range(4)))


@dataclass
class Parking:
    """What the park rule needs from the config (``sim.parking``), and what restoring a context token costs."""

    window: int  # gaps the prediction averages (sim.parking.window)
    prior_s: float | None  # the prediction before a session's first gap; None: the workload's mean gap per call
    restore_s_per_token: float  # one engine's KV transfer or recompute time per context token
    max_context: int  # sessions are rewritten to stay under this context (sim.rollout.max_context_tokens)

    def rule(self, mean_gap_s: float) -> ParkRule:
        return ParkRule(self.window, mean_gap_s if self.prior_s is None else self.prior_s)


@dataclass
class PerCall:
    """Every call of some executions, one execution after another: ``starts`` indexes each one's first."""

    starts: np.ndarray
    prompt: np.ndarray  # per execution: task prompt tokens (in context from the first call)
    prefill: np.ndarray
    decode: np.ndarray
    tool_s: np.ndarray

    def totals(self, parking: Parking | None, mean_gap_s: float = 0.0) -> Executions:
        """Per-execution sums, with the parked gaps and restores of the park rule when ``parking`` (whose
        prior, unless configured, is ``mean_gap_s``: the workload's mean gap per call)."""
        def per_execution(values: np.ndarray) -> np.ndarray:
            return np.add.reduceat(values, self.starts) if len(values) else np.zeros(len(self.starts))

        calls = np.diff(np.append(self.starts, len(self.tool_s))).astype(float)
        totals = Executions(calls, per_execution(self.prefill) + self.prompt, per_execution(self.decode),
                            per_execution(self.tool_s))
        if parking is None or len(self.tool_s) == 0:
            return totals
        # Context when each call returns (what a restore before the next call moves or recomputes): the
        # prompt plus every token of the execution's calls so far.
        counts = calls.astype(np.int64)
        grown = np.concatenate(([0.0], np.cumsum(self.prefill + self.decode)))  # over all calls, before each
        context = np.repeat(self.prompt - grown[self.starts], counts) + grown[1:]
        restore = np.minimum(parking.max_context, context) * parking.restore_s_per_token
        parked = parking.rule(mean_gap_s).park_gaps(self.tool_s, self.starts, restore)
        last = np.zeros(len(self.tool_s), dtype=bool)
        last[np.append(self.starts[1:], len(self.tool_s)) - 1] = True  # the execution ends: no call to restore for
        totals.parked_s = per_execution(np.where(parked, self.tool_s, 0.0))
        totals.restore_s = per_execution(np.where(parked & ~last, restore, 0.0))
        return totals


def lognormal(rng: np.random.Generator, mean: float, sigma: float, size: int) -> np.ndarray:
    """Log-normal draws with the given *mean* (not median); sigma=0 gives exactly ``mean``."""
    if mean <= 0:
        return np.zeros(size)
    if sigma == 0:
        return np.full(size, float(mean))
    mu = np.log(mean) - sigma * sigma / 2
    return np.exp(mu + sigma * rng.standard_normal(size))


def draw_lognormal(cfg: WorkloadCfg, rng: np.random.Generator, size: int,
                   gaps: list[np.ndarray] | None = None) -> PerCall:
    """``size`` executions from the log-normal workload model, call by call; per-call tool times from the
    recorded sessions ``gaps`` (already scaled) when given."""
    calls = lognormal(rng, cfg.calls_mean, cfg.calls_sigma, size)
    if cfg.long_share > 0:  # bimodal lengths: a share of executions makes long_calls_factor times more calls
        calls = np.where(rng.random(size) < cfg.long_share, calls * cfg.long_calls_factor, calls)
    calls = np.clip(np.rint(calls), 1, cfg.max_calls).astype(np.int64)
    total = int(calls.sum())
    starts = np.concatenate(([0], np.cumsum(calls)[:-1])).astype(np.int64)
    prompt = lognormal(rng, cfg.prompt_tokens_mean, cfg.prompt_tokens_sigma, size)
    prefill = lognormal(rng, cfg.prefill_tokens_mean, cfg.prefill_tokens_sigma, total)
    decode = lognormal(rng, cfg.decode_tokens_mean, cfg.decode_tokens_sigma, total)
    if gaps is None:
        tool = lognormal(rng, cfg.tool_s_mean, cfg.tool_s_sigma, total)
    else:  # each execution replays one recorded session's gaps in order (cycled if it makes more calls)
        pick = rng.integers(0, len(gaps), size)
        tool = np.concatenate([np.resize(gaps[k], n) for k, n in zip(pick, calls)]) if total else np.zeros(0)
    return PerCall(starts, prompt, prefill, decode, tool)


def _rounded(totals: Executions) -> Executions:
    """Token totals as whole tokens (per-call draws are fractional; sums are rounded, not calls)."""
    totals.prefill = np.rint(totals.prefill)
    totals.decode = np.rint(totals.decode)
    return totals


def resolve_trace(path: str | Path) -> Path:
    """A trace path as given, or, when relative and not found there, relative to ``conf/sim/`` (where
    ``calibrate.py`` writes a preset's trace beside it)."""
    path = Path(path)
    if path.is_file() or path.is_absolute():
        return path
    beside_presets = CONF_DIR / "sim" / path
    return beside_presets if beside_presets.is_file() else path


def read_trace_calls(path: str | Path) -> PerCall:
    """Every call of every execution in a trace file; errors name the line and the field."""
    path = resolve_trace(path)
    if not path.is_file():
        raise ConfigError(f"sim.workload.trace: no such file {str(path)!r} (relative paths: from the current "
                          "folder, then conf/sim/)")
    rows: list[tuple[float, float, float]] = []
    starts: list[int] = []
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
        starts.append(len(rows))
        for index, call in enumerate(calls):
            row = []
            for key in ("prefill", "decode", "tool_s"):
                value = call.get(key, 0) if isinstance(call, dict) else None
                if not isinstance(value, (int, float)) or value < 0:
                    raise ConfigError(f"{where}: calls[{index}].{key} must be a number >= 0, got {value!r}")
                row.append(float(value))
            rows.append((row[0], row[1], row[2]))
    if not rows:
        raise ConfigError(f"sim.workload.trace: {str(path)!r} holds no executions")
    prefill, decode, tool = (np.array(col) for col in zip(*rows))
    return PerCall(np.array(starts, dtype=np.int64), np.zeros(len(starts)), prefill, decode, tool)


def read_trace(path: str | Path, parking: Parking | None = None) -> Executions:
    """Totals of every execution in a trace file (parked gaps and restores too, when ``parking``)."""
    calls = read_trace_calls(path)
    return calls.totals(parking, float(calls.tool_s.mean()))


class WorkloadStream:
    """Execution ``i`` of the run, for any ``i``, drawn lazily chunk by chunk (deterministic per seed)."""

    def __init__(self, cfg: WorkloadCfg, seed: int, parking: Parking | None = None):
        self.cfg, self.seed, self.parking = cfg, seed, parking
        self.trace = read_trace(cfg.trace, parking) if cfg.trace else None
        self.gaps = None
        if cfg.tool_gaps and not cfg.trace:
            # Imported here, not at the top: ``python -m gyre.sim.gaps`` imports gyre.sim (and so this) first.
            from gyre.sim.gaps import read_gaps

            recorded = read_gaps(cfg.tool_gaps)
            # An execution replays one session picked at random: scaled so that the mean over sessions of
            # their mean gap is the preset's (the recorded shape, the preset's mean gap per call).
            scale = cfg.tool_s_mean / max(float(np.mean([gaps.mean() for gaps in recorded])), 1e-300)
            self.gaps = [gaps * scale for gaps in recorded]
        self.chunks: list[Executions] = []

    def _chunk(self, index: int) -> Executions:
        while len(self.chunks) <= index:
            rng = np.random.default_rng([self.seed, len(self.chunks)])
            if self.trace is not None:
                part = self.trace.pick(rng.integers(0, len(self.trace), CHUNK))
            else:
                part = _rounded(draw_lognormal(self.cfg, rng, CHUNK, self.gaps).totals(self.parking, self.cfg.tool_s_mean))
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
        return Executions.concat(parts) if parts else Executions.empty()

    def means(self, sample: int = 2 * CHUNK) -> dict[str, float]:
        """Mean totals over the first ``sample`` executions (what the rate model and the ideal bound use)."""
        head = self.take(0, sample)
        return {"calls": float(head.calls.mean()), "prefill": float(head.prefill.mean()),
                "decode": float(head.decode.mean()), "tool_s": float(head.tool_s.mean()),
                "parked_s": float(head.parked_s.mean()), "restore_s": float(head.restore_s.mean())}
