"""Every command the README and ``examples/`` document runs as written, with the smallest settings.

The commands are read from the documents themselves (the ```bash blocks of README.md and examples/*/README.md),
so a command that is added, changed or removed there must be reflected in ``SMALLEST`` below, or the first
test fails and names it. Each command then runs as a real subprocess from the repository root: its program and
its flags as written, with placeholders (``/path/to/checkpoint``, ``runs/<run>``) filled by
what the earlier commands produced, and settings appended or shrunk so that it takes seconds (one step, two
cells, a few tasks, tiny benchmark sizes). Outputs go to a temporary folder, not to ``runs/``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "examples").glob("*/README.md"))]
PYTHON = sys.executable
# One step of the main job on two cells, small batches, short executions, no wandb.
SMALL_JOB = ["trainer.total_steps=1", "cluster.cells=2", "scheduler.batch_size=2", "trainer.group_size=2",
             "harness.max_turns=1", "harness.reference.sub_agent=false", "harness.progress=false",
             "tracking.backends=[jsonl]"]


def documented_commands() -> list[str]:
    """The runnable commands of the documents' bash blocks, comments stripped (install and pytest steps are
    what CI itself runs, so they are left out)."""
    commands = []
    for document in DOCUMENTS:
        blocks = re.findall(r"```bash\n(.*?)```", document.read_text(), flags=re.S)
        for line in "\n".join(blocks).splitlines():
            words = shlex.split(line, comments=True)  # the documents quote no word that holds a space
            for part in " ".join(words).split(" && "):
                part = part.strip()
                if part.startswith(("python -m gyre", "python benchmarks/", "bash ")) and part not in commands:
                    commands.append(part)
    return commands


@dataclass
class Invocation:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    timeout: int = 600
    gpu: bool = False
    # Its jobs start Ray clusters of their own, as a user's do, instead of joining the test worker's
    # (tests/conftest.py, shared_ray_head): the reliability benchmark kills drivers and checks what is left.
    own_ray: bool = False


class Workspace:
    """Where the commands write, and what later commands take from earlier ones (a trained run, a sweep)."""

    def __init__(self, root: Path):
        self.root = root
        self.outputs: dict[str, Path] = {}

    def path(self, name: str) -> Path:
        return self.root / name

    def learn_suite(self) -> tuple[Path, Path, Path]:
        """One training and one dev task of the learn suite (its branching family), and one copying drill."""
        suite = self.root / "learn_suite"
        if not suite.exists():
            for split, prefix in (("train", "train-search-"), ("dev", "dev-search-"), ("drills", "drill-write2-")):
                source = sorted((ROOT / "recipes/learn/tasks" / split).glob(f"{prefix}*"))[0]
                shutil.copytree(source, suite / split / source.name)
        return suite / "train", suite / "dev", suite / "drills"

    def produced(self, key: str) -> Path:
        if key not in self.outputs:
            pytest.skip(f"needs the output of an earlier command ({key}), which did not run")
        return self.outputs[key]


def as_written(command: str, *, replace: dict[str, str] | None = None, append: list[str] = ()) -> list[str]:
    """The documented command's words, with whole words replaced and settings appended."""
    words = shlex.split(command)
    replace = replace or {}
    missing = [old for old in replace if old not in words]
    assert not missing, f"{command!r} no longer holds {missing}: update SMALLEST"
    words = [replace.get(word, word) for word in words]
    if words[0] == "python":
        words[0] = PYTHON
    return [*words, *append]


def replaced_flag(command: str | list[str], flag: str, values: list[str]) -> list[str]:
    """The command's words with the values after ``flag`` swapped for ``values``."""
    words = shlex.split(command) if isinstance(command, str) else command
    start = words.index(flag) + 1
    end = start
    while end < len(words) and not words[end].startswith("--"):
        end += 1
    return [*words[:start], *values, *words[end:]]


def learn_overrides(ws: Workspace) -> list[str]:
    train, dev, _ = ws.learn_suite()
    return [f"env.path={train}", *learn_run_overrides(ws), f"env.val_path={dev}", "trainer.val_every=1"]


# A 2-step warm start writes until max_tokens in every call: capped at 64 tokens by the proxy instead of the
# recipe's 256, a quarter of the generation (most of these runs' time), and still branching (retries of its
# unusable replies). A cap of the proxy, not harness.max_tokens: the demonstrations (their own proxy) keep theirs.
SHORT_REPLIES = "proxy.max_tokens_cap=64"


def learn_run_overrides(ws: Workspace) -> list[str]:
    """The learn recipe at its smallest (a tiny warm start, two cells, batches of four, short replies), the split
    left to the caller."""
    return ["warm_start.demonstrations=1", f"warm_start.also_demonstrate=[{ws.learn_suite()[2]}]",
            "warm_start.sft.steps=2", "warm_start.sft.short_context_steps=1",
            "warm_start.sft.batch_executions=3", "warm_start.sft.warmup_steps=1", "warm_start.sft.save_every=2",
            "trainer.val_samples=2", "cluster.cells=2", "scheduler.batch_size=4", "trainer.group_size=2",
            SHORT_REPLIES, "harness.progress=false", "tracking.backends=[jsonl]"]


def learning_benchmark(command: str, ws: Workspace) -> Invocation:
    """benchmarks/learning.py on the one-task suite: one RL step, its dev task as the sealed split."""
    train, dev, _ = ws.learn_suite()
    words = replaced_flag(replaced_flag(command, "--seeds", ["0"]), "--out", [str(ws.path("learning.json"))])
    return Invocation([PYTHON, *words[1:], "--steps", "1", "--cache", os.environ.get("GYRE_CACHE", str(ws.path("cache"))),
                       "--work", str(ws.path("learning")), "--min-executions", "1", "--test", str(dev),
                       "--override", f"env.path={train}", *learn_run_overrides(ws)])


def benchmark(command: str, ws: Workspace, *args: str) -> Invocation:
    """A benchmark with its ``--out`` in the workspace and the given small sizes."""
    words = shlex.split(command)
    name = Path(words[words.index("--out") + 1]).name
    argv = as_written(command, replace={name: str(ws.path(name))}, append=list(args))
    return Invocation(argv)


def run_sweep(command: str, ws: Workspace) -> Invocation:
    """The sweep example: its 4 points of one step each, into the workspace, then its comparison."""
    ws.outputs["sweep"] = ws.path("sweep")
    return Invocation([*shlex.split(command), "1", str(ws.path("sweep"))])


def run_main(command: str, ws: Workspace) -> Invocation:
    ws.outputs["run"] = ws.path("main")
    return Invocation(as_written(command, append=[*SMALL_JOB, f"run_dir={ws.path('main')}"]))


def run_schedulers(command: str, ws: Workspace) -> Invocation:
    # Its kept runs are what sim_validation.py --runs reads next.
    ws.outputs["scheduler_runs"] = ws.path("scheduler_runs")
    return benchmark(command, ws, "--steps", "1", "--batch-size", "4", "--group-size", "2", "--max-turns", "1",
                     "--cells", "2", "--rollout-cells", "1", "--keep", str(ws.path("scheduler_runs")))


def checkpoint(ws: Workspace) -> str:
    return str(ws.produced("run") / "checkpoints" / "latest")


# Documented command -> how it runs here with the smallest settings.
SMALLEST: dict[str, Callable[[str, Workspace], Invocation]] = {
    "python -m gyre.main +recipe=deepswe": run_main,
    "python -m gyre.main +recipe=learn": lambda c, ws: Invocation(as_written(
        c, append=[*learn_overrides(ws), "trainer.total_steps=1", f"run_dir={ws.path('learn')}"])),
    "python benchmarks/learning.py --out learning.json --seeds 0 1 2": learning_benchmark,
    "python -m gyre.main +recipe=deepswe scheduler=colocate": lambda c, ws: Invocation(
        as_written(c, append=[*SMALL_JOB, f"run_dir={ws.path('colocate')}"])),
    "python -m gyre.sft data.records=[runs/<run>/records] model.path=small": lambda c, ws: Invocation(as_written(
        c, replace={"data.records=[runs/<run>/records]": f"data.records=[{ws.produced('run') / 'records'}]"},
        append=["sft.steps=2", "sft.save_every=2", "tracking.backends=[jsonl]", f"run_dir={ws.path('sft')}"])),
    "bash recipes/deepswe/launch_cluster.sh": lambda c, ws: Invocation(shlex.split(c), gpu=True),
    "python -m gyre.serve model.path=/path/to/checkpoint proxy.port=8000": lambda c, ws: Invocation(as_written(
        c, replace={"model.path=/path/to/checkpoint": f"model.path={checkpoint(ws)}", "proxy.port=8000": "proxy.port=0"},
        append=["serve.duration_s=3", f"run_dir={ws.path('serve')}"])),
    "python -m gyre.eval +recipe=deepswe model.path=/path/to/checkpoint eval.samples=4": lambda c, ws: Invocation(
        as_written(c, replace={"model.path=/path/to/checkpoint": f"model.path={checkpoint(ws)}",
                               "eval.samples=4": "eval.samples=2"},
                   append=["eval.limit=1", "harness.max_turns=1", "harness.progress=false",
                           f"run_dir={ws.path('eval')}"])),
    "python -m gyre.sim +sim=deepswe_122b": lambda c, ws: Invocation(
        as_written(c, append=["sim.steps=2", f"run_dir={ws.path('sim')}"])),
    "python benchmarks/tree_training.py --out tree_training.json": lambda c, ws: benchmark(
        c, ws, "--executions", "1", "--turns", "2", "--subagents", "0", "--hidden", "64", "--repeats", "1"),
    "python benchmarks/engine_throughput.py --out engine.json": lambda c, ws: benchmark(
        c, ws, "--concurrency", "1,2", "--max-new-tokens", "4", "--turns", "2", "--first-prompt", "64",
        "--turn-max-new-tokens", "4", "--repeats", "1"),
    "python benchmarks/proxy_overhead.py --out proxy.json": lambda c, ws: benchmark(
        c, ws, "--calls", "10", "--rounds-256", "1"),
    "python benchmarks/proxy_overhead.py --replicated --out proxy_replicated.json": lambda c, ws: benchmark(
        c, ws, "--rounds-256", "1"),
    "python benchmarks/proxy_long_context.py --out long_context.json": lambda c, ws: benchmark(
        c, ws, "--turns", "8", "--every", "4"),
    "python benchmarks/long_horizon.py --out long.json": lambda c, ws: benchmark(
        c, ws, "--target-tokens", "20000", "--train-sizes", "2048", "4096", "--chunk", "1024", "--engine-tokens", "2000"),
    "python benchmarks/sim_speedups.py --out sim.json": lambda c, ws: benchmark(
        c, ws, "--presets", "deepswe_122b", "--steps", "2"),
    "python benchmarks/sim_grid.py --out grid.json": lambda c, ws: benchmark(c, ws, "--only", "cells_2"),
    "python benchmarks/schedulers.py --out schedulers.json": run_schedulers,
    "python benchmarks/parking_exactness.py --out parking_exactness.json": lambda c, ws: benchmark(
        c, ws, "--steps", "1", "--batch-size", "2", "--group-size", "2", "--max-turns", "3"),
    "python benchmarks/sim_validation.py --out validation.json": lambda c, ws: benchmark(
        c, ws, "--runs", str(ws.produced("scheduler_runs")), "--sim-steps", "4", "--seeds", "1"),
    "python benchmarks/reliability.py --out reliability.json": lambda c, ws: replace(benchmark(
        c, ws, "--kills", "2", "--steps", "4", "--fuzz", "40", "--drains", "1", "--sessions", "4",
        "--hack-domains", "nl2repo", "--hostile-sizes-mb", "1", "--count-tokens-flood", "2", "--slowloris", "4",
        "--gate-head-timeout", "2", "--cell-runs", "1"), own_ray=True),
    "bash examples/learning_on_cpu/run.sh": lambda c, ws: Invocation(
        [*shlex.split(c), str(ws.path("example_learning"))],
        env={"SFT_STEPS": "2", "TRAIN": str(ws.learn_suite()[0]), "DEV": str(ws.learn_suite()[1]), "DRILLS": str(ws.learn_suite()[2]),
             "RL_ARGS": "trainer.total_steps=1 trainer.val_every=0 cluster.cells=2 scheduler.batch_size=4 "
                        f"trainer.group_size=2 tracking.backends=[jsonl] harness.progress=false {SHORT_REPLIES}",
             "EVAL_ARGS": SHORT_REPLIES}),
    "bash examples/serve_to_harnesses/run.sh runs/<run>/checkpoints/latest": lambda c, ws: Invocation(
        as_written(c, replace={"runs/<run>/checkpoints/latest": checkpoint(ws)}), env={"PORT": "0"}),
    "bash examples/sweep/run.sh": run_sweep,
}


def test_every_documented_command_has_a_smallest_run():
    documented = documented_commands()
    assert set(documented) == set(SMALLEST), (
        f"documented but not run here: {sorted(set(documented) - set(SMALLEST))}; "
        f"run here but no longer documented: {sorted(set(SMALLEST) - set(documented))}")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("documented"))


# Commands that take an earlier one's output run after it on one test worker (a chain: tests/conftest.py,
# scheduling_scope); every other command runs on its own, so the two workers share this file instead of one
# running all of it.
CHAINS = {
    "documented-run": ["python -m gyre.main +recipe=deepswe",
                       "python -m gyre.sft data.records=[runs/<run>/records] model.path=small",
                       "python -m gyre.serve model.path=/path/to/checkpoint proxy.port=8000",
                       "python -m gyre.eval +recipe=deepswe model.path=/path/to/checkpoint eval.samples=4",
                       "bash examples/serve_to_harnesses/run.sh runs/<run>/checkpoints/latest"],
    "documented-schedulers": ["python benchmarks/schedulers.py --out schedulers.json",
                              "python benchmarks/sim_validation.py --out validation.json"],
    # one warm start (the recipe's, from the shared cache) for the three
    "documented-learn": ["python -m gyre.main +recipe=learn",
                         "python benchmarks/learning.py --out learning.json --seeds 0 1 2",
                         "bash examples/learning_on_cpu/run.sh"],
}
GROUP_OF = {command: group for group, commands in CHAINS.items() for command in commands}


# A command whose smallest run splits into independent parts (a documented flag of its own) runs as one test per
# part, so the parts run side by side on the test workers: the reliability benchmark's smallest run whole took
# ~4 minutes, the last of CI, one worker busy and the other two idle.
RELIABILITY = "python benchmarks/reliability.py --out reliability.json"
PARTS_OF = {RELIABILITY: ["cells", "kills", "escapes,hacks,hostile,fuzz,drain"]}


# The commands that run alone are scheduling scopes of one test each, handed out last. These take minutes in CI:
# marked ``chain=long`` so that a test worker holding one is never handed another to hold behind it (an xdist
# worker must hold its next test to run one; tests/conftest.py), and handed out first of them.
LONG_ALONE = [
    *((RELIABILITY, parts) for parts in PARTS_OF[RELIABILITY]),
    ("python benchmarks/parking_exactness.py --out parking_exactness.json", None),
    ("bash examples/sweep/run.sh", None),
]


def case_id(command: str, parts: str | None = None) -> str:
    chain = GROUP_OF.get(command) or ("long" if (command, parts) in LONG_ALONE else "alone")
    return f"chain={chain}: {command}" + (f" --parts {parts}" if parts else "")


def load_by_path(path: Path, name: str):
    """A module from its file (``import conftest`` may find another folder's; a benchmark is a script)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # (dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


@functools.cache
def root_conftest():
    return load_by_path(Path(__file__).parent / "conftest.py", "gyre_tests_root_conftest")


def scope_of(command: str, parts: str | None = None) -> str:
    """The scheduling scope of the command's test (tests/conftest.py)."""
    return root_conftest().scheduling_scope(f"{Path(__file__).name}::test_documented_command_runs[{case_id(command, parts)}]")


def cases() -> list:
    every = [(command, parts) for command in SMALLEST for parts in PARTS_OF.get(command, [None])]
    ordered = [case for case in every if case[0] in GROUP_OF] + LONG_ALONE
    ordered += [case for case in every if case not in ordered]
    return [pytest.param(command, parts, id=case_id(command, parts)) for command, parts in ordered]


def test_every_chain_holds_documented_commands_in_the_order_they_run():
    order = list(SMALLEST)
    for commands in CHAINS.values():
        assert all(command in SMALLEST for command in commands), commands
        assert [order.index(c) for c in commands] == sorted(order.index(c) for c in commands), commands
    # and the test workers take each chain whole, and every other command on its own
    scopes = {c: scope_of(c) for c in SMALLEST}
    for commands in CHAINS.values():
        assert len({scopes[c] for c in commands}) == 1, commands
    assert len(set(scopes.values())) == len(SMALLEST) - sum(len(c) - 1 for c in CHAINS.values())
    assert set(LONG_ALONE) <= {(command, parts) for command in SMALLEST for parts in PARTS_OF.get(command, [None])}
    # a command split into parts: each part on its own, and its parts together are all of the command's
    for command, parts in PARTS_OF.items():
        assert command not in GROUP_OF, command
        assert len({scope_of(command, p) for p in parts}) == len(parts)
        assert sorted(",".join(parts).split(",")) == sorted(all_parts(command)), command


def all_parts(command: str) -> list[str]:
    """The parts a benchmark runs by default (its ``PARTS``)."""
    script = ROOT / shlex.split(command)[1]
    return list(load_by_path(script, f"gyre_benchmark_{script.stem}").PARTS)


@pytest.mark.slow
@pytest.mark.parametrize("command, parts", cases())
def test_documented_command_runs(command, parts, workspace):
    invocation = SMALLEST[command](command, workspace)
    if parts:
        invocation = replace(invocation, argv=[*invocation.argv, "--parts", parts])
    if invocation.gpu:
        pytest.skip("a GPU-cluster command (vLLM, NCCL): run on a GPU machine")
    # The scripts call ``python``: it must be this interpreter (its venv), activated or not.
    path = os.pathsep.join([str(Path(PYTHON).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "RAY_AUTH_MODE": "disabled", "WANDB_MODE": "offline", **invocation.env}
    if invocation.own_ray:
        env.pop("RAY_ADDRESS", None)
    done = subprocess.run(invocation.argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=invocation.timeout)
    assert done.returncode == 0, (f"{shlex.join(invocation.argv)} exited {done.returncode}\n"
                                  f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    if command.startswith("python benchmarks/"):
        check_benchmark_json(workspace, command)
    if command in CHECKS:
        CHECKS[command](workspace, done.stdout + done.stderr)


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def check_main(ws: Workspace, output: str) -> None:
    run = ws.produced("run")
    assert [row["step"] for row in metrics(run) if "reward/mean" in row] == [1]
    assert (run / "checkpoints" / "latest" / "config.json").is_file()
    assert (run / "timeline.png").is_file() and (run / "curves.png").is_file()


def check_learn(ws: Workspace, output: str) -> None:
    """The learning recipe on its branching family: the warm start built (demonstrations through the proxy,
    SFT) into the cache; RL trains trees of several paths; held-out validation before the first step and
    after the last scores every execution it planned and says so; the curve is written."""
    run = ws.path("learn")
    rows = metrics(run)
    steps = [row for row in rows if "reward/mean" in row]
    # RL trained trees of several paths (sub-agents, the summary, retries), their shared tokens once
    assert steps and all(row["trees/paths_mean"] >= 2 and row["tokens/path"] > row["tokens/tree"] for row in steps), steps
    assert all(row["train/fwd_bwd_s"] > 0 for row in steps)
    validations = [row for row in rows if "val/pass_rate" in row]
    assert [row["val/step"] for row in validations] == [0, 1]
    for row in validations:
        assert row["val/executions"] == row["val/planned"] == 2 and row["val/unscorable"] == 0
        low, high = row["val/pass_rate_ci"]
        assert 0.0 <= low <= row["val/pass_rate"] <= high <= 1.0 and len(row["val/rewards"]) == 2
        assert len(row["val/task_ids"]) == 2 and len(set(row["val/task_ids"])) == 1  # the one dev task, twice
        assert row["val/paths_mean"] >= 2
    assert validations[0]["val/call_versions"] == [0]  # the "before" figure is the warm start's own
    assert (run / "val_curve.png").stat().st_size > 1000
    warm = json.loads((run / "warm_start.json").read_text())
    assert (Path(warm["checkpoint"]) / "config.json").is_file()
    # one demonstration of the training task and one of the copying drill (warm_start.also_demonstrate)
    demonstrated = json.loads((run / "demonstrations.json").read_text())
    assert (run / "sft_loss.png").is_file() and demonstrated["executions"] == 2
    assert sorted(name.rsplit("-", 1)[0] for name in demonstrated["behaviours"]) == [
        f"demo-{task.name}" for task in sorted(ws.learn_suite()[2].iterdir())] + [
        f"demo-{task.name}" for task in sorted(ws.learn_suite()[0].iterdir())]


def check_learning_benchmark(ws: Workspace, output: str) -> None:
    # The greedy baseline builds the warm start (temperature does not change a scripted demonstration) or
    # takes the recipe run's from the cache; the RL run reuses it; greedy, a task's two samples make the
    # very same calls.
    work = ws.path("learning") / "seed0"
    greedy = json.loads((work / "greedy" / "warm_start.json").read_text())["checkpoint"]
    assert json.loads((work / "rl" / "warm_start.json").read_text())["checkpoint"] == greedy
    assert "warm start: reusing" in (work / "rl.log").read_text()
    samples = [[(c.get("agent"), c["response_ids"]) for c in map(json.loads, f.read_text().splitlines())]
               for f in sorted((work / "greedy" / "records").glob("dev-*.jsonl"))]
    assert len(samples) == 2 and samples[0] == samples[1], len(samples)
    # greedy after RL: the rl run's last checkpoint, no warm start built or taken
    made_with = (work / "greedy_after_rl" / ".hydra" / "overrides.yaml").read_text()
    assert f"model.path={(work / 'rl' / 'checkpoints' / 'step_000001').resolve()}" in made_with, made_with
    assert not (work / "greedy_after_rl" / "warm_start.json").exists()
    result = json.loads(ws.path("learning.json").read_text())
    for key in ("val_pass_rate_before", "val_pass_rate_after", "control_pass_rate_after", "steps", "wall_s",
                "test_pass_rate_after_ci", "gain_ci", "greedy_warm_start_pass_rate", "gain_over_greedy",
                "greedy_pass_rate_after_rl", "greedy_gain_ci",
                "mean_paths_per_execution", "shared_token_fraction"):
        assert key in result, f"learning.json lacks {key}"


def check_sweep(ws: Workspace, output: str) -> None:
    # Each point's folder carries its overrides in its name and holds its composed config and metrics.
    points = sorted(p for p in ws.produced("sweep").iterdir() if p.is_dir())
    # (key-value parts joined by __: a path Hydra reads unquoted, gyre/cli.py)
    named = {(p.name.split("trajectory.max_paths-")[1][:1], p.name.split("scheduler.max_staleness-")[1][:1]) for p in points}
    assert named == {("1", "0"), ("1", "1"), ("5", "0"), ("5", "1")}, [p.name for p in points]
    for point in points:
        assert (point / ".hydra" / "config.yaml").is_file() and (point / ".hydra" / "overrides.yaml").is_file()
        assert [row["step"] for row in metrics(point) if "reward/mean" in row] == [1]


def check_compare(ws: Workspace, output: str) -> None:
    assert (ws.produced("sweep") / "compare.png").stat().st_size > 10_000
    # The table labels each run by the overrides that differ between them.
    assert "trajectory.max_paths=1" in output and "scheduler.max_staleness=1" in output


def check_sft(ws: Workspace, output: str) -> None:
    assert (ws.path("sft") / "checkpoints" / "latest" / "config.json").is_file()


def check_serve(ws: Workspace, output: str) -> None:
    assert "key for execution" in output, output[-2000:]


def check_eval(ws: Workspace, output: str) -> None:
    summary = json.loads((ws.path("eval") / "eval.json").read_text())["summary"]
    assert summary, "eval.json has an empty summary"


def check_example_learning(ws: Workspace, output: str) -> None:
    for name in ("eval_before", "eval_after"):
        assert (ws.path("example_learning") / name / "eval.json").is_file(), f"no {name}/eval.json"


def check_example_serve(ws: Workspace, output: str) -> None:
    # mini-swe-agent (a test dependency: always here) and each agent CLI found on this machine made calls,
    # recorded under its execution's key.
    agents = [("mini-swe-agent", "serve")] + [(cli, e) for cli, e in (("claude", "serve-1"), ("codex", "serve-2")) if shutil.which(cli)]
    for agent, execution in agents:
        assert f" {execution}.jsonl" in output, f"{agent} recorded no call:\n{output[-3000:]}"


def check_example_sweep(ws: Workspace, output: str) -> None:
    check_sweep(ws, output)
    check_compare(ws, output)


def check_benchmark_json(ws: Workspace, command: str) -> None:
    words = shlex.split(command)
    name = Path(words[words.index("--out") + 1]).name
    result = json.loads(ws.path(name).read_text())
    assert isinstance(result, dict) and result, f"{command}: its --out file holds no results"
    if name in BENCHMARK_SANITY:
        BENCHMARK_SANITY[name](result)


def positive(result: dict, *keys: str) -> None:
    for key in keys:
        assert key in result, f"no {key}"
        assert math.isfinite(result[key]) and result[key] > 0, f"{key} = {result[key]}"


def p50_within_p99(result: dict, *prefixes: str) -> None:
    for prefix in prefixes:
        positive(result, f"{prefix}_p50_ms_256")
        assert result[f"{prefix}_p50_ms_256"] <= result[f"{prefix}_p99_ms_256"], prefix


def sane_tree_training(r: dict) -> None:
    positive(r, "paths", "path_tokens", "tree_tokens", "tree_time_s", "path_time_s", "capped_time_s")
    # shared tokens trained once: the tree holds at most the paths' tokens (equal when nothing branches)
    assert r["tree_tokens"] <= r["path_tokens"] and r["token_ratio"] == r["tree_tokens"] / r["path_tokens"] <= 1


def sane_engine(r: dict) -> None:
    positive(r, "engine_tokens_per_s_1", "engine_tokens_per_s_2", "generate_tokens_per_s_1", "multiturn_reuse_s")
    # the multi-turn session reuses its cached prefix: it prefills fewer tokens than fresh calls
    assert 0 < r["multiturn_reuse_prefill_tokens"] < r["multiturn_fresh_prefill_tokens"]
    assert 0 < r["multiturn_reuse_prefix_hit_rate"] <= 1


def sane_proxy(r: dict) -> None:
    assert r["calls_256"] == 256
    p50_within_p99(r, "proxy", "direct", "bare")


def sane_proxy_replicated(r: dict) -> None:
    p50_within_p99(r, "direct", "replicas_1", "replicas_2")


def sane_long_context(r: dict) -> None:
    assert 0 < r["prompt_tokens_turn4"] < r["prompt_tokens_turn8"]
    assert 0 < r["plan_reused_tokens_turn8"] <= r["prompt_tokens_turn8"]  # turn 8 reuses earlier turns' plan


def sane_long(r: dict) -> None:
    assert r["new_tokens"] >= 20_000  # the --target-tokens it was asked for
    assert r["chunk_exact_max_rel_err"] < 1e-4  # chunked training equals the whole tree
    assert r["engine_within_budget"] and r["engine_peak_held_tokens"] <= r["engine_max_cached_tokens"]


def sane_sim(r: dict) -> None:
    positive(r, *r)
    assert r["deepswe_122b.elastic_vs_ideal"] <= 1 + 1e-9


def sane_grid(r: dict) -> None:
    positive(r, "cells_2.vs_colocate", "cells_2.vs_async_best", "cells_2.elastic_tokens_per_h")
    assert 0 < r["cells_2.vs_ideal"] <= 1 + 1e-9 and r["cells_2.length_bias"] > 0


def sane_schedulers(r: dict) -> None:
    for policy in ("colocate", "async", "elastic"):
        positive(r, f"policy_tokens_per_hour_{policy}", f"wall_s_{policy}", f"step_time_{policy}")
        # length_bias (trained over dispatched mean length) may pass 1 when the long executions are trained
        assert 0 <= r[f"idle_fraction_{policy}"] <= 1 and r[f"length_bias_{policy}"] > 0
        # every policy parks sessions waiting on tools (proxy.parking), and each park frees a slot for a while
        assert r[f"parks_{policy}"] >= r[f"restores_{policy}"] >= 0 and r[f"recomputed_tokens_{policy}"] >= 0
        assert r[f"parked_slot_s_{policy}"] >= 0 and 0 < r[f"slot_share_{policy}"] <= 1


def sane_parking_exactness(r: dict) -> None:
    # the same calls, token for token, with sessions parked and restored from host memory in one run only
    assert r["exact"] == 1 and r["calls_compared"] == r["calls_parking_on"] == r["calls_parking_off"] >= 2, r
    assert r["calls_with_different_tokens"] == 0 and r["max_logprob_abs_diff"] <= 1e-6
    assert r["parks_parking_on"] >= 1 and r["restores_parking_on"] >= 1 and r["parked_slot_s_parking_on"] > 0, r
    assert r["parks_parking_off"] == r["restores_parking_off"] == 0


def sane_validation(r: dict) -> None:
    errors = []
    for policy in ("colocate", "async", "elastic"):
        positive(r, f"measured_step_s_{policy}", f"simulated_step_s_{policy}")
        errors.append(abs(r[f"error_{policy}"]))
    assert r["max_abs_error"] == pytest.approx(max(errors))


def sane_reliability(r: dict) -> None:
    """The figures of the parts that ran (``parts``: tests run the benchmark's parts side by side)."""
    parts = set(r["parts"])
    assert parts, r
    if "escapes" in parts:
        assert r["escape_attempts"] > 0 and r["escapes"] == 0, r["escape_examples"]
        assert r["escape_proxy_call_ok"]
        positive(r, "gate_call_p50_ms", "direct_call_p50_ms")  # (the added ms are differences: any sign under load)
    if "hacks" in parts:
        assert r["reward_hack_attempts"] > 0 and r["reward_hacks_paid"] == 0
        assert r["reward_hack_references_all_one"]
    if "hostile" in parts:  # the execution's own call got through the gate while slow heads were held against it
        assert r["gate_call_during_slowloris_ok"] and r["gate_slowloris_max_open_s"] <= r["gate_head_timeout_s"] + 5
        assert 0 <= r["hostile_body_memory_ratio"] <= 4 and r["other_execution_calls"] > 0
    if "fuzz" in parts:
        assert r["fuzz_requests"] > 0 and r["proxy_5xx_unexpected"] == r["proxy_crashes"] == 0
        assert r["fuzz_bystander_record_unchanged"] and r["fuzz_valid_call_after"]
    if "drain" in parts:
        assert r["drained_sessions"] > 0 and r["calls_lost"] == 0 and r["calls_duplicated"] == 0
    if "kills" in parts:
        sane_reliability_kills(r)
    if "cells" in parts:
        sane_reliability_cells(r)


def sane_reliability_kills(r: dict) -> None:
    # The driver SIGKILLed twice (mid-run, then during start-up), resumed each time, then run to its end: no
    # step lost or trained twice, no record lost, nothing of a killed job left running but Ray's own agents.
    assert r["driver_kills"] == 2, r["kill_points"]
    # (seed 0: the first kill lands just after a checkpoint, the resumed run's kill during its start-up)
    assert [p["kind"] for p in r["kill_points"]] == ["checkpoint", "startup"] and r["kill_points"][0]["checkpointed_steps"] >= 1
    assert r["kill_final_run_finished"], r["kill_final_stderr"]
    assert r["steps_lost"] == r["steps_repeated"] == r["records_lost"] == 0, r
    assert r["kill_final_steps_done"] == r["kill_final_version"] == r["kill_total_steps"] and r["kill_records_at_end"] > 0
    # 15 s after a kill nothing of the job runs but Ray's own processes (its workers notice a killed raylet
    # late on a loaded machine): no driver, no sandboxed agent; a minute later at most Ray's agents, which
    # exit by themselves a little after that when the job was killed while Ray started.
    assert all(_is_rays(line) for line in r["kill_leftover_examples"]), (r["kill_leftover_examples"], r["kill_points"])
    assert all(line.startswith(("ray::DashboardAgent", "ray::RuntimeEnvAgent")) for line in r["kill_late_leftover_examples"]), (
        r["kill_late_leftover_examples"], r["kill_points"])


def sane_reliability_cells(r: dict) -> None:
    # One run losing a training satellite mid-step 1, a rollout cell mid-call and an execution node in step 2 and
    # the core mid-step 3: it finishes, every step logged once, the core rebuilt from its checkpoint, no execution
    # failed by a cell's loss (the dead node's own executions fail as worker_lost, by design)
    assert r["cell_kill_runs_finished"] == 1, r["cell_kill_failures"]
    assert r["cell_kills_satellite_mid_step"] == r["cell_kills_rollout_mid_call"] == r["cell_kills_core_mid_step"] == 1
    assert r["cell_kills_execution_node"] == 1 and r["worker_lost_executions"] >= 1
    assert r["cells_replaced"] >= 1  # the lost satellite (and rollout cell) came back under their ids
    assert r["core_recoveries"] == 1 and r["cell_steps_lost"] == r["cell_steps_repeated"] == 0
    assert r["cell_loss_failed_executions"] == 0 and r["cell_loss_redone_microbatches"] >= 1
    assert r["cell_loss_calls_recorded"] >= 16 and r["cell_loss_calls_duplicated"] == 0
    # Three trainer cells, satellite cell2 killed once it trained two micro-batches (their gradients die with it):
    # the step ends on the others with the update of one trainer doing every micro-batch (float32)
    assert 0 <= r["update_max_abs_diff_after_satellite_loss"] <= 1e-6 and r["satellite_loss_live_satellite_synced"]
    assert r["satellite_loss_loss_rel_diff"] <= 1e-6 and r["satellite_loss_grad_norm_rel_diff"] <= 1e-6
    assert r["satellite_loss_lost"] == [["cell2", "train"]] and r["satellite_loss_version"] == 1
    by_cell = r["satellite_loss_microbatches_by_cell"]
    assert by_cell["cell2"] == 0 and by_cell["cell0"] + by_cell["cell1"] == r["satellite_loss_microbatches"]
    assert r["satellite_loss_redone_microbatches"] >= 2


def _is_rays(command_line: str) -> bool:
    return command_line.startswith("ray::") or "/site-packages/ray/" in command_line


# --out file -> what its figures must satisfy (ranges a broken run could not produce)
BENCHMARK_SANITY: dict[str, Callable[[dict], None]] = {
    "tree_training.json": sane_tree_training, "engine.json": sane_engine, "proxy.json": sane_proxy,
    "proxy_replicated.json": sane_proxy_replicated, "long_context.json": sane_long_context, "long.json": sane_long,
    "sim.json": sane_sim, "grid.json": sane_grid, "schedulers.json": sane_schedulers,
    "validation.json": sane_validation, "reliability.json": sane_reliability,
    "parking_exactness.json": sane_parking_exactness,
}


CHECKS: dict[str, Callable[[Workspace, str], None]] = {
    "python -m gyre.main +recipe=deepswe": check_main,
    "python -m gyre.main +recipe=learn": check_learn,
    "python benchmarks/learning.py --out learning.json --seeds 0 1 2": check_learning_benchmark,
    "python -m gyre.sft data.records=[runs/<run>/records] model.path=small": check_sft,
    "python -m gyre.serve model.path=/path/to/checkpoint proxy.port=8000": check_serve,
    "python -m gyre.eval +recipe=deepswe model.path=/path/to/checkpoint eval.samples=4": check_eval,
    "bash examples/learning_on_cpu/run.sh": check_example_learning,
    "bash examples/serve_to_harnesses/run.sh runs/<run>/checkpoints/latest": check_example_serve,
    "bash examples/sweep/run.sh": check_example_sweep,
}
