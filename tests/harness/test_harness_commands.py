"""Each harness's command line, environment and generated config; harness config validation; and the
rule that the harness package never imports torch."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gyre.envs import load_tasks
from gyre.harness import HarnessConfig, get_harness
from gyre.harness.harnesses import GYRE_PACKAGE, LaunchContext

ROOT = Path(__file__).resolve().parents[2]


def context(tmp_path: Path, **config) -> LaunchContext:
    (task,) = load_tasks("nl2repo", ROOT / "recipes" / "nl2repo" / "tasks" / "bank").tasks
    control = tmp_path / "control"
    control.mkdir(exist_ok=True)
    return LaunchContext(
        execution_id="bank-s0-1234",
        task=task,
        instruction=task.instruction,
        instruction_file="/gyre/instruction.md",
        workspace="/ws",
        control="/gyre",
        control_host=control,
        openai_base_url="http://127.0.0.1:9/v1",
        anthropic_base_url="http://127.0.0.1:9",
        api_key="gyre-KEY",
        config=HarnessConfig.from_mapping(config),
    )


def test_reference_command(tmp_path) -> None:
    ctx = context(tmp_path, max_turns=5, max_tokens=16, temperature=0.5, reference={"sub_agent": False, "context_tokens": 900})
    command = get_harness("reference").command(ctx)
    argv = command.argv
    assert argv[:3] == [sys.executable, "-m", "gyre.harness.reference"]
    assert argv[argv.index("--instruction-file") + 1] == "/gyre/instruction.md"
    assert argv[argv.index("--workspace") + 1] == "/ws"
    assert argv[argv.index("--max-turns") + 1] == "5" and argv[argv.index("--max-tokens") + 1] == "16"
    assert "--no-sub-agent" in argv and argv[argv.index("--context-tokens") + 1] == "900"
    assert argv[argv.index("--temperature") + 1] == "0.5"
    # The agent imports the copy of gyre that launched it (a checkout or worktree, installed or not).
    assert command.env == {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "gyre-KEY",
                           "PYTHONPATH": str(Path(GYRE_PACKAGE).parent)}
    assert command.ro_paths == (GYRE_PACKAGE,)  # the sandbox must see the gyre package to run it
    delegating = get_harness("reference").command(context(tmp_path, reference={"explore": False, "sub_tools": ["read_file", "report"]})).argv
    assert "--no-explore" in delegating and "--no-sub-agent" not in delegating
    assert delegating[delegating.index("--sub-tools") + 1] == "read_file,report"
    harness = get_harness("reference")
    assert harness.status(0) == harness.status(10) == "finished"  # finish, turn limit
    assert harness.status(11) == harness.status(1) == "crashed"  # endpoint failure, exception


def test_mini_swe_agent_command(tmp_path) -> None:
    ctx = context(tmp_path, name="mini-swe-agent", max_turns=7, mini_swe_agent={"extra_config": {"agent": {"step_limit": 9}}})
    command = get_harness("mini-swe-agent").command(ctx)
    assert command.argv[:3] == [sys.executable, "-m", "minisweagent.run.mini"]
    assert ["-c", "mini.yaml", "-c", "/gyre/mini.yaml"] == command.argv[5:9]
    generated = json.loads((tmp_path / "control" / "mini.yaml").read_text())  # JSON is YAML
    assert generated["run"]["task"] == ctx.instruction
    assert generated["model"]["model_kwargs"]["api_base"] == "http://127.0.0.1:9/v1"
    assert generated["model"]["model_kwargs"]["custom_llm_provider"] == "openai"
    assert generated["agent"]["step_limit"] == 9 and generated["agent"]["cost_limit"] == 0  # extra_config merged
    assert generated["environment"]["cwd"] == "/ws"
    assert command.env["OPENAI_API_KEY"] == "gyre-KEY"
    assert command.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True" and command.env["MSWEA_COST_TRACKING"] == "ignore_errors"


def test_claude_code_command(tmp_path) -> None:
    ctx = context(tmp_path, name="claude-code", model_name="policy", max_tokens=4096)
    command = get_harness("claude-code").command(ctx)
    argv = command.argv
    assert argv[:3] == ["claude", "-p", ctx.instruction]
    for flag in ("--dangerously-skip-permissions", "--verbose"):
        assert flag in argv
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    env = command.env
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9" and env["ANTHROPIC_API_KEY"] == "gyre-KEY"
    assert env["IS_SANDBOX"] == "1" and env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == "policy" and env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "4096"
    assert command.memory_mb is None  # node reserves more address space than RLIMIT_AS allows


def test_codex_command_and_config(tmp_path) -> None:
    ctx = context(tmp_path, name="codex", codex={"provider": "mine"})
    command = get_harness("codex").command(ctx)
    assert command.argv[:3] == ["codex", "exec", "--skip-git-repo-check"] and command.argv[-1] == ctx.instruction
    config = tomllib.loads((tmp_path / "control" / "home" / ".codex" / "config.toml").read_text())
    assert config["model_provider"] == "mine" and config["approval_policy"] == "never"
    provider = config["model_providers"]["mine"]
    assert provider == {"name": "mine", "base_url": "http://127.0.0.1:9/v1", "env_key": "GYRE_API_KEY", "wire_api": "responses"}
    assert command.env == {"GYRE_API_KEY": "gyre-KEY", "CODEX_HOME": "/gyre/home/.codex"}


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ValueError, match="harness.name must be one of"):
        HarnessConfig.from_mapping({"name": "cursor"})
    with pytest.raises(ValueError, match=r"harness.reference: unknown key\(s\) \['max_retry'\]"):
        HarnessConfig.from_mapping({"reference": {"max_retry": 1}})
    with pytest.raises(ValueError, match="harness.execution.eval_retries: not set here; it comes from env.eval_retries"):
        HarnessConfig.from_mapping({"execution": {"eval_retries": 1}})
    with pytest.raises(ValueError, match="max_calls=0"):
        HarnessConfig.from_mapping({"execution": {"max_calls": 0}})
    with pytest.raises(ValueError, match="unknown harness"):
        get_harness("cursor")


def test_harness_package_never_imports_torch() -> None:
    code = (
        "import sys\n"
        "import gyre.harness.reference, gyre.harness.execution, gyre.harness.pool, gyre.harness.factory\n"
        "import gyre.harness.report, gyre.harness.endpoint, gyre.harness.harnesses\n"
        "from gyre.harness import ExecutionPool, make_pool, ProxyEndpoint\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))[:5]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
