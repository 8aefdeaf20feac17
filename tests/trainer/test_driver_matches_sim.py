"""The driver and the simulator apply the same action sequence to the same state.

One scripted run drives both: the same elastic policy (two instances, one each) decides from each side's
observed state; the test asserts the two states and the two decisions are equal at every turn, applies the
decision to both, then delivers the same events to both (executions of given groups finish, switches land,
the step ends). The driver is the real ``Driver`` with its real ``ExecutionBuffer``; the cluster and the
execution pool under it are stand-ins whose switches, steps and executions complete when the test says, so
nothing depends on timing. Covers bulk switches, dispatch of whole groups, ``StartTrainStep(drop_stale)``
and ``AbortStale`` (``stale_policy=drop``), and parking (sessions waiting on tools give back their slots:
the cluster's ``parking()`` and the cells' ``active`` are the simulator's here, as the router will measure
them; TODO(#36, engine half): the real cluster reports them).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from gyre.scheduler import CellView, Role, SchedulerConfig, StartTrainStep, SwitchCell, make_policy
from gyre.sim.config import load_config
from gyre.sim.engine import Simulator
from gyre.sim.world import World
from gyre.trainer.fit import Driver, LoopConfig
from gyre.trajectory.processor import TrajectoryConfig
from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution

CELLS, CAPACITY, GROUP, BATCH = 4, 4, 2, 4
# A flat roofline (no KV term): every cell serves CAPACITY executions, all at full speed, as the driver's
# cells are configured here.
SIM = [f"sim.cells={CELLS}", "sim.gpus_per_cell=1", "sim.model.total_params_b=1", "sim.model.active_params_b=1",
       "sim.model.kv_bytes_per_token=0", f"sim.rollout.max_sessions={CAPACITY}", f"sim.group_size={GROUP}",
       f"scheduler.batch_size={BATCH}", "sim.steps=3", "sim.workload.timeout_s=null"]
POLICY = SchedulerConfig(name="elastic", batch_size=BATCH, max_staleness=1, stale_policy="drop")
STREAMING = SchedulerConfig(name="async", batch_size=BATCH, max_staleness=1, rollout_cells=2, stream_from=0.5)


class StandInCluster:
    """The driver's view of cells: roles, version, and switches and steps that finish when the test says."""

    def __init__(self) -> None:
        self.ids = [f"c{i}" for i in range(CELLS)]
        self.roles = dict.fromkeys(self.ids, Role.ROLLOUT)
        self.version = 0
        self.pending_switches: list[tuple[dict[str, Role], asyncio.Future]] = []
        self.pending_step: asyncio.Future | None = None
        self.switch_log: list[dict[str, Any]] = []
        self.cfg = type("Cfg", (), {"capacity": CAPACITY})()
        self.core_id, self.core_lost = "c0", None

    def views(self) -> tuple[CellView, ...]:
        """As the real cluster shows them: a cell asked to switch is SWITCHING, with its target, until it lands.
        Its sessions in a slot (``active``) and the sessions it serves at full speed are the router's and the
        engines' measurements: here the simulator's, as below."""
        targets = {cell: to for moves, _ in self.pending_switches for cell, to in moves.items()}
        sim = self.measured
        sim._refresh_active()
        return tuple(CellView(c, Role.SWITCHING if c in targets else self.roles[c], c == "c0", CAPACITY,
                              targets.get(c), sim.fast, int(sim.active[i])) for i, c in enumerate(self.ids))

    def switch_many(self, moves: dict[str, Role]) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self.pending_switches.append((dict(moves), future))
        return future

    def land_switches(self) -> list[str]:
        landed = []
        for moves, future in self.pending_switches:
            self.roles.update(moves)
            future.set_result(dict.fromkeys(moves, 1.0))
            landed += list(moves)
        self.pending_switches = []
        return landed

    async def train_step(self, batches: list, max_grad_norm: float | None, more: Any = None,
                         grad_scale: Any = None, epochs: int = 1) -> dict[str, Any]:
        assert epochs == 1  # the simulator models one update per step
        self.pending_step = asyncio.get_running_loop().create_future()
        self.microbatches = len(batches)
        if more is not None:  # a step that streams in its batch: take every arrival before it can end
            async for arrived in more:
                self.microbatches += len(arrived)
        await self.pending_step
        self.version += 1
        return {"version": self.version}

    def end_step(self) -> None:
        self.pending_step.set_result(None)

    # A real cluster measures these with its clock; here they are the simulator's, so both sides see one state.
    measured: Any = None

    def train_left_s(self, share_to_come: float = 0.0) -> float | None:
        return self.measured._train_left_s()

    def join_s(self) -> float | None:
        return self.measured.join_s

    def return_s(self) -> float | None:
        return self.measured.root.sim.switch.train_to_rollout_s

    def seconds_in_roles(self) -> dict[str, dict[str, float]]:
        return {}

    def parking(self) -> tuple[float, int]:
        """(share of its time a session holds a slot, sessions parked now): the router's, here the simulator's."""
        state = self.measured._observe()
        return state.slot_share, state.parked


class StandInPool:
    """Executions that finish when the test says, in the order the driver submitted them."""

    def __init__(self) -> None:
        self.submitted: list[tuple[str, asyncio.Future]] = []  # (group id, future)

    def submit(self, task: Any, group: str, sample_index: int) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self.submitted.append((group, future))
        return future


class Tracker:
    def log(self, *args: Any, **kwargs: Any) -> None:
        pass




class Lockstep:
    """The real driver and the simulator side by side; each method delivers one event to both."""

    def __init__(self, policy: SchedulerConfig, tmp_path: Path, overrides: tuple[str, ...] = ()) -> None:
        root = load_config(overrides=[*SIM, *overrides])
        world = World(root)
        assert world.rates.slots == CAPACITY and world.rates.capacity == world.rates.fast_capacity
        sim = Simulator(world, policy, make_policy(policy))
        sim.ids = [f"c{i}" for i in range(CELLS)]
        sim.index = {name: i for i, name in enumerate(sim.ids)}
        sim.views = [replace(view, id=name) for view, name in zip(sim.views, sim.ids)]
        sim.view_tuple = tuple(sim.views)
        self.sim = sim
        self.cluster, self.pool = StandInCluster(), StandInPool()
        self.cluster.measured = sim
        loop_cfg = LoopConfig(total_steps=3, group_size=GROUP, save_every=0, timeline_every=0, val_every=0)
        self.driver = Driver(loop_cfg, TrajectoryConfig(max_paths=None), make_policy(policy), self.cluster, self.pool,
                             [f"task{i}" for i in range(5)], Tracker(), tmp_path)
        self.driver.buffer.ready_rate.clock = lambda: sim.now  # the driver's ready rate on the simulator's clock
        self.spec = WorkloadSpec(turns=2, subagents=0, retry_prob=0.0)
        self.group_order: list[str] = []  # driver group ids in dispatch order = the simulator's group numbers
        self.decisions: list[list] = []

    @staticmethod
    async def settle() -> None:
        for _ in range(5):
            await asyncio.sleep(0)

    async def decide_and_apply(self) -> None:
        driver, sim = self.driver, self.sim
        state = driver.observe()
        assert state == sim._observe()
        actions = driver.policy.decide(state)
        assert actions == sim.policy.decide(sim._observe()), "same state, same decision"
        self.decisions.append(actions)
        driver.apply_all(actions)
        for action in actions:
            sim._apply(action)
        await self.settle()
        self.group_order.extend(g for g in driver.buffer.open if g not in self.group_order)
        assert driver.observe() == sim._observe()

    async def finish_groups(self, *numbers: int) -> None:
        for number in numbers:
            group_id = self.group_order[number]
            members = [f for g, f in self.pool.submitted if g == group_id]
            version = self.driver.buffer.open[group_id].dispatch_version
            for index, future in enumerate(members):
                execution = synthetic_execution(f"{group_id}-{index}", self.spec, seed=number * 10 + index)
                for call in execution.calls:
                    call.weight_version = version
                execution.reward = float(index % 2)
                future.set_result(execution)
            for ident in range(number * GROUP, (number + 1) * GROUP):
                for cell in self.sim.pool.remove([ident], self.sim.now):  # off its cell, then finished
                    self.sim._reschedule_cell(cell)
                self.sim._finish(ident)
        await self.settle()

    async def land_switches(self) -> None:
        for cell_id in self.cluster.land_switches():
            self.sim._on_switch_done(self.sim.index[cell_id])
        await self.settle()

    async def end_step(self) -> None:
        sim = self.sim
        self.cluster.end_step()
        sim._on_train(sim.step.index, sim.step.epoch)  # compute done
        sim._on_train(sim.step.index, sim.step.epoch)  # new weights out: version + 1
        await self.settle()
        assert self.driver.training is None and self.driver.steps_done == sim.steps_done

    def applied(self) -> set[str]:
        return {type(a).__name__ for actions in self.decisions for a in actions}


def test_driver_and_simulator_apply_the_same_actions_to_the_same_state(tmp_path: Path):
    run = Lockstep(POLICY, tmp_path)

    async def scenario() -> None:
        await run.decide_and_apply()  # groups 0-3 dispatched at version 0 (two batches ahead)
        await run.finish_groups(0, 1)  # a batch is ready: the core and every spare satellite switch, in one bulk
        await run.decide_and_apply()
        await run.land_switches()
        await run.decide_and_apply()  # step 1 starts on the trainers
        await run.finish_groups(2)
        await run.decide_and_apply()
        await run.end_step()  # version 1: rollout needs a cell back; group 4 dispatched
        await run.decide_and_apply()
        await run.finish_groups(4)  # groups 2 (version 0) and 4 make the next batch; group 3 still runs
        await run.decide_and_apply()
        await run.land_switches()
        await run.decide_and_apply()
        await run.end_step()  # version 2: group 3 (version 0) can no longer be trained: aborted
        await run.decide_and_apply()
        assert run.driver.buffer.aborted == GROUP and len(run.sim.aborted_ids) == GROUP
        assert all(f.cancelled() for g, f in run.pool.submitted if g == run.group_order[3])  # its harnesses are stopped
        await run.land_switches()
        await run.decide_and_apply()

    asyncio.run(scenario())
    assert {"Dispatch", "SwitchCell", "StartTrainStep", "AbortStale"} <= run.applied()


def test_a_step_streaming_in_its_batch_is_the_same_in_the_driver_and_the_simulator(tmp_path: Path):
    run = Lockstep(STREAMING, tmp_path)

    async def scenario() -> None:
        await run.decide_and_apply()  # the split: c0 and c3 train; groups dispatched onto c1 and c2
        await run.land_switches()
        await run.decide_and_apply()
        await run.finish_groups(0)  # half a batch is ready: the step starts on it, waiting for 2 more
        await run.decide_and_apply()
        assert run.driver.observe().step_waiting == 2 and run.driver.training is not None
        await run.finish_groups(1)  # the rest streams in
        await run.decide_and_apply()
        assert run.driver.observe().step_waiting == 0
        await run.end_step()
        await run.decide_and_apply()
        assert run.cluster.microbatches >= 2  # the first half and the arrival were both handed to the trainers

    asyncio.run(scenario())
    assert run.sim.step_log[0]["ids"] == list(range(2 * GROUP))


def test_moves_timed_by_the_ready_rate_are_the_same_in_the_driver_and_the_simulator(tmp_path: Path):
    """The ready rate each side measures on its own clock (the driver's on the simulator's here) times the
    moves: the step's trainers go one join time (18.52 s here) ahead of the batch, and the step starts the
    moment the batch is complete."""
    run = Lockstep(SchedulerConfig(name="elastic", batch_size=3 * GROUP, max_staleness=1), tmp_path)

    async def scenario() -> None:
        await run.decide_and_apply()  # six groups: two batches of three
        run.sim._advance_clock(10.0)
        await run.finish_groups(0)
        await run.decide_and_apply()
        assert run.decisions[-1] == [] and run.driver.observe().ready_rate is None  # one group: no rate yet
        run.sim._advance_clock(20.0)
        await run.finish_groups(1)  # 2 executions per 10 s, 2 short: the batch is ~10 s away
        await run.decide_and_apply()
        early = run.decisions[-1]
        assert run.driver.observe().ready_rate == 0.2
        assert SwitchCell("c0", Role.TRAIN) in early and not any(isinstance(a, StartTrainStep) for a in early)
        await run.land_switches()
        await run.decide_and_apply()  # in place, waiting for the batch
        run.sim._advance_clock(25.0)
        await run.finish_groups(2)
        await run.decide_and_apply()
        assert run.decisions[-1][0] == StartTrainStep(3 * GROUP)  # no switch between the batch and its step
        await run.end_step()
        await run.decide_and_apply()

    asyncio.run(scenario())


PARKING = ("sim.parking.enabled=true", "sim.workload.tool_s_mean=20")  # a session holds a slot ~1/6 of its time


def test_with_parking_the_driver_and_the_simulator_free_the_same_cells(tmp_path: Path):
    """With parking a cell serves several times its slots, so once a batch is ready the running executions
    fit on one satellite and two join the step (one without parking); both sides see the same shares and
    counts, decide the same and apply the same, through the step and the next dispatch."""
    policy = SchedulerConfig(name="elastic", batch_size=BATCH, max_staleness=2)
    run = Lockstep(policy, tmp_path, PARKING)
    hosted = run.sim.world.rates.capacity
    assert hosted > 2 * CAPACITY

    async def scenario() -> None:
        await run.decide_and_apply()  # three batches ahead: 6 groups
        state = run.driver.observe()
        assert state.slot_share == CAPACITY / hosted and state.hosted_capacity(state.cells[1]) == hosted
        assert state.parked == run.sim.pool.live - sum(cell.active for cell in state.cells) > 0
        await run.finish_groups(0, 1)  # a batch ready, 8 still running: one satellite's hosted capacity holds them
        await run.decide_and_apply()
        joined = {a.cell_id for a in run.decisions[-1] if isinstance(a, SwitchCell) and a.to == Role.TRAIN}
        assert joined == {"c0", "c2", "c3"}
        await run.land_switches()
        await run.decide_and_apply()  # the step starts on three cells; c1 serves every running execution
        assert run.sim.pool.n[1] == 8 and run.sim.pool.migrations < 8  # parked sessions moved no KV
        await run.finish_groups(2, 3)
        await run.decide_and_apply()
        await run.end_step()
        await run.decide_and_apply()

    asyncio.run(scenario())
    assert {"Dispatch", "SwitchCell", "StartTrainStep"} <= run.applied()


def test_without_parking_the_same_scenario_frees_one_satellite(tmp_path: Path):
    run = Lockstep(SchedulerConfig(name="elastic", batch_size=BATCH, max_staleness=2), tmp_path, PARKING[1:])

    async def scenario() -> None:
        await run.decide_and_apply()
        await run.finish_groups(0, 1)
        await run.decide_and_apply()
        assert run.driver.observe().slot_share == 1.0
        joined = {a.cell_id for a in run.decisions[-1] if isinstance(a, SwitchCell) and a.to == Role.TRAIN}
        assert joined == {"c0", "c3"}

    asyncio.run(scenario())


def test_a_streamed_step_whose_rest_arrives_before_it_starts_training_still_trains_it(tmp_path: Path):
    """The rest of a streamed step's batch can come in before the step's training task first runs (finished
    executions' callbacks queued ahead of it on a loaded machine). That arrival is part of the step: it must
    be trained, not left counted as streamed in and dropped (a clean-clone CI once trained 4 of 8)."""
    run = Lockstep(STREAMING, tmp_path)
    logged: list[dict[str, Any]] = []
    run.driver.tracker = type("Recorder", (), {"log": lambda self, metrics, *a, **k: logged.append(dict(metrics))})()

    def finish_without_waiting(number: int) -> None:
        group_id = run.group_order[number]
        version = run.driver.buffer.open[group_id].dispatch_version
        for index, future in enumerate(f for g, f in run.pool.submitted if g == group_id):
            execution = synthetic_execution(f"{group_id}-{index}", run.spec, seed=number * 10 + index)
            for call in execution.calls:
                call.weight_version = version
            execution.reward = float(index % 2)
            future.set_result(execution)  # the driver hears of it in a callback: queued, not run yet

    async def scenario() -> None:
        await run.decide_and_apply()
        await run.land_switches()
        await run.decide_and_apply()
        await run.finish_groups(0)  # half a batch is ready: the policy starts the step on it
        actions = run.driver.policy.decide(run.driver.observe())
        assert any(isinstance(a, StartTrainStep) for a in actions), actions
        finish_without_waiting(1)  # the other half finishes in the same turn of the loop ...
        run.driver.apply_all(actions)  # ... as the step starts: its arrival is queued before the training task
        await run.settle()
        assert run.driver.observe().step_waiting == 0
        run.cluster.end_step()
        await run.settle()

    asyncio.run(scenario())
    assert run.cluster.microbatches >= 2  # the first half and the arrival were both handed to the trainers
    steps = [row for row in logged if "executions/trained" in row]
    assert steps and steps[0]["executions/trained"] == BATCH and steps[0]["executions/streamed_in"] == GROUP, steps
