"""Unmodified agent harnesses against the live proxy: mini-swe-agent (PyPI) and Claude Code (npm).

The tiny model writes gibberish, so the agents hit format errors or their step limits; what is checked
is that they talk to the proxy end to end and that every call they made was recorded.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

MINI_SWE_AGENT = textwrap.dedent(
    """
    import json, sys, yaml
    from minisweagent import package_dir
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.litellm_model import LitellmModel

    base, key, workdir = sys.argv[1:4]
    config = yaml.safe_load((package_dir / "config" / "default.yaml").read_text())["agent"]
    config.update(step_limit=4, max_consecutive_format_errors=3, cost_limit=0)
    model = LitellmModel(
        model_name="openai/gyre-policy",
        model_kwargs={"api_base": base, "api_key": key, "custom_llm_provider": "openai", "num_retries": 0},
    )
    agent = DefaultAgent(model, LocalEnvironment(cwd=workdir), **config)
    result = agent.run("Create a file hello.txt containing the word hello.")
    print("RESULT " + json.dumps({"calls": agent.n_calls, "exit_status": result.get("exit_status")}))
    """
)


@pytest.mark.slow
def test_mini_swe_agent_calls_are_recorded(server, proxy, execution, tmp_path: Path) -> None:
    pytest.importorskip("minisweagent")
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "MSWEA_COST_TRACKING": "ignore_errors",
        "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "mswea-config"),
        "MSWEA_CONFIGURED": "true",
    }
    workdir = tmp_path / "work"
    workdir.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", MINI_SWE_AGENT, server.openai_base_url, execution[1], str(workdir)],
        capture_output=True, text=True, timeout=180, env=env, check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"mini-swe-agent failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    result = json.loads(lines[-1][len("RESULT ") :])
    records = proxy.records(execution[0])
    assert result["calls"] >= 2 and len(records) == result["calls"], (result, len(records))
    system_prompt = records[0].prompt_ids
    for record in records:
        assert record.agent == "main" and record.meta["api"] == "openai.chat"
        prompt = proxy.template.decode(record.prompt_ids)
        assert '"name": "bash"' in prompt  # mini-swe-agent's bash tool was offered
        assert record.prompt_ids[:20] == system_prompt[:20]


@pytest.mark.slow
@pytest.mark.npm
def test_claude_code_calls_are_recorded(server, proxy, execution, tmp_path: Path, tuned) -> None:
    claude = shutil.which("claude")
    if claude is None:
        pytest.skip("Claude Code (npm @anthropic-ai/claude-code) is not installed")
    tuned(proxy.config, max_tokens_cap=24)  # Claude Code asks for 32k tokens; keep CPU calls short
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": server.anthropic_base_url,
        "ANTHROPIC_API_KEY": execution[1],
        "IS_SANDBOX": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "HOME": str(tmp_path / "home"),
    }
    (tmp_path / "home").mkdir()
    workdir = tmp_path / "work"
    workdir.mkdir()
    try:
        done = subprocess.run(
            # A short system prompt and one tool keep the CPU prefill short (the default ~34k-token
            # prompt with 24 tools works too, but its first prefill takes ~45 s on the tiny model).
            [claude, "-p", "Create hello.txt containing hello.", "--dangerously-skip-permissions", "--output-format", "stream-json",
             "--verbose", "--max-turns", "2", "--system-prompt", "You are a coding agent.", "--tools", "Bash"],
            cwd=workdir, capture_output=True, text=True, timeout=150, env=env, check=False,
        )
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"claude -p did not finish: {str(error.stdout)[-2000:]}")
    records = proxy.records(execution[0])
    assert records, f"no calls recorded; claude exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert all(r.meta["api"] == "anthropic.messages" for r in records)
    main = [r for r in records if r.agent == "main"]
    assert main and "Bash" in proxy.template.decode(main[0].prompt_ids)
    for earlier, later in itertools.pairwise(main):  # Claude Code continues its turns: one growing path
        assert later.prompt_ids[: len(earlier.prompt_ids) + len(earlier.response_ids)] == earlier.prompt_ids + earlier.response_ids
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert any(e.get("type") == "result" for e in events), done.stdout[-2000:]
