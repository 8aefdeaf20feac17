"""How fast cells work: a roofline decode model for rollout cells and a FLOP model for training cells.

Rollout. A decode iteration of an engine serving ``b`` sequences takes
``overhead + max(bytes read / bandwidth, b x 2 x active params / achieved FLOP/s)``: memory-bound while the
weights (all experts touched once ``b`` is large) and the sessions' KV dominate, compute-bound above the
knee. Each sequence gains one token per iteration, so its speed is ``1 / tau(b)``. The KV cache (and the
engine's batch limit) caps the sessions an engine holds at once (``slots``; a cell's ``capacity`` without
parking). A resident session is not always decoding: between calls it waits
on tools, so ``b`` is the expected number of sessions in a call, ``n x rho / (rho + r)`` with ``rho`` =
decode tokens per fixed (tool + prefill + restore) second of the workload. Solving ``r = 1 / tau(b(r))`` once per
resident count gives a table ``speed[n]``; events then just look it up. Prefill is compute-bound and short,
charged at the engine's prefill FLOP/s as fixed time.

Parking (``sim.parking``). A parked session holds no slot while in a tool, so the KV/batch limit caps the
sessions *in a slot* (``slots``), not those a cell serves. A session spends ``phi(n)`` of its time in a slot
(decode, prefill, restores, the gaps it is not parked in) out of its whole time (plus the parked gaps), at
the speed of a cell serving ``n``; the cell serves up to ``capacity`` = the most ``n`` with ``n phi(n) <=
slots`` (``slots`` without parking, where ``phi`` is 1), and, when parked KV goes to host memory, at most its
slots plus the sessions whose KV that holds (``sim.parking.host_kv_gb_per_gpu``). Speed still follows the sessions decoding, which
parking does not change at a given ``n``: the table just extends to ``capacity``. Restores are fixed time.

Training. A step costs ``tokens x flops_per_param_token x active params x tree_token_ratio(max_paths)``
FLOPs, shared by whichever cells are computing (``gpus_per_cell x achieved FLOP/s`` each).
"""

from __future__ import annotations

import math

import numpy as np

from gyre.sim.config import ConfigError, SimCfg

FAST_SPEED = 0.9


class RolloutRates:
    """Per-session decode speed and cell utilisation as a function of sessions resident on a cell."""

    def __init__(self, sim: SimCfg, means: dict[str, float]):
        hw, model, roll = sim.hardware, sim.model, sim.rollout
        self.engines = roll.engines_per_cell
        gpus = sim.gpus_per_cell // self.engines
        self.bandwidth = gpus * hw.hbm_tb_s * 1e12 * hw.bw_efficiency  # bytes/s per engine
        self.decode_flops = gpus * hw.peak_tflops * 1e12 * hw.decode_mfu
        self.prefill_s_per_token = prefill_s_per_token(sim)
        self.restore_s_per_token = restore_s_per_token(sim)
        self.weights_total = model.total_params_b * 1e9 * model.weight_bytes
        self.weights_active = model.active_params_b * 1e9 * model.weight_bytes
        self.flops_per_token = 2 * model.active_params_b * 1e9  # forward FLOPs per generated token
        self.overhead = roll.step_overhead_s
        self.kv_bytes = model.kv_bytes_per_token
        half_execution = 0.5 * (means["prefill"] + means["decode"])
        self.context = roll.session_context_tokens or max(1, int(min(roll.max_context_tokens, half_execution)))
        kv_budget = gpus * hw.gpu_mem_gb * 1e9 * hw.mem_util - self.weights_total
        if kv_budget <= 0:
            raise ConfigError(
                f"sim.model: {self.weights_total / 1e9:.0f} GB of weights do not fit an engine's "
                f"{gpus * hw.gpu_mem_gb * hw.mem_util:.0f} GB (sim.gpus_per_cell / sim.rollout.engines_per_cell "
                f"= {gpus} GPUs); use fewer engines per cell or more GPUs per cell")
        kv_sessions = kv_budget / (self.context * self.kv_bytes) if self.kv_bytes > 0 else math.inf
        per_engine = int(min(roll.max_sessions, kv_sessions))
        if per_engine < 1:
            raise ConfigError(
                f"sim.rollout: one session of {self.context} tokens needs {self.context * self.kv_bytes / 1e9:.1f} GB "
                f"of KV but an engine has {kv_budget / 1e9:.1f} GB free; lower session_context_tokens")
        self.kv_limited = kv_sessions < roll.max_sessions
        self.slots = per_engine * self.engines  # sessions a cell holds in its engines at once: what the scheduler sees
        self.decode_mean = means["decode"]
        self.fixed_mean = means["tool_s"] + means.get("restore_s", 0.0) + means["prefill"] * self.prefill_s_per_token
        self.slot_fixed_mean = self.fixed_mean - means.get("parked_s", 0.0)  # not decoding, yet in a slot
        self.rho = self.decode_mean / self.fixed_mean if self.fixed_mean > 0 else math.inf
        # Sessions served per cell: the slots, or with parking as many as keep the slots just full.
        most = math.ceil(self.slots / float(self.slot_phi(self._solve(np.array([1.0 / self.engines]))[0]))) + 1
        n = np.arange(max(self.slots, most) + 1, dtype=float)
        speed = self._solve(np.maximum(n, 1) / self.engines)
        fits = n * self.slot_phi(speed) <= self.slots * (1 + 1e-12)
        self.capacity = max(self.slots, int(np.flatnonzero(fits).max()))  # sessions a cell serves
        host = sim.parking.host_kv_gb_per_gpu
        if sim.parking.enabled and sim.parking.restore == "transfer" and host is not None and self.kv_bytes > 0:
            # parked KV waits in the cell's host memory: beyond its slots a cell serves what that holds
            held = int(host * 1e9 * sim.gpus_per_cell / (self.context * self.kv_bytes))
            self.capacity = min(self.capacity, self.slots + held)
        self.speed = speed[: self.capacity + 1]  # tokens/s per decoding session
        self.slot_share = self.slots / self.capacity  # what the scheduler sees: slots over sessions served
        self.phi = self.slot_phi(self.speed)  # share of its time a session holds a slot, per sessions served
        self.parking = bool(sim.parking.enabled)
        self.utilisation = self._utilisation()
        # Sessions a cell holds while each still decodes at FAST_SPEED of its single-session speed: beyond
        # that, packing sessions onto fewer cells makes every one of them slower (what the scheduler sees).
        self.fast_capacity = int(np.flatnonzero(self.speed[1:] >= FAST_SPEED * self.speed[1]).max()) + 1

    def slot_phi(self, speed: np.ndarray) -> np.ndarray:
        """Share of a session's time it holds a slot, at this decode speed (1 without parking)."""
        decode = self.decode_mean / np.maximum(speed, 1e-300)
        whole = decode + self.fixed_mean
        return np.where(whole > 0, (decode + self.slot_fixed_mean) / np.maximum(whole, 1e-300), 1.0)

    def step_time(self, batch: np.ndarray) -> np.ndarray:
        """Seconds per decode iteration of one engine decoding ``batch`` sequences (may be fractional)."""
        weights = np.minimum(self.weights_total, self.weights_active * np.maximum(batch, 1.0))
        memory = (weights + batch * self.context * self.kv_bytes) / self.bandwidth
        compute = batch * self.flops_per_token / self.decode_flops
        return self.overhead + np.maximum(memory, compute)

    def _solve(self, sessions: np.ndarray) -> np.ndarray:
        """Speed r with r = 1 / tau(sessions x rho / (rho + r)), by bisection (vectorised over counts)."""
        lo = np.zeros_like(sessions)
        hi = 1.0 / self.step_time(np.zeros_like(sessions))
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            decoding = sessions if math.isinf(self.rho) else sessions * self.rho / (self.rho + mid)
            too_fast = mid > 1.0 / self.step_time(decoding)
            hi = np.where(too_fast, mid, hi)
            lo = np.where(too_fast, lo, mid)
        return 0.5 * (lo + hi)

    def mean_duration(self, n: int) -> float:
        """Seconds the mean execution takes on a cell holding ``n`` sessions (n <= capacity)."""
        return self.decode_mean / self.speed[n] + self.fixed_mean

    def _utilisation(self) -> np.ndarray:
        """Executions/s of a cell with n sessions relative to a full one (1 beyond capacity: it is saturated)."""
        n = np.arange(self.capacity + 1, dtype=float)
        rate = n / (self.decode_mean / self.speed + self.fixed_mean)
        return rate / rate[-1]

    def duration(self, decode: np.ndarray, fixed: np.ndarray, n: int) -> np.ndarray:
        """Seconds executions with these totals take on a cell holding ``n`` sessions."""
        n_in = min(n, self.capacity)
        dilation = max(1.0, n / self.capacity)
        return (decode / self.speed[n_in] + fixed) * dilation

    def fixed_seconds(self, prefill: np.ndarray, tool_s: np.ndarray, restore_s: np.ndarray | float = 0.0) -> np.ndarray:
        """Time of an execution that does not depend on the cell's load: tools, restores of parked KV, plus
        prefill at full speed."""
        return tool_s + restore_s + prefill * self.prefill_s_per_token

    def migration_seconds(self, context_tokens: np.ndarray, bandwidth_gb_s: float) -> np.ndarray:
        return context_tokens * self.kv_bytes / (bandwidth_gb_s * 1e9)

    def restore_seconds(self, context_tokens: np.ndarray) -> np.ndarray:
        """Restoring parked KV of this many context tokens on an engine (host transfer or recompute)."""
        return context_tokens * self.restore_s_per_token


def prefill_s_per_token(sim: SimCfg) -> float:
    """Seconds per prompt token of one engine's prefill (compute-bound)."""
    gpus = sim.gpus_per_cell // sim.rollout.engines_per_cell
    return 2 * sim.model.active_params_b * 1e9 / (gpus * sim.hardware.peak_tflops * 1e12 * sim.hardware.prefill_mfu)


def restore_s_per_token(sim: SimCfg) -> float:
    """Seconds per context token to bring a parked session's KV back on one engine (``sim.parking.restore``):
    its KV bytes over the host link, or a prefill of its context."""
    park = sim.parking
    if park.restore == "transfer":
        return sim.model.kv_bytes_per_token / (park.host_gb_s * 1e9)
    return 1.0 / park.recompute_tokens_s if park.recompute_tokens_s is not None else prefill_s_per_token(sim)


class TrainRates:
    """FLOPs of a training step and FLOP/s of a training cell."""

    def __init__(self, sim: SimCfg, max_paths: int | None):
        train, hw = sim.train, sim.hardware
        per_gpu = train.achieved_tflops_per_gpu if train.achieved_tflops_per_gpu is not None \
            else hw.peak_tflops * hw.train_mfu
        self.cell_flops = sim.gpus_per_cell * per_gpu * 1e12
        self.tree_ratio = tree_token_ratio(train.tree_token_ratio, max_paths)
        self.flops_per_token = train.flops_per_param_token * sim.model.active_params_b * 1e9 * self.tree_ratio

    def flops(self, tree_tokens: float) -> float:
        """FLOPs to train on executions with this many uncapped tree tokens."""
        return tree_tokens * self.flops_per_token

    def seconds(self, tree_tokens: float, cells: int) -> float:
        return self.flops(tree_tokens) / (cells * self.cell_flops)


def tree_token_ratio(table: dict[str, float], max_paths: int | None) -> float:
    """Trained tokens at path cap ``max_paths`` as a fraction of the uncapped tree, from the config table."""
    key = "uncapped" if max_paths is None else str(max_paths)
    if key not in table:
        known = ", ".join(sorted(table, key=lambda k: (k == "uncapped", int(k) if k.isdigit() else 0)))
        raise ConfigError(f"sim.train.tree_token_ratio has no entry for trajectory.max_paths={max_paths} "
                          f"(known caps: {known}); add \"{key}\": <ratio> to the preset")
    return float(table[key])
