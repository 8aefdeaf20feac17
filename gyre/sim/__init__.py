"""Discrete-event cluster simulator that drives the real ``gyre.scheduler`` policies on a simulated clock.

    python -m gyre.sim +sim=deepswe_122b                  # all three policies, table + results.json + roles.png
    python -m gyre.sim.calibrate RUN.jsonl --out conf/sim/calibrated.yaml

Modules, one job each: ``config`` (typed schema of conf/sim_config.yaml), ``workload`` (the execution
stream), ``rates`` (roofline decode and training FLOP models), ``rollout`` (sessions on rollout cells and
their progress), ``training`` (one streaming training step), ``ledger`` (where cell-seconds went),
``engine`` (the event loop that consults the policy and applies its actions), ``world`` (what all policies
share, and what an execution's work costs), ``run`` (one result per policy), ``compare`` (elastic against
colocate and async at its best split, on equal work), ``result``/``report``/``metrics`` (outputs),
``calibrate`` (fit a preset from a real run's metrics), ``gaps`` (tool gaps of a real run's call records).
Parking (``sim.parking``: sessions waiting on tools give back their engine slots) is modelled in ``workload``
(which gaps the park rule parks, what restores cost), ``rates`` (sessions a cell serves) and ``rollout``.
"""

from gyre.sim.config import ConfigError, RootCfg, load_config, validate
from gyre.sim.engine import SimulationError, Simulator
from gyre.sim.result import SimResult
from gyre.sim.run import scheduler_config, simulate
from gyre.sim.world import World

__all__ = ["ConfigError", "RootCfg", "SimResult", "SimulationError", "Simulator", "World", "load_config",
           "scheduler_config", "simulate", "validate"]
