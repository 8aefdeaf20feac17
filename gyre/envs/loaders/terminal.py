"""Terminal-Bench loader: one folder per task, in either public layout.

Terminal-Bench 1.x:
    task.yaml       instruction (or legacy ``descriptions: [{key: base, description: ...}]``),
                    parser_name (``pytest``), max_agent_timeout_sec, max_test_timeout_sec
    Dockerfile      its WORKDIR / COPY / ENV give the starting workspace (see `dockerfile`)
    run-tests.sh    runs the tests (with ``$TEST_DIR`` holding ``tests/`` and itself)
    tests/          hidden tests
    solution.sh     reference solution

Harbor (Terminal-Bench 2.x):
    task.toml       [agent] timeout_sec, [verifier] timeout_sec and env
    instruction.md
    environment/Dockerfile
    tests/test.sh   writes /logs/verifier/reward.txt (or reward.json)
    solution/solve.sh

A ``workspace/`` folder (``environment/workspace/`` for Harbor) is copied into the starting workspace
too, for tasks whose files are easier to ship as a folder. The agent's folder is the Dockerfile's
WORKDIR (``Task.workdir``, e.g. ``/app``), which the bwrap sandbox honours.
"""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path
from typing import Any

import yaml

from gyre.envs.errors import TaskFormatError
from gyre.envs.loaders.common import LoadResult, check_type, optional, positive_number, require
from gyre.envs.loaders.dockerfile import DockerfilePlan, plan
from gyre.envs.scorers.terminal import HarborScorer, TerminalBenchScorer
from gyre.envs.solutions import ScriptSolution
from gyre.envs.task import Task
from gyre.envs.workspace import CopySource

log = logging.getLogger("gyre.envs.loaders")

TB_AGENT_TIMEOUT = 360.0  # Terminal-Bench 1.x defaults
TB_TEST_TIMEOUT = 60.0
HARBOR_AGENT_TIMEOUT = 600.0
HARBOR_TEST_TIMEOUT = 600.0  # Harbor's [verifier] timeout_sec default
SUPPORTED_PARSERS = ("pytest",)


def is_task_folder(path: Path) -> bool:
    return path.is_dir() and ((path / "task.yaml").is_file() or (path / "task.toml").is_file())


def load_terminal(path: str | Path, *, env: dict[str, str] | None = None) -> LoadResult:
    """Load one task folder, or every task folder directly inside ``path``."""
    root = Path(path)
    result = LoadResult()
    if not root.is_dir():
        result.add_error(TaskFormatError(root, "<path>", "is not a folder"))
        return result
    folders = (
        [root]
        if is_task_folder(root)
        else sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    )
    for folder in folders:
        try:
            if (folder / "task.toml").is_file():
                task = load_harbor_task(folder, env=env)
            elif (folder / "task.yaml").is_file():
                task = load_tb_task(folder, env=env)
            else:
                raise TaskFormatError(folder / "task.yaml", "task.yaml", "neither task.yaml nor task.toml found")
            result.tasks.append(task)
        except TaskFormatError as exc:
            result.add_error(exc)
    result.check_unique()
    return result


def _workspace(folder: Path, dockerfile: Path, workspace_dir: Path) -> tuple[DockerfilePlan, CopySource]:
    plan_ = plan(dockerfile, dockerfile.parent) if dockerfile.is_file() else DockerfilePlan()
    copies = list(plan_.copies)
    if workspace_dir.is_dir():
        copies.append((str(workspace_dir), "."))
    if plan_.unsupported:
        log.warning(
            "%s: Dockerfile lines Gyre does not run (the host system is used instead): %s",
            dockerfile,
            "; ".join(plan_.unsupported)[:500],
        )
    return plan_, CopySource(tuple(copies))


def load_tb_task(folder: Path, *, env: dict[str, str] | None = None) -> Task:
    config_path = folder / "task.yaml"
    try:
        config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise TaskFormatError(config_path, "task.yaml", f"invalid YAML: {exc}") from exc
    if not isinstance(config, dict):
        raise TaskFormatError(config_path, "task.yaml", "expected a mapping at the top level")
    instruction = _tb_instruction(config, config_path)
    parser_name = optional(config, "parser_name", str, config_path, "pytest")
    if parser_name not in SUPPORTED_PARSERS:
        raise TaskFormatError(
            config_path, "parser_name", f"{parser_name!r} is not supported (supported: {SUPPORTED_PARSERS})"
        )
    agent_timeout = positive_number(config, "max_agent_timeout_sec", config_path, TB_AGENT_TIMEOUT)
    test_timeout = positive_number(config, "max_test_timeout_sec", config_path, TB_TEST_TIMEOUT)
    run_tests = folder / "run-tests.sh"
    if not run_tests.is_file():
        raise TaskFormatError(run_tests, "run-tests.sh", "file is missing")
    plan_, source = _workspace(folder, folder / "Dockerfile", folder / "workspace")
    task_env = {**plan_.env, **(env or {})}
    solution = folder / "solution.sh"
    return Task(
        id=folder.name,
        domain="terminal",
        instruction=instruction,
        source=source,
        scorer=TerminalBenchScorer(
            run_tests_script=str(run_tests),
            tests_dir=str(folder / "tests") if (folder / "tests").is_dir() else None,
            parser_name=parser_name,
            env=task_env,
        ),
        agent_timeout=agent_timeout,
        test_timeout=test_timeout,
        solution=ScriptSolution(str(solution), env=task_env) if solution.is_file() else None,
        origin=str(folder),
        workdir=plan_.workdir if plan_.workdir != "/" else None,
        meta={
            "format": "terminal-bench-1",
            "difficulty": config.get("difficulty"),
            "category": config.get("category"),
            "env": plan_.env,
            "dockerfile_unsupported": plan_.unsupported,
        },
    )


def _tb_instruction(config: dict[str, Any], path: Path) -> str:
    if "instruction" in config:
        text = require(config, "instruction", str, path)
    elif "descriptions" in config:
        descriptions = check_type(config["descriptions"], "descriptions", list, path)
        base = [d for d in descriptions if isinstance(d, dict) and d.get("key") == "base"]
        if not base:
            raise TaskFormatError(path, "descriptions", "no entry with key 'base'")
        text = require(base[0], "description", str, path)
    else:
        raise TaskFormatError(path, "instruction", "missing")
    if not text.strip():
        raise TaskFormatError(path, "instruction", "is empty")
    return text


def load_harbor_task(folder: Path, *, env: dict[str, str] | None = None) -> Task:
    config_path = folder / "task.toml"
    try:
        config = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskFormatError(config_path, "task.toml", f"invalid TOML: {exc}") from exc
    agent = check_type(config.get("agent", {}), "agent", dict, config_path)
    verifier = check_type(config.get("verifier", {}), "verifier", dict, config_path)
    agent_timeout = positive_number(agent, "timeout_sec", f"{config_path} [agent]", HARBOR_AGENT_TIMEOUT)
    test_timeout = positive_number(verifier, "timeout_sec", f"{config_path} [verifier]", HARBOR_TEST_TIMEOUT)
    verifier_env = check_type(verifier.get("env", {}), "verifier.env", dict, config_path)
    instruction_path = folder / "instruction.md"
    if not instruction_path.is_file():
        raise TaskFormatError(instruction_path, "instruction.md", "file is missing")
    instruction = instruction_path.read_text(encoding="utf-8")
    if not instruction.strip():
        raise TaskFormatError(instruction_path, "instruction.md", "is empty")
    tests = folder / "tests"
    if not (tests / "test.sh").is_file():
        raise TaskFormatError(tests / "test.sh", "tests/test.sh", "file is missing")
    plan_, source = _workspace(folder, folder / "environment" / "Dockerfile", folder / "environment" / "workspace")
    task_env = {**plan_.env, **{str(k): str(v) for k, v in verifier_env.items()}, **(env or {})}
    solve = folder / "solution" / "solve.sh"
    name = config.get("task", {}).get("name") if isinstance(config.get("task"), dict) else None
    return Task(
        id=folder.name,
        domain="terminal",
        instruction=instruction,
        source=source,
        scorer=HarborScorer(tests_dir=str(tests), env=task_env),
        agent_timeout=agent_timeout,
        test_timeout=test_timeout,
        solution=ScriptSolution(str(solve), folder=str(solve.parent), env=task_env) if solve.is_file() else None,
        origin=str(folder),
        workdir=plan_.workdir if plan_.workdir != "/" else None,
        meta={"format": "harbor", "name": name, "env": plan_.env, "dockerfile_unsupported": plan_.unsupported},
    )
