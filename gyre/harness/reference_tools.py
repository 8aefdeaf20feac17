"""The reference agent's tools: their OpenAI schemas, argument checks and implementations.

Standard library only: this module runs inside the harness process (already in the sandbox), where every
import is paid for at each execution's start. A tool never raises on bad input from the model; it
returns an error text the model can read, because a wrong tool call is the policy's mistake and belongs
in its trajectory. Only *unusable* calls (unknown tool, arguments that are not a JSON object, a missing
required argument, an argument the tool does not take) are reported by `check_call` so the agent can retry the
turn instead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 2_000_000  # read_file refuses larger files rather than flood the context


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_STR = {"type": "string"}
_INT = {"type": "integer"}

BASH = _function("bash", "Run a bash command in the workspace and return its exit code and output.", {"command": _STR}, ["command"])
READ_FILE = _function(
    "read_file",
    "Read a text file (path relative to the workspace), optionally only lines start_line..end_line (1-based).",
    {"path": _STR, "start_line": _INT, "end_line": _INT},
    ["path"],
)
WRITE_FILE = _function("write_file", "Create or overwrite a file with the given content.", {"path": _STR, "content": _STR}, ["path", "content"])
EDIT_FILE = _function(
    "edit_file",
    "Replace the one occurrence of old_text in a file with new_text (old_text must occur exactly once).",
    {"path": _STR, "old_text": _STR, "new_text": _STR},
    ["path", "old_text", "new_text"],
)
FINISH = _function("finish", "End the task, with a short summary of what was done.", {"summary": _STR}, ["summary"])
DELEGATE = _function(
    "delegate",
    "Hand a self-contained sub-task (e.g. exploring part of the repository) to a sub-agent and get its report.",
    {"task": _STR},
    ["task"],
)
REPORT = _function("report", "End the sub-task and hand the report back to the main agent.", {"report": _STR}, ["report"])

MAIN_TOOLS = [BASH, READ_FILE, WRITE_FILE, EDIT_FILE, DELEGATE, FINISH]
SUB_TOOLS = [BASH, READ_FILE, REPORT]  # a sub-agent explores; it does not edit


@dataclass(frozen=True)
class Call:
    """A tool call that passed `check_call`: a known tool and a JSON object holding its required arguments."""

    id: str
    name: str
    arguments: dict[str, Any]


class InvalidCall(ValueError):
    """A tool call the agent cannot execute; the message is what the model is told."""


def check_call(call_id: str, name: str, raw_arguments: str | None, tools: list[dict[str, Any]]) -> Call:
    """Validate one tool call against ``tools``; raise `InvalidCall` naming the problem."""
    schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in tools}
    if name not in schemas:
        raise InvalidCall(f"unknown tool {name!r}; the tools are {sorted(schemas)}")
    try:
        arguments = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError as error:
        raise InvalidCall(f"tool {name!r}: arguments are not valid JSON ({error})") from error
    if not isinstance(arguments, dict):
        raise InvalidCall(f"tool {name!r}: arguments must be a JSON object, got {type(arguments).__name__}")
    schema = schemas[name]
    missing = [key for key in schema["required"] if key not in arguments]
    if missing:
        raise InvalidCall(f"tool {name!r}: missing required argument(s) {missing}")
    # (a policy under RL writes these: `read_file` with a `content`; passed on, the tool would raise TypeError)
    unknown = sorted(set(arguments) - set(schema["properties"]))
    if unknown:
        raise InvalidCall(f"tool {name!r}: unknown argument(s) {unknown}; it takes {sorted(schema['properties'])}")
    for key, spec in schema["properties"].items():
        if key in arguments and arguments[key] is not None:
            wanted = str if spec["type"] == "string" else int
            if not isinstance(arguments[key], wanted) or isinstance(arguments[key], bool):
                raise InvalidCall(f"tool {name!r}: argument {key!r} must be a {spec['type']}")
    return Call(call_id, name, arguments)


class Tools:
    """Executes tool calls in ``workspace``. Output beyond ``max_output_chars`` is cut with a marker."""

    def __init__(self, workspace: Path, *, timeout_s: float, max_output_chars: int) -> None:
        self.workspace = workspace
        self.timeout_s = timeout_s
        self.max_output_chars = max_output_chars

    def run(self, call: Call) -> str:
        """The tool's result text (errors included: they are feedback for the model)."""
        handler = getattr(self, f"_{call.name}", None)
        if handler is None:  # finish / report / delegate are handled by the agent loop
            raise KeyError(f"tool {call.name!r} is not executed by Tools")
        try:
            return self._cut(handler(**call.arguments))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            return f"error: {type(error).__name__}: {error}"

    def _path(self, path: str) -> Path:
        return (self.workspace / path) if not os.path.isabs(path) else Path(path)

    def _cut(self, text: str) -> str:
        if len(text) <= self.max_output_chars:
            return text
        half = self.max_output_chars // 2
        dropped = len(text) - 2 * half
        return f"{text[:half]}\n[... {dropped} characters cut (limit {self.max_output_chars}) ...]\n{text[-half:]}"

    def _bash(self, command: str) -> str:
        # Own session so that a timeout kills the command's whole process group, not just bash.
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.workspace,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return f"error: command timed out after {self.timeout_s:.0f}s and was killed\n{out.decode(errors='replace')}"
        return f"exit code {proc.returncode}\n{out.decode(errors='replace')}"

    def _read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        target = self._path(path)
        if target.stat().st_size > MAX_FILE_BYTES:
            raise ValueError(f"{path} is larger than {MAX_FILE_BYTES} bytes; use bash (head, sed -n) instead")
        lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
        first = max(1, start_line or 1)
        last = min(len(lines), end_line or len(lines))
        return "".join(lines[first - 1 : last])

    def _write_file(self, path: str, content: str) -> str:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {path}"

    def _edit_file(self, path: str, old_text: str, new_text: str) -> str:
        target = self._path(path)
        text = target.read_text(encoding="utf-8")
        count = text.count(old_text) if old_text else 0
        if count != 1:
            raise ValueError(f"old_text occurs {count} times in {path}; it must occur exactly once")
        target.write_text(text.replace(old_text, new_text, 1), encoding="utf-8")
        return f"edited {path}"
