"""One small class per harness: the command line and environment that start it against the proxy.

A harness is a black box to Gyre: a program that reads a task, talks to a model endpoint and changes a
workspace. What differs between harnesses is only how they are started, so each class here turns a
`LaunchContext` (paths as the sandboxed process sees them, the endpoint and its key) into a `Command`;
`gyre.harness.execution` does the rest identically for all of them. The oracle is the exception: it
calls the task's reference solution in-process (no model, no proxy), so it is an `InlineHarness`.

Every harness gets ``HOME`` in the execution's control folder (outside the workspace, so its state
files are never scored) and runs with the workspace as its working directory.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from gyre.harness.config import HarnessConfig

if TYPE_CHECKING:
    from gyre.envs import Sandbox, Task

GYRE_PACKAGE = str(Path(__file__).resolve().parents[1])  # the folder of the `gyre` package
ReturnStatus = Literal["finished", "crashed"]


@dataclass(frozen=True)
class LaunchContext:
    """What a harness needs to build its command. Paths are as seen inside the sandbox."""

    execution_id: str
    task: Task
    instruction: str
    instruction_file: str
    workspace: str
    control: str  # writable folder outside the workspace (HOME, generated configs, trajectories)
    control_host: Path  # the same folder on the host, for writing files before the start
    openai_base_url: str
    anthropic_base_url: str
    api_key: str
    config: HarnessConfig


@dataclass
class Command:
    """How to start a harness. ``memory_mb`` overrides the sandbox's address-space limit (``"keep"``:
    unchanged; None: no limit, which node-based CLIs need since V8 reserves far more than it uses);
    ``ro_paths`` are extra host folders it must see read-only."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    memory_mb: int | None | Literal["keep"] = "keep"
    ro_paths: tuple[str, ...] = ()


@runtime_checkable
class ProcessHarness(Protocol):
    name: str
    uses_model: bool

    def command(self, ctx: LaunchContext) -> Command: ...

    def status(self, returncode: int) -> ReturnStatus: ...


@runtime_checkable
class InlineHarness(Protocol):
    name: str
    uses_model: bool

    def apply(self, task: Task, workspace: Path, sandbox: Sandbox) -> None: ...


Harness = ProcessHarness | InlineHarness


class _ExitZero:
    """Most CLIs: exit 0 is a normal end (whether or not the task got solved), anything else a crash."""

    def status(self, returncode: int) -> ReturnStatus:
        return "finished" if returncode == 0 else "crashed"


class ReferenceHarness:
    """`python -m gyre.harness.reference` (our agent): the OpenAI chat API over plain HTTP (standard library)."""

    name = "reference"
    uses_model = True

    def command(self, ctx: LaunchContext) -> Command:
        cfg, opts = ctx.config, ctx.config.reference
        argv = [
            sys.executable, "-m", "gyre.harness.reference",
            "--instruction-file", ctx.instruction_file,
            "--workspace", ctx.workspace,
            "--model", cfg.model_name,
            "--max-turns", str(cfg.max_turns),
            "--max-tokens", str(cfg.max_tokens),
            "--max-retries", str(opts.max_retries),
            "--context-chars", str(opts.context_chars),
            "--sub-max-turns", str(opts.sub_max_turns),
            "--tool-timeout", str(opts.tool_timeout_s),
            "--max-output-chars", str(opts.max_output_chars),
            "--request-timeout", str(opts.request_timeout_s),
            "--api-retries", str(opts.api_retries),
        ]  # fmt: skip
        if cfg.temperature is not None:
            argv += ["--temperature", str(cfg.temperature)]
        if opts.context_tokens is not None:
            argv += ["--context-tokens", str(opts.context_tokens)]
        if not opts.sub_agent:
            argv.append("--no-sub-agent")
        elif not opts.explore:
            argv.append("--no-explore")
        if opts.tool_delay_mu is not None:
            argv += ["--tool-delay-mu", str(opts.tool_delay_mu), "--tool-delay-sigma", str(opts.tool_delay_sigma)]
        if opts.tools is not None:
            argv += ["--tools", ",".join(opts.tools)]
        if opts.sub_tools is not None:
            argv += ["--sub-tools", ",".join(opts.sub_tools)]
        # PYTHONPATH: the agent imports this very copy of gyre, installed or not (a checkout, a worktree).
        env = {"OPENAI_BASE_URL": ctx.openai_base_url, "OPENAI_API_KEY": ctx.api_key,
               "PYTHONPATH": str(Path(GYRE_PACKAGE).parent)}
        return Command(argv, env, ro_paths=(GYRE_PACKAGE,))

    def status(self, returncode: int) -> ReturnStatus:
        from gyre.harness.reference import EXIT_FINISHED, EXIT_MAX_TURNS

        return "finished" if returncode in (EXIT_FINISHED, EXIT_MAX_TURNS) else "crashed"


class OracleHarness:
    """Applies the task's reference solution inside the sandbox: no model, no proxy calls. Proof that
    tasks, sandbox and scorers agree (every task must score 1.0 with it)."""

    name = "oracle"
    uses_model = False

    def apply(self, task: Task, workspace: Path, sandbox: Sandbox) -> None:
        task.apply_solution(workspace, sandbox)


class MiniSweAgentHarness(_ExitZero):
    """mini-swe-agent (PyPI ``mini-swe-agent``): litellm against the proxy's OpenAI chat endpoint.

    The whole run configuration, task included, goes into a generated ``mini.yaml`` in the control
    folder (written as JSON, which YAML reads), merged over the bundled ``config`` (``mini.yaml``)."""

    name = "mini-swe-agent"
    uses_model = True

    def command(self, ctx: LaunchContext) -> Command:
        cfg, opts = ctx.config, ctx.config.mini_swe_agent
        model_kwargs: dict[str, object] = {
            "api_base": ctx.openai_base_url,
            "custom_llm_provider": "openai",
            "max_tokens": cfg.max_tokens,
            "drop_params": True,
        }
        if cfg.temperature is not None:
            model_kwargs["temperature"] = cfg.temperature
        generated = {
            "run": {"task": ctx.instruction},
            "agent": {"step_limit": cfg.max_turns, "cost_limit": 0, "mode": "yolo", "confirm_exit": False},
            "model": {"model_name": cfg.model_name, "model_kwargs": model_kwargs, "cost_tracking": "ignore_errors"},
            "environment": {"environment_class": "local", "cwd": ctx.workspace, "timeout": int(opts.step_timeout_s)},
        }
        _merge(generated, opts.extra_config)
        (ctx.control_host / "mini.yaml").write_text(json.dumps(generated, indent=1))
        base = opts.command or [sys.executable, "-m", "minisweagent.run.mini"]
        argv = base + ["-y", "--exit-immediately", "-c", opts.config, "-c", f"{ctx.control}/mini.yaml",
                       "-o", f"{ctx.control}/trajectory.json"]  # fmt: skip
        env = {
            "OPENAI_API_KEY": ctx.api_key,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # else litellm fetches a price map at import
            "MSWEA_COST_TRACKING": "ignore_errors",  # the proxy's model has no price
            "MSWEA_CONFIGURED": "true",  # skip the interactive first-run setup
            "MSWEA_GLOBAL_CONFIG_DIR": f"{ctx.control}/mini-swe-agent",
        }
        return Command(argv, env)


class ClaudeCodeHarness(_ExitZero):
    """Claude Code (npm ``@anthropic-ai/claude-code``) in print mode against the proxy's Anthropic API."""

    name = "claude-code"
    uses_model = True

    def command(self, ctx: LaunchContext) -> Command:
        cfg, opts = ctx.config, ctx.config.claude_code
        argv = [
            opts.executable, "-p", ctx.instruction,
            "--dangerously-skip-permissions",
            "--output-format", "stream-json", "--verbose",
            "--model", cfg.model_name,
            "--max-turns", str(cfg.max_turns),
            *opts.extra_args,
        ]  # fmt: skip
        env = {
            "IS_SANDBOX": "1",  # required to skip permissions as root
            "ANTHROPIC_BASE_URL": ctx.anthropic_base_url,  # no /v1: the CLI appends /v1/messages
            "ANTHROPIC_API_KEY": ctx.api_key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "ANTHROPIC_MODEL": cfg.model_name,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": opts.small_model or cfg.model_name,  # sub-agents' slot
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(cfg.max_tokens),
        }
        return Command(argv, env, memory_mb=None)


class CodexHarness(_ExitZero):
    """Codex CLI (npm ``@openai/codex``) ``exec`` mode against the proxy's Responses API, configured by
    a generated ``config.toml`` in a private ``CODEX_HOME``.

    Codex (0.171) sends no output-token limit, so ``max_tokens`` does not reach it: bound generation
    with the proxy's ``max_tokens_cap`` instead (else a call may run to the end of the context)."""

    name = "codex"
    uses_model = True

    def command(self, ctx: LaunchContext) -> Command:
        cfg, opts = ctx.config, ctx.config.codex
        home = ctx.control_host / "home" / ".codex"
        home.mkdir(parents=True, exist_ok=True)
        lines = [
            f"model = {_toml(cfg.model_name)}",
            f"model_provider = {_toml(opts.provider)}",
            'approval_policy = "never"',  # nobody is there to approve
            'sandbox_mode = "danger-full-access"',  # Gyre's sandbox is the isolation; codex's own cannot nest
            "",
            f"[model_providers.{opts.provider}]",
            f"name = {_toml(opts.provider)}",
            f"base_url = {_toml(ctx.openai_base_url)}",
            'env_key = "GYRE_API_KEY"',
            'wire_api = "responses"',
        ]
        (home / "config.toml").write_text("\n".join(lines) + "\n")
        argv = [opts.executable, "exec", "--skip-git-repo-check", *opts.extra_args, ctx.instruction]
        env = {"GYRE_API_KEY": ctx.api_key, "CODEX_HOME": f"{ctx.control}/home/.codex"}
        return Command(argv, env, memory_mb=None)


HARNESSES: dict[str, type] = {
    cls.name: cls for cls in (ReferenceHarness, OracleHarness, MiniSweAgentHarness, ClaudeCodeHarness, CodexHarness)
}


def get_harness(name: str) -> Harness:
    """The harness called ``name`` (``harness.name``)."""
    try:
        return HARNESSES[name]()
    except KeyError:
        raise ValueError(f"harness.name: unknown harness {name!r}; choose one of {sorted(HARNESSES)}") from None


def _toml(text: str) -> str:
    """A TOML basic string (JSON string escapes are valid TOML escapes)."""
    return json.dumps(text)


def _merge(base: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
