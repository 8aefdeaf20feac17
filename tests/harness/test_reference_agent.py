"""The reference agent's parts: tool-call checks, tools, the command line, and its loop on the paths the
tiny model never takes (valid tool calls, finish, delegate).

The loop tests drive `Agent` with a scripted model: a list of canned replies standing in for the
endpoint (the end-to-end test covers the real endpoint). Everything else here runs for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from gyre.harness.reference import (
    EXIT_FINISHED,
    EXIT_MAX_TURNS,
    Agent,
    Reply,
    Settings,
    Stats,
)
from gyre.harness.reference_tools import (
    MAIN_TOOLS,
    Call,
    InvalidCall,
    Tools,
    check_call,
)


def test_check_call_names_the_problem() -> None:
    assert check_call("c1", "bash", '{"command": "ls"}', MAIN_TOOLS) == Call("c1", "bash", {"command": "ls"})
    cases = {
        ("grep", "{}"): "unknown tool 'grep'",
        ("bash", "{nope"): "not valid JSON",
        ("bash", "[1]"): "must be a JSON object",
        ("write_file", '{"path": "a"}'): "missing required argument(s) ['content']",
        ("read_file", '{"path": "a", "start_line": "1"}'): "'start_line' must be a integer",
    }
    for (name, arguments), message in cases.items():
        with pytest.raises(InvalidCall, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
            check_call("c", name, arguments, MAIN_TOOLS)


def test_tools_work_in_the_workspace(tmp_path) -> None:
    tools = Tools(tmp_path, timeout_s=1.0, max_output_chars=200)
    assert tools.run(Call("1", "write_file", {"path": "pkg/a.py", "content": "x = 1\ny = 2\n"})).startswith("wrote")
    assert tools.run(Call("2", "edit_file", {"path": "pkg/a.py", "old_text": "y = 2", "new_text": "y = 3"})) == "edited pkg/a.py"
    assert (tmp_path / "pkg" / "a.py").read_text() == "x = 1\ny = 3\n"
    assert tools.run(Call("3", "read_file", {"path": "pkg/a.py", "start_line": 2})) == "y = 3\n"
    assert "occurs 0 times" in tools.run(Call("4", "edit_file", {"path": "pkg/a.py", "old_text": "z", "new_text": ""}))
    assert "FileNotFoundError" in tools.run(Call("5", "read_file", {"path": "missing.py"}))
    assert tools.run(Call("6", "bash", {"command": "cat pkg/a.py; exit 3"})) == "exit code 3\nx = 1\ny = 3\n"
    long = tools.run(Call("7", "bash", {"command": "seq 1 1000"}))
    assert "characters cut (limit 200)" in long and len(long) < 300


def test_bash_timeout_kills_the_command_group(tmp_path) -> None:
    tools = Tools(tmp_path, timeout_s=0.5, max_output_chars=1000)
    start = time.monotonic()
    result = tools.run(Call("1", "bash", {"command": "sleep 30 & sleep 30; echo never"}))
    assert "timed out after 0s" in result or "timed out after 1s" in result
    assert time.monotonic() - start < 5  # the background sleep did not keep the pipe open


def test_command_line_errors(tmp_path) -> None:
    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gyre.harness.reference", *args],
            capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=60, check=False,
        )  # fmt: skip

    done = run("--instruction", "x", "--workspace", str(tmp_path / "missing"))
    assert done.returncode == 2 and "is not a folder" in done.stderr
    done = run("--instruction", "x", "--max-turns", "0")
    assert done.returncode == 2 and "--max-turns must be >= 1" in done.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run(
        [sys.executable, "-m", "gyre.harness.reference", "--instruction", "x", "--workspace", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "OPENAI_BASE_URL is not set" in done.stderr


class ScriptedModel:
    """Canned replies in order; records (role, number of messages) of each call."""

    def __init__(self, replies: list[tuple[str, list[tuple[str, dict]]]]) -> None:
        self.replies = list(replies)
        self.seen: list[tuple[str, int]] = []
        self.stats = Stats()

    def chat(self, messages, tools, role, *, allow_tools=True) -> Reply:
        self.seen.append((role, len(messages)))
        content, calls = self.replies.pop(0)
        raw = [(f"call-{len(self.seen)}-{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)]
        message = {"role": "assistant", "content": content}
        if raw:
            message["tool_calls"] = [{"id": c, "type": "function", "function": {"name": n, "arguments": a}} for c, n, a in raw]
        return Reply(message, raw, 100)


def test_agent_executes_tools_delegates_and_finishes(tmp_path) -> None:
    model = ScriptedModel([
        ("", [("report", {"report": "one file"})]),  # first-turn sub-agent
        ("hm", []),  # main turn 1: no tool call ...
        ("", [("write_file", {"path": "out.txt", "content": "hello"})]),  # ... retried: valid
        ("", [("delegate", {"task": "check out.txt"})]),  # main turn 2
        ("", [("bash", {"command": "cat out.txt"})]),  # the delegated sub-agent works ...
        ("", [("report", {"report": "it says hello"})]),  # ... and reports
        ("", [("finish", {"summary": "done"})]),  # main turn 3
    ])  # fmt: skip
    agent = Agent("write hello to out.txt", tmp_path, Settings(max_turns=5, max_retries=1), model=model)  # type: ignore[arg-type]
    assert agent.run() == EXIT_FINISHED
    assert (tmp_path / "out.txt").read_text() == "hello"
    assert [role for role, _ in model.seen] == ["sub", "main", "main", "main", "sub", "sub", "main"]
    assert model.seen[1][1] == model.seen[2][1]  # the retry re-sent the same conversation
    assert agent.stats.sub_agents == 2 and agent.stats.retries == 1 and agent.stats.tool_calls == 3


def test_agent_tells_the_model_about_invalid_replies_and_stops_at_max_turns(tmp_path) -> None:
    bad = ("", [("rm_rf", {})])
    model = ScriptedModel([bad, bad, bad, bad])
    agent = Agent("x", tmp_path, Settings(max_turns=2, max_retries=1, sub_agent=False), model=model)  # type: ignore[arg-type]
    assert agent.run() == EXIT_MAX_TURNS
    # turn 1: two tries; the invalid call is answered with an error tool result; turn 2 sees it.
    assert model.seen == [("main", 2), ("main", 2), ("main", 4), ("main", 4)]
    assert agent.stats.invalid_turns == 2
