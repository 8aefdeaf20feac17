"""Supervised runs from a composed config: ``python -m gyre.sft`` and the warm start of an RL recipe.

`supervised_run` gathers the demonstrations a config names (record files, transcripts, demonstrations
recorded from a suite's tasks) and trains a checkpoint from them. `warm_start` does the same for an RL
run whose recipe has a ``warm_start`` section, once: the result is cached under
``$GYRE_CACHE/warm_start/<key>``, the key being a hash of everything that shapes it (starting model,
the suite's files, harness settings, demonstration count, SFT settings, seed), so a second run starts
from the same checkpoint at once and any change builds a new one. ``warm_start.seed`` fixes the warm start's own
draw (its recordings, the SFT's data order and renaming) apart from the run's seed: runs of several seeds then
start from one checkpoint, and their seeds vary the RL alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shutil
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from filelock import FileLock

from gyre.config import build, to_plain
from gyre.envs.config import project_path
from gyre.trainer.sft import SFTConfig, SFTTrainer
from gyre.trainer.sft_data import DemonstrationSet, load_records, load_transcripts, report_skipped

log = logging.getLogger(__name__)

# Bump when the way a warm start is built changes in a way its key cannot see.
WARM_START_VERSION = 2


def record_suite_demonstrations(cfg: Any, model_path: str, per_task: int, run_dir: Path,
                                also: list[str] = ()) -> DemonstrationSet:
    """Record ``per_task`` demonstrations of every task of ``cfg.env`` and of the task folders ``also`` (same
    domain and loader) with ``cfg.harness``; read them back.

    A finished recording of the same request in ``run_dir`` (its ``demonstrations.json`` names what was
    recorded: the task folders' contents, the harness, the model's tokenizer, the count and the seed) is read
    back instead (``sft.resume=true`` continues from it); anything else there is removed first, so no
    execution finds its folder taken."""
    from dataclasses import replace

    from gyre.envs.config import EnvConfig
    from gyre.harness.config import HarnessConfig
    from gyre.harness.demonstrations import record_demonstrations

    env = EnvConfig.from_config(cfg.env)
    folders = [env, *(replace(env, path=str(path)) for path in also)]
    tasks = []
    for folder in folders:
        loaded = folder.load()  # the loader warns about each broken task it skips
        if not loaded.tasks:
            raise ValueError(f"{folder.path!r} ({folder.resolved_path()}) holds no loadable {env.domain} task to demonstrate")
        tasks += loaded.tasks
    if len({task.id for task in tasks}) < len(tasks):
        raise ValueError(f"the task folders to demonstrate ({env.path!r}, {list(also)}) share task ids")
    request = recording_request(cfg, model_path, per_task, [folder.resolved_path() for folder in folders])
    summary_path = run_dir / "demonstrations.json"
    if summary_path.is_file() and json.loads(summary_path.read_text()).get("request") == request:
        log.info("reusing the demonstrations already recorded in %s (the same tasks, harness and count)", run_dir)
        return load_records([run_dir / "records"])
    if run_dir.exists():
        log.info("recording anew into %s: what it holds is unfinished or of another request", run_dir)
        shutil.rmtree(run_dir)
    harness = HarnessConfig.from_mapping(to_plain(cfg.harness))
    run = asyncio.run(record_demonstrations(
        tasks, model_path=model_path, harness_config=harness, sandbox=env.sandbox, run_dir=run_dir,
        samples_per_task=per_task, seed=int(cfg.seed), eval_retries=env.eval_retries,
    ))
    log.info("recorded %d demonstrations (mean reward %.3f) into %s", len(run.executions), run.mean_reward, run.records)
    summary = {"executions": len(run.executions), "mean_reward": run.mean_reward,
               "pass_rate": sum(e.reward >= 1.0 for e in run.executions) / max(1, len(run.executions)),
               "statuses": dict(Counter(execution.status for execution in run.executions)),
               "behaviours": run.behaviours, "request": request}
    summary_path.write_text(json.dumps(summary, indent=1))  # written last: its presence marks a finished recording
    return load_records([run.records])


def recording_request(cfg: Any, model_path: str, per_task: int, folders: list[Path]) -> str:
    """A digest of everything a scripted recording depends on: the task folders' files, the count, the seed,
    the harness settings that shape a demonstration, the sandbox, and the tokenizer that turns it into tokens."""
    from gyre.models import resolve_model_path

    tokenizer_files = sorted(p for p in resolve_model_path(model_path).glob("tokenizer*") if p.is_file())
    payload = {"folders": [_files_digest(folder) for folder in folders], "per_task": per_task, "seed": int(cfg.seed),
               "harness": demonstration_harness(cfg), "sandbox": to_plain(cfg.env).get("sandbox"),
               "tokenizer": [(p.name, hashlib.sha256(p.read_bytes()).hexdigest()) for p in tokenizer_files]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def supervised_run(cfg: Any, sft_section: Any, run_dir: Path, *, records: list[str] = (), transcripts: list[str] = (),
                   demonstrations: int = 0, also_demonstrate: list[str] = (), tracking: Any = None) -> Path:
    """Train ``cfg.model.path`` on the given demonstrations (``demonstrations`` per task of ``cfg.env.path`` and
    of the folders ``also_demonstrate``); returns the final HF checkpoint folder."""
    from gyre.models import load_tokenizer
    from gyre.chat import ChatTemplate
    from gyre.tracking import Tracker

    sft_cfg = build(SFTConfig, sft_section, "sft")
    model_path = str(cfg.model.path)
    run_dir.mkdir(parents=True, exist_ok=True)
    data = DemonstrationSet()
    if records:
        data.extend(load_records(list(records)))
    if transcripts:
        data.extend(load_transcripts(list(transcripts), ChatTemplate(load_tokenizer(model_path))))
    if demonstrations:
        data.extend(record_suite_demonstrations(cfg, model_path, demonstrations, run_dir / "demonstrations",
                                                also=also_demonstrate))
    elif also_demonstrate:
        raise ValueError(f"tasks to demonstrate too ({list(also_demonstrate)}) but 0 demonstrations per task")
    report_skipped(data)
    log.info("supervised training data: %s", data.summary())
    if not data.examples:
        raise ValueError("no demonstration to train on: give data.records, data.transcripts or data.demonstrations > 0"
                         + (f" ({len(data.skipped)} malformed line(s) skipped)" if data.skipped else ""))
    backends = list(tracking.backends) if tracking is not None else ["console", "jsonl"]
    with Tracker(run_dir, backends=backends, project=getattr(tracking, "project", "gyre"),
                 run_name=getattr(tracking, "run_name", None), wandb_mode=getattr(tracking, "wandb_mode", None),
                 config={"sft": asdict(sft_cfg), "model": model_path, "data": data.summary()}) as tracker:
        trainer = SFTTrainer(sft_cfg, model_path, run_dir, dtype=str(cfg.model.dtype), seed=int(cfg.seed), tracker=tracker)
        return trainer.fit(data.examples)


def _files_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


# Harness keys that do not change what a scripted demonstration records: a greedy evaluation of the warm start
# (harness.temperature=0) or a run without progress bars reuses the same checkpoint.
NOT_DEMONSTRATED = ("temperature", "progress", "concurrency", "score_concurrency")


def demonstration_harness(cfg: Any) -> dict:
    return {key: value for key, value in to_plain(cfg.harness).items() if key not in NOT_DEMONSTRATED}


def warm_start_config(cfg: Any) -> Any:
    """``cfg`` as the warm start sees it: with ``seed`` = ``warm_start.seed`` when that is set (the run's otherwise)."""
    from copy import deepcopy

    from omegaconf import open_dict

    seed = cfg.warm_start.get("seed")
    if seed is None or int(seed) == int(cfg.seed):  # already the warm start's (as `warm_start` hands the key)
        return cfg
    own = deepcopy(cfg)
    with open_dict(own):
        own.seed = int(seed)
    return own


def warm_start_key(cfg: Any) -> str:
    from gyre.envs.config import EnvConfig
    from gyre.models import resolve_model_path

    cfg = warm_start_config(cfg)
    env = EnvConfig.from_config(cfg.env)
    model = resolve_model_path(str(cfg.model.path))
    also = [project_path(path) for path in cfg.warm_start.get("also_demonstrate") or []]
    # the seed the warm start draws with, once: warm_start.seed=2 in a run of seed 0 is a run of seed 2's warm start
    section = {key: value for key, value in to_plain(cfg.warm_start).items() if key != "seed"}
    payload = {
        "version": WARM_START_VERSION,
        "model": str(model), "model_config": (model / "config.json").read_text(), "dtype": str(cfg.model.dtype),
        "suite": _files_digest(env.resolved_path()), "also": [_files_digest(path) for path in also],
        "domain": env.domain, "loader": env.loader,
        "harness": demonstration_harness(cfg), "warm_start": section, "seed": int(cfg.seed),
    }
    rename_file = cfg.warm_start.sft.get("rename_file")
    if rename_file:  # its words and exclusions shape the checkpoint, not only its path
        payload["rename"] = hashlib.sha256(project_path(rename_file).read_bytes()).hexdigest()
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def warm_start(cfg: Any, run_dir: Path) -> str:
    """The recipe's supervised starting checkpoint (built once, then reused from the cache); returns its path."""
    from gyre.models.tiny import cache_root

    cfg = warm_start_config(cfg)  # its seed, for the recordings and the SFT as for the key
    section = cfg.warm_start
    folder = cache_root() / "warm_start" / warm_start_key(cfg)
    final = folder / "checkpoints" / "latest"
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Two runs that start together (a sweep, parallel tests) build it once: the second waits for the first.
    built_s = 0.0
    with FileLock(f"{folder}.lock"):
        if not (folder / "done.json").is_file():
            log.info("warm start: demonstrations + supervised training into %s", folder)
            shutil.rmtree(folder, ignore_errors=True)
            started = time.perf_counter()
            checkpoint = supervised_run(cfg, section.sft, folder, demonstrations=int(section.demonstrations),
                                        also_demonstrate=list(section.get("also_demonstrate") or []))
            built_s = time.perf_counter() - started
            (folder / "done.json").write_text(json.dumps({"checkpoint": str(checkpoint), "built_s": built_s}))
        else:
            log.info("warm start: reusing %s", final.resolve())
    for name in ("sft_loss.png", "demonstrations/demonstrations.json"):
        if (folder / name).is_file():
            shutil.copy(folder / name, run_dir / Path(name).name)
    # built_s: seconds this run spent building it (0: reused from the cache)
    (run_dir / "warm_start.json").write_text(json.dumps({"checkpoint": str(final.resolve()), "cache": str(folder),
                                                         "built_s": built_s}, indent=1))
    return str(final.resolve())
