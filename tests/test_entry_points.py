"""The entry points' command line as a user meets it: ``--help`` describes the program and lists only the
groups it uses; a mistyped key gets Gyre's message (the key, the known keys, the closest match)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gyre.cli import UnknownKey, check_overrides

ROOT = Path(__file__).resolve().parents[1]


def run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize(("module", "describes", "groups", "not_groups"), [
    ("gyre.main", "online RL for LLM agents", {"scheduler", "trainer", "harness", "recipe"}, {"sim", "sft"}),
    ("gyre.eval", "evaluate a checkpoint", {"env", "harness", "model", "recipe"}, {"scheduler", "sim", "trainer"}),
    ("gyre.serve", "serve a checkpoint", {"proxy"}, {"env", "scheduler", "sim", "recipe"}),
    ("gyre.sim", "size a cluster run", {"sim"}, {"harness", "model", "recipe"}),
    ("gyre.sft", "supervised warm start", {"sft", "env", "model"}, {"scheduler", "sim", "recipe"}),
])
def test_help_describes_the_program_and_lists_only_its_groups(module, describes, groups, not_groups):
    done = run(module, "--help")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith(f"python -m {module}: {describes}")
    assert "Examples" in text and f"python -m {module} " in text.split("Examples")[1]
    assert "powered by Hydra" not in text and "== Config ==" not in text
    listed = {line.split()[0] for line in text.split("Config groups")[1].splitlines()[1:] if line.startswith("  ")}
    assert groups <= listed and not (not_groups & listed), listed
    assert len(text.splitlines()) < 40


def test_an_unknown_key_names_the_closest_match_before_hydra_speaks():
    done = run("gyre.main", "+recipe=deepswe", "trainer.totl_steps=3")
    assert done.returncode == 2
    assert "unknown key 'trainer.totl_steps': did you mean 'trainer.total_steps'?" in done.stderr
    assert "known keys of trainer:" in done.stderr and "group_size" in done.stderr
    assert "+trainer.totl_steps" not in done.stderr + done.stdout  # not Hydra's hint to add the typo


def test_a_config_mistake_is_one_line_and_exit_2():
    """A key that moved (found while the entry point builds its parts, past the command-line check) is
    Gyre's one line, not Hydra's "Error executing job" and a traceback before it."""
    done = run("gyre.serve", "rollout.cells=2")
    assert done.returncode == 2
    assert done.stderr.strip() == "python -m gyre.serve: rollout.cells moved to serve.cells: set serve.cells instead"
    assert "Traceback" not in done.stderr + done.stdout and "Error executing job" not in done.stderr


@pytest.mark.parametrize(("config", "overrides", "message"), [
    ("config", ["sed=1"], "unknown key 'sed': did you mean 'seed'?"),
    ("config", ["scheduler=colocate,async", "scheduler.max_stalness=1"], "did you mean 'scheduler.max_staleness'"),
    ("config", ["+recipe=nl2repo", "harness.reference.sub_agnt=false"], "did you mean 'harness.reference.sub_agent'"),
    ("eval", ["eval.sample=2"], "did you mean 'eval.samples'"),
    ("serve", ["serve.execution=2"], "did you mean 'serve.executions'"),
    ("sim_config", ["+sim=deepswe_122b", "sim.workload.calls_man=3"], "did you mean 'sim.workload.calls_mean'"),
])
def test_unknown_keys_of_every_entry_point(config, overrides, message):
    with pytest.raises(UnknownKey, match=message.replace("?", r"\?")):
        check_overrides(config, overrides)


@pytest.mark.parametrize("overrides", [
    ["+recipe=deepswe", "trainer.total_steps=1,2", "scheduler=colocate", "run_dir=/tmp/x"],
    ["+trainer.new_key=1", "trainer.new_key=2"],  # added first, then known
    ["hydra.run.dir=/tmp/x", "hydra/job_logging=stdout"],
    ["model=nosuchmodel"],  # a missing option: Hydra's own error lists the options
])
def test_known_keys_pass(overrides):
    check_overrides("config", overrides)


def test_a_sweep_point_is_one_folder_whatever_its_values_hold():
    from gyre.cli import sweep_dirname

    name = sweep_dirname("env.path=/data/tasks,trainer.lr=0.1")
    assert name.startswith("env.path-_data_tasks__trainer.lr-0.1-") and "/" not in name  # + a digest: "/" was lost
    assert sweep_dirname("trainer.lr=0.1,cluster.cells=2") == "trainer.lr-0.1__cluster.cells-2"
    long = ",".join(f"key{i}=/some/long/path/{i}" for i in range(40))
    name = sweep_dirname(long)
    assert "/" not in name and len(name.encode()) <= 240
    assert name != sweep_dirname(long + ",x=1")  # distinct points stay distinct after shortening
    assert sweep_dirname("a=x/y") != sweep_dirname("a=x_y")  # ... and after a character was replaced


def test_a_path_into_a_sweep_point_can_be_passed_as_a_value():
    """The folder name holds only what Hydra reads unquoted: ``model.path=runs/sweep_<time>/<point>/...``
    parses as written (with ``=`` and ``,`` in the name it failed: "mismatched input '='")."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from gyre.cli import sweep_dirname

    points = [
        ["scheduler.max_staleness=0", "trajectory.max_paths=1", "+recipe=nl2repo", "trainer.total_steps=1"],
        ["tracking.backends=[jsonl]", "env.path=/data/my tasks", "trainer.lr=-1e-6", "hydra.sweep.dir=runs/x"],
    ]
    for point in points:
        path = f"runs/sweep_2026-01-01_00-00-00/{sweep_dirname(point, swept=set())}/checkpoints/latest"
        (parsed,) = OverridesParser.create().parse_overrides([f"model.path={path}"])
        assert parsed.value() == path


def test_a_sweep_point_folder_names_the_swept_keys_first():
    from gyre.cli import sweep_dirname, swept_keys

    argv = ["-m", "+recipe=nl2repo", "trajectory.max_paths=1,5", "scheduler.max_staleness=range(0,2)", "cluster.cells=2"]
    assert swept_keys(argv) == {"trajectory.max_paths", "scheduler.max_staleness"}
    point = ["+recipe=nl2repo", "cluster.cells=2", "scheduler.max_staleness=1", "trajectory.max_paths=5",
             *(f"harness.long_fixed_key_{i}=value" for i in range(20))]
    name = sweep_dirname(point, swept=swept_keys(argv))
    # However many fixed overrides follow, the point's own values survive the length cap.
    assert name.startswith("scheduler.max_staleness-1__trajectory.max_paths-5__+recipe-nl2repo") and len(name.encode()) <= 240
