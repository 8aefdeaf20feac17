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
from typing import Self

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
        ("read_file", '{"path": "a", "content": "b"}'): "unknown argument(s) ['content']; it takes ['end_line', 'path', 'start_line']",
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
    done = run("--instruction", "x", "--sub-tools", "read_file,write_file")
    assert done.returncode == 2 and "--sub-tools: unknown sub-agent tool(s) ['write_file']" in done.stderr
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


def test_parallel_delegation_without_exploration_offers_sub_agents_only_their_tools(tmp_path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    model = ScriptedModel([
        ("", [("delegate", {"task": "read a.txt"}), ("delegate", {"task": "read b.txt"})]),  # two sub-agents, one reply
        ("", [("read_file", {"path": "a.txt"})]), ("", [("report", {"report": "alpha"})]),
        ("", [("bash", {"command": "cat b.txt"})]),  # not offered to sub-agents: retried ...
        ("", [("report", {"report": "none"})]),  # ... and valid
        ("", [("finish", {"summary": "done"})]),
    ])  # fmt: skip
    settings = Settings(max_turns=3, max_retries=1, explore=False, sub_tools=("read_file", "report"))
    agent = Agent("x", tmp_path, settings, model=model)  # type: ignore[arg-type]
    assert agent.run() == EXIT_FINISHED
    assert [role for role, _ in model.seen] == ["main", "sub", "sub", "sub", "sub", "main"]  # no exploration first
    assert model.seen[3][1] == model.seen[4][1] == 2  # the second sub-agent's retry re-sent its own conversation
    assert agent.stats.sub_agents == 2 and agent.stats.retries == 1
    with pytest.raises(ValueError, match="must include report"):
        Agent("x", tmp_path, Settings(sub_tools=("read_file",)), model=model)  # type: ignore[arg-type]


def test_a_call_with_an_argument_its_tool_does_not_take_is_retried_not_a_crash(tmp_path) -> None:
    """Seen under RL: a sub-agent's ``read_file`` with a ``content`` argument raised TypeError in the tool and ended
    the execution as crashed. It is an unusable call now: the turn is retried, then answered with the problem."""
    (tmp_path / "page.txt").write_text("value")
    model = ScriptedModel([
        ("", [("delegate", {"task": "read page.txt"})]),
        ("", [("read_file", {"path": "page.txt", "content": "x"})]),  # the sub-agent's bad call ...
        ("", [("read_file", {"path": "page.txt", "content": "x"})]),  # ... again on the retry: answered with the error
        ("", [("report", {"report": "value"})]),
        ("", [("write_file", {"path": "out.txt", "content": "value", "mode": "w"})]),  # the main agent's, then ...
        ("", [("write_file", {"path": "out.txt", "content": "value"})]),  # ... retried: valid
        ("", [("finish", {"summary": "done"})]),
    ])  # fmt: skip
    settings = Settings(max_turns=3, max_retries=1, explore=False, sub_max_turns=2, sub_tools=("read_file", "report"))
    agent = Agent("x", tmp_path, settings, model=model)  # type: ignore[arg-type]
    assert agent.run() == EXIT_FINISHED
    assert (tmp_path / "out.txt").read_text() == "value"
    assert agent.stats.retries == 2 and agent.stats.invalid_turns == 1


def test_agent_tells_the_model_about_invalid_replies_and_stops_at_max_turns(tmp_path) -> None:
    bad = ("", [("rm_rf", {})])
    model = ScriptedModel([bad, bad, bad, bad])
    agent = Agent("x", tmp_path, Settings(max_turns=2, max_retries=1, sub_agent=False), model=model)  # type: ignore[arg-type]
    assert agent.run() == EXIT_MAX_TURNS
    # turn 1: two tries; the invalid call is answered with an error tool result; turn 2 sees it.
    assert model.seen == [("main", 2), ("main", 2), ("main", 4), ("main", 4)]
    assert agent.stats.invalid_turns == 2


class ScriptedEndpoint:
    """A real HTTP server on loopback answering POST /v1/chat/completions with scripted (status, body,
    headers); it keeps every request's headers and JSON body."""

    def __init__(self, answers: list[tuple[int, dict, dict]]) -> None:
        import http.server
        import threading

        self.answers = list(answers)
        self.requests: list[tuple[dict, dict]] = []
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                endpoint.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status, payload, headers = endpoint.answers.pop(0) if endpoint.answers else endpoint.answers_default
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in {"content-type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.answers_default = (401, {"error": {"message": "unknown API key", "type": "authentication_error"}}, {})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def completion(content: str = "", tool_calls: list | None = None) -> tuple[int, dict, dict]:
    message = {"role": "assistant", "content": content, **({"tool_calls": tool_calls} if tool_calls else {})}
    return 200, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": {"prompt_tokens": 42}}, {}


def test_model_speaks_the_openai_wire_format_and_retries_overload(monkeypatch) -> None:
    from gyre.harness.reference import Model

    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    overloaded = (429, {"error": {"message": "busy"}}, {"retry-after": "0"})
    with ScriptedEndpoint([overloaded, completion("looking", [call])]) as endpoint:
        monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "key-1")
        model = Model(Settings(max_tokens=7, api_retries=1), Stats())
        reply = model.chat([{"role": "user", "content": "hi"}], MAIN_TOOLS, "sub", allow_tools=False)
    assert reply.tool_calls == [("call_1", "bash", '{"command": "ls"}')] and reply.prompt_tokens == 42
    assert reply.message["content"] == "looking" and reply.message["tool_calls"][0]["id"] == "call_1"
    assert len(endpoint.requests) == 2  # the 429 was retried
    headers, body = endpoint.requests[-1]
    assert headers["authorization"] == "Bearer key-1" and headers["x-gyre-agent"] == "sub"
    assert body["max_tokens"] == 7 and body["tool_choice"] == "none" and body["tools"] == MAIN_TOOLS


def test_model_errors_name_the_problem(monkeypatch) -> None:
    from gyre.harness.reference import Model, ModelError, PromptTooLong

    too_long = (400, {"error": {"message": "prompt is too long: 70000 tokens > 65535 maximum"}}, {})
    with ScriptedEndpoint([too_long]) as endpoint:  # then 401 for everything
        monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
        model = Model(Settings(api_retries=2), Stats())
        with pytest.raises(PromptTooLong, match="70000 tokens"):
            model.chat([{"role": "user", "content": "hi"}], MAIN_TOOLS, "main")
        with pytest.raises(ModelError, match="main call refused \\(HTTP 401\\): unknown API key"):
            model.chat([{"role": "user", "content": "hi"}], MAIN_TOOLS, "main")
    assert len(endpoint.requests) == 2  # neither a 400 nor a 401 is retried
    monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)  # the server is gone now
    with pytest.raises(ModelError, match="main call failed: URLError"):
        Model(Settings(api_retries=0), Stats()).chat([{"role": "user", "content": "hi"}], MAIN_TOOLS, "main")


def test_a_refused_key_ends_the_run_with_the_model_error_exit_code(tmp_path) -> None:
    with ScriptedEndpoint([]) as endpoint:
        env = {**os.environ, "OPENAI_BASE_URL": endpoint.base_url, "OPENAI_API_KEY": "closed"}
        done = subprocess.run(
            [sys.executable, "-m", "gyre.harness.reference", "--instruction", "x", "--workspace", str(tmp_path)],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip
    summary = json.loads(done.stdout.strip().splitlines()[-1])["gyre_reference"]
    assert done.returncode == 11 and summary["exit"] == "model_error", done.stderr
    assert "HTTP 401" in summary["error"] and "unknown API key" in summary["error"]
