"""The rollout engines' parking counters as a step's metrics (``parking/*``): what parking sessions that wait
on tools cost and held during the step, summed over the cells. ``gyre.sim.calibrate`` fits the simulator's
restore rates from them (``parking_rates``).

Engines count from their start; a step logs the change since the last one. A cell whose counters went down
(its process was replaced, or the cells restarted) counts from zero again.
"""

from __future__ import annotations

from typing import Any

# engine stat (gyre.rollout.hf.HFEngine.stats) -> metric; counters are logged as the step's change
COUNTERS = {
    "parks": "parking/parks",
    "restores": "parking/restores",
    "parked_caches_dropped": "parking/dropped",  # host store full: recomputed on their next call
    "restore_transfer_s": "parking/transfer_s",
    "restore_bytes_from_host": "parking/transfer_bytes",
    "restore_recompute_s": "parking/recompute_s",
    "park_recomputed_tokens": "parking/recomputed_tokens",
}
# ... and gauges as they are at the step's end
GAUGES = {"parked_sessions": "parking/parked_sessions", "parked_bytes": "parking/parked_bytes"}


class ParkingMeter:
    def __init__(self) -> None:
        self._last: dict[str, dict[str, float]] = {}
        self._parked_s = 0.0

    def routed(self, occupancy: Any) -> dict[str, float]:
        """The router's side (``gyre.proxy.router.Occupancy``): seconds sessions spent parked during the step
        (their slot given back), and the share of its time a live session held a slot lately."""
        parked_s = float(occupancy.parked_s)
        step_s = parked_s - self._parked_s if parked_s >= self._parked_s else parked_s  # a new router counts from 0
        self._parked_s = parked_s
        return {"parking/parked_slot_s": step_s, "parking/slot_share": float(occupancy.slot_share)}

    def step(self, stats_by_cell: dict[str, dict[str, Any]]) -> dict[str, float]:
        """The step's ``parking/*`` metrics from each live cell's engine stats now (cells that did not answer
        are left out; an engine that does not park reports none of the keys and adds nothing)."""
        metrics = dict.fromkeys([*COUNTERS.values(), *GAUGES.values()], 0.0)
        for cell_id, stats in stats_by_cell.items():
            now = {key: float(stats.get(key, 0.0)) for key in COUNTERS}
            before = self._last.get(cell_id, {})
            if any(now[key] < before.get(key, 0.0) for key in COUNTERS):
                before = {}  # a new engine under this cell id
            for key, metric in COUNTERS.items():
                metrics[metric] += now[key] - before.get(key, 0.0)
            for key, metric in GAUGES.items():
                metrics[metric] += float(stats.get(key, 0.0))
            self._last[cell_id] = now
        return metrics
