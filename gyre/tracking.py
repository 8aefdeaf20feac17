"""Metrics to wandb (offline without an API key), the console and a jsonl file.

The wandb step is the training step and only ever increases; the run is finished on exit or error
(``Tracker`` is a context manager). A resumed run (``trainer.resume=true``) continues the same wandb run:
its id is kept in ``<run_dir>/wandb_id``; offline, each part writes ``wandb/offline-run-*-<id>`` and
``wandb sync <run_dir>/wandb/offline-run-*`` uploads them as one run.

Every metric a training run logs, under exactly one name (``metrics.jsonl`` rows also hold ``step`` and
``time``; ``gyre.sim`` writes the same names where it models them; plots are in gyre/plots.py):

=================================  ====================================================================
name                               meaning
=================================  ====================================================================
``reward/mean``, ``reward/<d>``    mean reward of the step's trained executions (all; domain ``d``)
``pass_rate``, ``pass_rate/<d>``   share of them with full credit (reward >= 1)
``loss``                           the policy loss minimised (summed over edges; KL/entropy terms included)
``pg_loss``, ``kl``, ``entropy``   its parts, logged only when ``algo.kl_coef`` / ``algo.entropy_coef`` add terms
``grad_norm``                      gradient norm before clipping
``clip_fraction``, ``ratio_max``   token weight clipped by PPO; largest importance ratio
``clipped_weight``, ``weight``,    the sums behind clip_fraction; clipped and all edges (policy tokens)
``clipped_edges``, ``edges``
``last_epoch/clip_fraction``,      with ``trainer.ppo_epochs`` > 1: the same two of the step's last pass over its
``last_epoch/ratio_max``           batch (the others are the first pass's, at the behaviour policy)
``chunks``, ``chunk_recomputed_tokens``  chunked training of trees longer than a micro-batch (when any)
``version``                        policy version after the step
``microbatches``, ``microbatches/<cell>``  micro-batches of the step (in all; trained by each cell)
``train/time_s``                   seconds of the training step (streaming compute + optimizer + weight sync)
``train/weight_sync_s``            of which the weight sync to the rollout cells
``train/fwd_bwd_s``                the micro-batches' forward+backward seconds, summed over the cells that trained
``train/cells``                    cells that trained in the step
``cells/lost``                     cells whose process died so far in the run (``dead`` in the timeline)
``cells/replaced``                 lost satellites replaced so far (a new process under the id, back from ``idle``)
``cells/microbatches_redone``      micro-batches of the step trained again: the satellite holding them was lost
``parking/parks``, ``/restores``   sessions parked on the serving engines during the step (waiting on tools), and restored
``parking/transfer_s``, ``_bytes`` restoring parked KV from host memory during the step: seconds, bytes moved
``parking/recompute_s``, ``parking/recomputed_tokens``  restoring dropped KV by recomputing it: seconds, tokens
``parking/dropped``                parked KV dropped from a full host store during the step (recomputed later)
``parking/parked_sessions``        sessions whose KV the serving engines hold in host memory at the step's end (``parked_bytes``:
                                   its size; an ended execution's sessions are freed when it ends)
``parking/parked_slot_s``          seconds sessions spent parked during the step (engine slots they gave back, from the router)
``parking/slot_share``             share of its time a live session held an engine slot over recent calls (what the
                                   scheduler divides a cell's capacity by: parking lets a cell host more executions)
``train/execution_time_s``         wall seconds of each trained execution (a list)
``tokens/tree``, ``tokens/path``   tokens trained as prefix-shared trees; the same paths unshared
``tokens/policy``                  policy-generated (trained) tokens
``tree_token_ratio``               tokens/tree / tokens/path (the saving of prefix sharing)
``trees/paths_mean``, ``trees/shared_token_fraction``  the step's executions before ``trajectory.max_paths``: paths per
                                   execution; share of their per-path tokens the trees compute once
``executions/trained``, ``/no_calls``, ``/timeout``, ``/crashed``, ``/partial``  the step's executions by outcome
``executions/finished_since_last_step``  executions that finished since the previous step
``executions/nodes``               execution nodes the step's executions ran on (only with ``cluster.execution_nodes``)
``executions/streamed_in``  executions the step took after it started (``scheduler.stream_from < 1``)
``rollout/execution_time_s``, ``rollout/model_time_s``, ``rollout/tool_time_s``, ``rollout/execution_calls``
                                   per execution finished since the last step (lists; the simulator's calibration)
``rollout/execution_time_mean_s``  their mean wall seconds
``rollout/calls_per_execution``, ``rollout/calls_per_execution_mean``  model calls of each trained execution
``staleness/mean``, ``staleness/max``  policy versions between an execution's dispatch and its training
``step_time_s``                    wall seconds since the previous step ended
``dropped_stale``, ``aborted_stale``, ``unscorable``  executions left out so far (cumulative)
``executions/lost``                of the unscorable, those whose execution worker died under them (cumulative)
``cells``, ``cells/capacity``, ``group_size``, ``scheduler``  the run's shape (``scheduler``: its settings)
``cells/<cell>/<role>_s``          seconds each cell spent in each role so far
``idle_fraction``, ``idle_fraction/<role>``  share of cell time with nothing to do (all; per role)
``switch/rollout_to_train_s``, ``switch/train_to_rollout_s``, ``switch/count``  role switches (mean seconds; count)
``val/pass_rate``, ``val/score``   held-out tasks (``trainer.val_every``): full-credit share; mean reward
``val/pass_rate/<d>``, ``val/score/<d>``, ``val/executions``, ``val/step``, ``val/policy_version``, ``val/call_versions``
``val/pass_rate_ci``, ``val/passes``, ``val/rewards``, ``val/task_ids``  95% Wilson interval; full-credit count; each execution's reward and task
``val/planned``, ``val/unscorable``  executions the validation started; of them, those it could not score
``val/paths_mean``, ``val/shared_token_fraction``  paths per validated execution; tokens its tree computes once
``sft/*``                          ``gyre.sft`` only: ``sft/loss``, ``sft/confident_tokens``, ``sft/tokens_per_s``, ...
=================================  ====================================================================

The cells report some of these under short names; gyre/trainer/metrics.py renames them once, before logging.
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import string
import time
from pathlib import Path
from typing import Any

from rich.console import Console

log = logging.getLogger(__name__)

WANDB_ID_FILE = "wandb_id"  # in the run folder: the wandb run a resume continues

class Tracker:
    def __init__(self, run_dir: str | Path, *, backends: list[str], project: str = "gyre", run_name: str | None = None,
                 config: dict[str, Any] | None = None, wandb_mode: str | None = None, resume: bool = False):
        unknown = set(backends) - {"console", "jsonl", "wandb"}
        if unknown:
            raise ValueError(f"tracking.backends: unknown {sorted(unknown)}; choose from console, jsonl, wandb")
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.backends = backends
        self.console = Console()
        self._last_step = -1
        self._jsonl = open(self.run_dir / "metrics.jsonl", "a") if "jsonl" in backends else None
        self._wandb = None
        if "wandb" in backends:
            import wandb

            mode = wandb_mode or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
            self._wandb = wandb.init(project=project, name=run_name, config=config or {}, dir=str(self.run_dir),
                                     mode=mode, reinit="finish_previous", id=wandb_run_id(self.run_dir, resume),
                                     resume="allow")

    def log(self, metrics: dict[str, Any], step: int) -> None:
        if step < self._last_step:
            raise ValueError(f"tracking step went backwards: {step} after {self._last_step}")
        self._last_step = step
        clean = {k: _plain(v) for k, v in metrics.items()}
        if self._jsonl is not None:
            self._jsonl.write(json.dumps({"step": step, "time": time.time(), **clean}) + "\n")
            self._jsonl.flush()
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in clean.items() if isinstance(v, (int, float))}, step=step)
        if "console" in self.backends:
            keys = ["reward/mean", "pass_rate", "loss", "grad_norm", "step_time_s", "staleness/mean", "tree_token_ratio"]
            shown = "  ".join(f"{k}={clean[k]:.4g}" for k in keys if isinstance(clean.get(k), (int, float)))
            self.console.print(f"[bold]step {step}[/bold]  {shown}")

    def log_image(self, key: str, path: Path, step: int) -> None:
        if self._wandb is not None:
            import wandb

            self._wandb.log({key: wandb.Image(str(path))}, step=max(step, self._last_step))

    def finish(self, exit_code: int = 0) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None
        if self._wandb is not None:
            self._wandb.finish(exit_code=exit_code)
            self._wandb = None

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.finish(exit_code=0 if exc_type is None else 1)


def wandb_run_id(run_dir: Path, resume: bool) -> str:
    """The wandb run id for ``run_dir``: when resuming, the one saved in ``<run_dir>/wandb_id`` (the resumed
    run continues the same wandb run); otherwise a new one, saved there for a later resume."""
    saved = Path(run_dir) / WANDB_ID_FILE
    if resume and saved.is_file() and saved.read_text().strip():
        return saved.read_text().strip()
    run_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))  # wandb's id shape
    saved.write_text(run_id + "\n")
    return run_id


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
