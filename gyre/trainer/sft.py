"""Supervised training on demonstrations, through the same trees and packing as reinforcement learning.

Each demonstrated execution becomes its prefix-shared tree (`gyre.trajectory.build_tree`); every policy
token (a response token of a demonstrated call) gets the weight RL gives it with advantage 1
(``trajectory.loss_agg``: averaged within an execution, then across the step's executions; a prefix
shared by several calls is computed and trained once). The loss is the weighted negative log-likelihood
of those tokens, so a demonstration and a rollout of the same conversation train exactly the same tokens.

Steps draw ``batch_executions`` executions from shuffled passes over the data. Checkpoints are HF folders
(`gyre.replica.checkpoint`) every ``save_every`` steps and at the end; ``resume`` continues from the
newest one with its optimizer, schedule and data position.
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gyre.ops.tree_attention import DEFAULT_BLOCK_SIZE
from gyre.protocol import PackedBatch, TrajectoryTree
from gyre.replica import checkpoint
from gyre.trainer.renaming import Renaming
from gyre.trainer.sft_data import SFTExample
from gyre.replica.step import StepConfig, backward_edges
from gyre.trajectory import assign_loss_weights, build_tree, pack_trees

log = logging.getLogger(__name__)


@dataclass
class SFTConfig:
    steps: int = 200
    batch_executions: int = 16
    lr: float = 1e-3
    min_lr_ratio: float = 0.1  # cosine decay to lr * min_lr_ratio
    warmup_steps: int = 10
    hold_peak_until: int = 0  # the peak lr is kept up to this step (past `steps`: throughout); then the cosine's value (`lr_factor`)
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0
    max_tokens_per_microbatch: int = 16384
    attention_backend: str = "auto"
    attention_block_size: int = DEFAULT_BLOCK_SIZE
    loss_agg: str = "execution_token_mean"
    short_context_steps: int = 0  # first steps train without the prompts demonstrations share (`short_context`)
    rename_file: str | None = None  # JSON {"words", "exclude"}: words renamed afresh in every example at every step
    torch_threads: int | None = None  # intra-op threads of the training process (None: torch's default)
    save_every: int = 100  # checkpoint every k steps (the last step always saves)
    log_every: int = 10
    resume: bool = False

    def __post_init__(self) -> None:
        for name in ("steps", "batch_executions", "max_tokens_per_microbatch", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"sft.{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0 or not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"sft.lr must be > 0 and sft.min_lr_ratio in [0, 1], got {self.lr}, {self.min_lr_ratio}")
        if self.hold_peak_until < 0:
            raise ValueError(f"sft.hold_peak_until must be >= 0, got {self.hold_peak_until}")


def demonstration_trees(examples: list[SFTExample], batch_executions: int, loss_agg: str) -> list[TrajectoryTree]:
    """One weighted tree per execution; weights are set for steps of ``batch_executions`` executions."""
    trees = []
    for example in examples:
        tree = build_tree(example.calls, example.execution_id)
        trees.append(assign_loss_weights(tree, 1.0, num_executions=batch_executions, aggregation=loss_agg))
    return trees


def conversation_kind(agent: str) -> str:
    """Calls of one kind share a system prompt and tool list: an agent and its summaries (``main`` and
    ``main-summary``; ``sub`` and ``sub-summary``)."""
    return agent.split("-", 1)[0]


def shared_prompts(examples: list[SFTExample]) -> dict[str, list[int]]:
    """For each conversation kind, the prompt prefix every call of that kind in the data starts with (a
    harness's system prompt and tool list, and whatever opening the tasks share)."""
    shared: dict[str, list[int]] = {}
    for example in examples:
        for call in example.calls:
            kind = conversation_kind(call.agent)
            prefix = shared.get(kind)
            prompt = list(call.prompt_ids)
            if prefix is None:
                shared[kind] = prompt
            else:
                size = min(len(prefix), len(prompt))
                differ = next((i for i in range(size) if prefix[i] != prompt[i]), size)
                shared[kind] = prefix[:differ]
    return shared


def system_prompts(examples: list[SFTExample], shared: dict[str, list[int]]) -> dict[str, list[int]]:
    """The shared prompts (`shared_prompts`) the demonstrations tell apart from a task's own prompt: those
    of a conversation kind where some execution's calls share more than all executions do. Where every
    execution shares exactly the common prefix (one demonstration, or one task demonstrated several times),
    it may run into the task's instruction, so it is left out (a warning says so)."""
    own = [shared_prompts([example]) for example in examples]
    told_apart = {kind for kind, prefix in shared.items()
                  if any(len(mine.get(kind, prefix)) > len(prefix) for mine in own)}
    if unknown := sorted(set(shared) - told_apart):
        log.warning("the demonstrations do not tell the shared prompt of %s apart from a task's own prompt (one "
                    "task?): the rename file's words are not checked against it", ", ".join(unknown))
    return {kind: shared[kind] for kind in told_apart}


def short_context(example: SFTExample, shared: dict[str, list[int]]) -> SFTExample:
    """The example with every call's shared prompt (`shared_prompts`) cut away but its last token (which may
    predict the first trained token); a main agent and its sub-agents become separate roots.

    Why: attention that must find a few instruction tokens behind hundreds of shared prompt tokens gets a
    gradient diluted by the prompt's length, so a small model trained from scratch on full prompts learns
    to copy from the instruction very slowly; trained first on the turns alone (positions restart at 0;
    attention is relative), it learns where to look, and the full prompts that follow only teach it to
    look past the prefix."""
    from dataclasses import replace

    calls = []
    for call in example.calls:
        cut = max(0, len(shared[conversation_kind(call.agent)]) - 1)
        calls.append(replace(call, prompt_ids=list(call.prompt_ids[cut:])))
    return replace(example, calls=calls)


def sft_microbatch_backward(model: torch.nn.Module, batch: PackedBatch, cfg: SFTConfig) -> dict[str, float]:
    """Weighted NLL of the micro-batch's policy tokens (in chunks when the batch is a long tree);
    gradients accumulate into ``model``."""
    tensors = batch.to_torch(next(model.parameters()).device)

    def edge_loss(edges: torch.Tensor | None, logp: torch.Tensor, entropy: torch.Tensor | None):
        weights = tensors["w_tok"] if edges is None else tensors["w_tok"][edges]
        loss = -(logp.to(weights.dtype) * weights).sum()
        confident = float(((logp.detach() > math.log(0.5)).to(weights.dtype) * weights).sum())  # weight of tokens with p > 0.5
        return loss, {"loss": float(loss.detach()), "weight": float(weights.sum()), "confident": confident}

    step_cfg = StepConfig(attention_backend=cfg.attention_backend, attention_block_size=cfg.attention_block_size)
    stats = backward_edges(model, batch, tensors, edge_loss, step_cfg)
    stats.update(tokens=float(batch.num_tokens), policy_tokens=float(batch.edge_target.shape[0]))
    return stats


def lr_factor(step: int, cfg: SFTConfig) -> float:
    """Linear warm-up, then cosine decay to ``min_lr_ratio`` over the rest of the run; with ``hold_peak_until``
    the peak is kept up to that step and the lr then steps down onto the cosine where it would be by then.

    Why the held peak: a small model copying values was still learning at a constant lr, but the final iterate
    of a constant lr wanders; the step down onto the cosine's tail settles it in the last steps only. Tried on
    the learn suite, where it did not by itself make a good warm start (recipes/learn/README.md, "Where a
    sampled value goes wrong")."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if step < cfg.hold_peak_until:
        return 1.0
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


class SFTTrainer:
    def __init__(self, cfg: SFTConfig, model_path: str, run_dir: Path, *, dtype: str = "float32", seed: int = 0,
                 tracker: Any = None, progress: bool = True) -> None:
        from gyre.models import load_model, load_tokenizer

        self.cfg = cfg
        if cfg.torch_threads:
            # On shared cores more threads than free cores make every step wait on descheduled threads.
            torch.set_num_threads(cfg.torch_threads)
        self.run_dir = Path(run_dir)
        self.checkpoints = self.run_dir / "checkpoints"
        self.seed = seed
        self.tracker = tracker
        self.progress = progress
        self.model = load_model(model_path, dtype=dtype)
        self.tokenizer = load_tokenizer(model_path)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: lr_factor(step, cfg))
        self.step = 0
        self.order: list[int] = []  # the current pass's order of examples, and the position in it
        self.position = 0
        self.rng = random.Random(seed)
        self.history: list[dict[str, float]] = []

    # Data order ---------------------------------------------------------------------------------------

    def next_batch(self, count: int) -> list[int]:
        """``batch_executions`` indices from shuffled passes over the ``count`` examples."""
        chosen: list[int] = []
        while len(chosen) < self.cfg.batch_executions:
            if self.position >= len(self.order):
                self.order = list(range(count))
                self.rng.shuffle(self.order)
                self.position = 0
            chosen.append(self.order[self.position])
            self.position += 1
        return chosen

    # Checkpoints --------------------------------------------------------------------------------------

    def save(self) -> Path:
        state = {"optimizer": self.optimizer.state_dict(), "schedule": self.schedule.state_dict(), "step": self.step,
                 "order": self.order, "position": self.position, "rng": self.rng.getstate(), "history": self.history,
                 "config": asdict(self.cfg)}
        folder = checkpoint.save_checkpoint(checkpoint.step_folder(self.checkpoints, self.step), self.model, self.tokenizer, state)
        checkpoint.mark_latest(folder)
        return folder

    def resume(self) -> bool:
        folder = checkpoint.latest_checkpoint(self.checkpoints)
        if folder is None:
            return False
        state = checkpoint.load_trainer_state(folder)
        checkpoint.load_weights_into(self.model, folder)
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        self.step, self.order, self.position = state["step"], state["order"], state["position"]
        self.rng.setstate(state["rng"])
        self.history = state["history"]
        log.info("resumed supervised training from %s (step %d)", folder, self.step)
        return True

    # Training -----------------------------------------------------------------------------------------

    def train_step(self, trees: list[TrajectoryTree]) -> dict[str, float]:
        started = time.perf_counter()
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        stats: dict[str, float] = {}
        for batch in pack_trees(trees, self.cfg.max_tokens_per_microbatch):
            for key, value in sft_microbatch_backward(self.model, batch, self.cfg).items():
                stats[key] = stats.get(key, 0.0) + value
        max_norm = self.cfg.max_grad_norm if self.cfg.max_grad_norm is not None else float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))
        lr = self.schedule.get_last_lr()[0]
        self.optimizer.step()
        self.schedule.step()
        self.step += 1
        seconds = time.perf_counter() - started
        return {"sft/loss": stats["loss"] / max(stats["weight"], 1e-12), "sft/confident_tokens": stats["confident"] / max(stats["weight"], 1e-12),
                "sft/grad_norm": grad_norm, "sft/lr": lr, "sft/step_time_s": seconds,
                "sft/tokens_per_s": stats["tokens"] / seconds, "sft/policy_tokens": stats["policy_tokens"]}

    def fit(self, examples: list[SFTExample]) -> Path:
        """Train to ``steps``; returns the final checkpoint folder (an HF folder ``model.path`` accepts)."""
        if not examples:
            raise ValueError("supervised training needs at least one demonstration")
        if self.cfg.resume:
            self.resume()
        torch.manual_seed(self.seed)
        shared = shared_prompts(examples)
        renaming = None
        if self.cfg.rename_file:
            renaming = Renaming.from_file(self.cfg.rename_file, self.tokenizer)
            renaming.check_prefix(np.asarray([token for prompt in system_prompts(examples, shared).values()
                                              for token in prompt], dtype=np.int64))
        # The short-context phase trains on the examples with their shared prompts cut (`short_context`).
        sources = {False: examples, True: [short_context(example, shared) for example in examples]
                   if self.cfg.short_context_steps else examples}
        trees = {key: demonstration_trees(data, self.cfg.batch_executions, self.cfg.loss_agg) if renaming is None else None
                 for key, data in sources.items()}
        progress = _Progress(self.cfg.steps, self.step, enabled=self.progress)
        try:
            while self.step < self.cfg.steps:
                chosen = self.next_batch(len(examples))
                short = self.step < self.cfg.short_context_steps
                if renaming is None:
                    batch = [trees[short][i] for i in chosen]
                else:  # seeded by the step, so a resumed run renames as an uninterrupted one would
                    rng = random.Random(f"{self.seed}:{self.step}")
                    renamed = [renaming.apply(sources[short][i], rng) for i in chosen]
                    batch = demonstration_trees(renamed, self.cfg.batch_executions, self.cfg.loss_agg)
                metrics = self.train_step(batch)
                self.history.append({"step": self.step, **metrics})
                progress.update(self.step, metrics["sft/loss"])
                if self.tracker is not None and (self.step % self.cfg.log_every == 0 or self.step == self.cfg.steps):
                    self.tracker.log(metrics, step=self.step)
                if self.step % self.cfg.save_every == 0 and self.step < self.cfg.steps:
                    self.save()
        finally:
            progress.close()
        if renaming is not None and renaming.kept_as_recorded:
            log.warning("renaming: %d example draws kept their recorded names (every permutation tried made a string "
                        "of %s's exclude list)", renaming.kept_as_recorded, renaming.source)
        final = checkpoint.step_folder(self.checkpoints, self.step)
        if checkpoint.latest_checkpoint(self.checkpoints) != final.resolve():
            self.save()
        self.plot()
        return final

    def plot(self) -> Path:
        """The loss curve, ``<run_dir>/sft_loss.png`` (and to wandb when tracking it)."""
        from gyre.plots import plot_curves

        steps = [row["step"] for row in self.history]
        path = plot_curves(self.run_dir / "sft_loss.png", steps, {"demonstration loss (NLL per token)": [row["sft/loss"] for row in self.history]},
                           title="supervised training", xlabel="step")
        if self.tracker is not None:
            self.tracker.log_image("sft_loss", path, self.step)
        return path


class _Progress:
    """A rich progress bar over the steps, with the latest loss."""

    def __init__(self, total: int, done: int, enabled: bool) -> None:
        self.bar = None
        if not enabled:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from gyre.progress import progress_columns, progress_console

        console = progress_console()
        self.bar = Progress(*progress_columns(console, TextColumn("sft"), BarColumn(), MofNCompleteColumn(),
                                              TimeRemainingColumn(), TextColumn("loss {task.fields[loss]}")),
                            console=console)
        self.task = self.bar.add_task("sft", total=total, completed=done, loss="-")
        self.bar.start()

    def update(self, step: int, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=step, loss=f"{loss:.4f}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()

