"""Gyre's reference agent: ``python -m gyre.harness.reference --instruction-file TASK.md --workspace DIR``.

It talks to an OpenAI-compatible chat endpoint (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``: the Gyre proxy)
and works in ``--workspace`` with the tools bash, read_file, write_file, edit_file,
delegate and finish. It runs already inside the execution's sandbox, so tools execute directly.

Why it exists: it is the harness the tiny model is trained with and the one the tests use, so it must
produce every kind of branch the trajectory processor handles, deterministically, even when the model
emits garbage (the tiny model's random weights never produce a valid tool call):

- **sub-agent**: before its first turn the main agent delegates "explore the repository and report" to a
  sub-agent: a separate conversation with its own system prompt, whose calls carry the header
  ``x-gyre-agent: sub``. Its report is handed to the main agent with the task (``--no-explore`` skips
  this first one). The ``delegate`` tool starts further sub-agents on the model's request; ``--sub-tools``
  restricts what sub-agents are offered (a shorter prompt for small models).
- **retries**: a reply without a usable tool call (no call, an unknown tool, arguments that are not a
  JSON object or miss a required key) is discarded and the same conversation is sent again, at most
  ``--max-retries`` times (sibling branches of one prompt). Then the last invalid reply is kept, the
  model is told what was wrong, and the loop goes on.
- **compaction**: when the conversation passes ``--context-chars`` characters (or the last prompt plus
  ``--max-tokens`` passes ``--context-tokens``), a summary call (header ``x-gyre-agent: main-summary``)
  condenses it, and the conversation restarts from system prompt + task + summary.

Exit codes (the execution maps them to a status): 0 finished (``finish`` called), 10 turn limit reached,
11 the model endpoint failed (unreachable, key closed, refused request), 2 bad command line, 1 anything
else. The last line on stdout is a JSON summary (turns, calls, retries, compactions, sub-agents).

Standard library only: this runs once per execution and must start fast and never import torch.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gyre.harness.reference_tools import (
    MAIN_TOOLS,
    SUB_TOOLS,
    Call,
    InvalidCall,
    Tools,
    check_call,
)

EXIT_FINISHED = 0
EXIT_CRASH = 1
EXIT_USAGE = 2
EXIT_MAX_TURNS = 10
EXIT_MODEL_ERROR = 11

AGENT_HEADER = "x-gyre-agent"

MAIN_SYSTEM = (
    "You are a software engineering agent working in a repository (the current directory). Solve the task "
    "by calling tools: bash to run commands, read_file / write_file / edit_file to work on files, delegate "
    "to hand a self-contained sub-task to a helper, and finish when done. Every reply must call a tool."
)
SUB_SYSTEM = (
    "You are a helper agent. Another agent gave you a sub-task. Investigate with bash and read_file (do "
    "not change files), then call report with a concise, factual report."
)
EXPLORE_TASK = (
    "Explore the repository in {workspace} and report: its layout, how to run its tests, and the files "
    "most relevant to this task:\n\n{instruction}"
)
SUMMARY_PROMPT = (
    "Write a concise summary of the conversation so far: the task, what you found, what you changed, and "
    "what remains to do. It will replace the conversation, so keep every fact you still need."
)
INVALID_REPLY = "Your last reply was invalid: {problem}. Reply with exactly one call of one of the tools: {tools}."
NO_TOOL_CALL = "the reply calls no tool"


class ModelError(RuntimeError):
    """The endpoint could not serve a call (it is down, the key was closed, or it refused the request)."""


class PromptTooLong(ModelError):
    """The endpoint refused a call because the conversation no longer fits its context window."""


@dataclass
class Settings:
    """Limits and knobs of one run (all set from the command line)."""

    model: str = "gyre"
    max_turns: int = 30
    max_tokens: int = 64
    temperature: float | None = None
    max_retries: int = 2
    context_chars: int = 24_000
    context_tokens: int | None = None
    sub_agent: bool = True
    explore: bool = True  # the exploration sub-agent before the first turn (needs sub_agent)
    sub_max_turns: int = 2
    tool_timeout_s: float = 60.0
    max_output_chars: int = 8_000
    request_timeout_s: float = 600.0
    api_retries: int = 2
    # Simulated tool time before each main turn, log-normal(mu, sigma) seconds (None: none). Benchmarks
    # use it to give executions the heavy-tailed durations of real agent runs.
    tool_delay_mu: float | None = None
    tool_delay_sigma: float = 1.0
    # Names of the main agent's tools to offer (None: all of MAIN_TOOLS). A smaller set keeps the prompt
    # short for small models; ``delegate`` needs the sub-agent.
    tools: tuple[str, ...] | None = None
    # Names of the sub-agents' tools (None: all of SUB_TOOLS); must include ``report``.
    sub_tools: tuple[str, ...] | None = None


@dataclass
class Stats:
    """What the run did; printed as the last stdout line so an execution log says it at a glance."""

    exit: str = ""
    turns: int = 0
    calls: int = 0
    retries: int = 0
    invalid_turns: int = 0
    compactions: int = 0
    sub_agents: int = 0
    tool_calls: int = 0
    error: str = ""


@dataclass
class Reply:
    """One assistant turn: the message to append to the conversation, and its raw tool calls."""

    message: dict[str, Any]
    tool_calls: list[tuple[str, str, str | None]]  # (id, name, raw JSON arguments)
    prompt_tokens: int | None = None


class Model:
    """The OpenAI chat endpoint, one ``chat`` per model call, with the agent role in a header.

    Plain HTTP from the standard library rather than the ``openai`` SDK: importing the SDK costs about a
    CPU-second, paid once per execution, which on a busy host slows every execution running beside it.
    The wire format is the SDK's (the proxy is tested against the SDK itself)."""

    RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})

    def __init__(self, settings: Settings, stats: Stats) -> None:
        import urllib.request  # here, so --help and usage errors stay instant

        self._urllib = urllib
        self.settings = settings
        self.stats = stats
        base = os.environ.get("OPENAI_BASE_URL", "").rstrip("/")
        self.url = f"{base}/chat/completions"
        self.key = os.environ.get("OPENAI_API_KEY", "")
        # No proxies from the environment: the endpoint is the Gyre proxy, usually on loopback.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], role: str, *, allow_tools: bool = True) -> Reply:
        """One call. ``allow_tools=False`` keeps the tools in the prompt (so it extends the conversation's
        prefix) but asks for text only (``tool_choice: none``), as a summary call does."""
        body: dict[str, Any] = {"model": self.settings.model, "messages": messages, "tools": tools,
                                "max_tokens": self.settings.max_tokens}
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        if not allow_tools:
            body["tool_choice"] = "none"
        self.stats.calls += 1
        response = self._post(body, role)
        choices = response.get("choices") or []
        if not choices:
            raise ModelError(f"{role} call returned no choices")
        message = choices[0].get("message") or {}
        calls = [(c.get("id", ""), c["function"]["name"], c["function"].get("arguments"))
                 for c in message.get("tool_calls") or []]
        out: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("reasoning_content"):
            out["reasoning_content"] = message["reasoning_content"]  # sent back so the proxy can extend the prompt token-exactly
        if calls:
            out["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args or "{}"}} for cid, name, args in calls
            ]
        usage = (response.get("usage") or {}).get("prompt_tokens")
        return Reply(out, calls, usage)

    def _post(self, body: dict[str, Any], role: str) -> dict[str, Any]:
        """POST with ``api_retries`` retries on connection errors and retryable statuses (honouring
        ``retry-after``); a refused request raises at once, naming the endpoint's message."""
        urllib = self._urllib
        data = json.dumps(body).encode()
        headers = {"content-type": "application/json", "authorization": f"Bearer {self.key}", AGENT_HEADER: role}
        for attempt in range(self.settings.api_retries + 1):
            last = attempt == self.settings.api_retries
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with self.opener.open(request, timeout=self.settings.request_timeout_s) as response:
                    raw = response.read()
            except urllib.error.HTTPError as error:
                message = _error_message(error.read())
                if error.code in self.RETRY_STATUS and not last:
                    time.sleep(_retry_after(error.headers.get("retry-after"), attempt))
                    continue
                if error.code == 400 and "prompt is too long" in message:
                    raise PromptTooLong(message) from error
                raise ModelError(f"{role} call refused (HTTP {error.code}): {message}") from error
            except (urllib.error.URLError, OSError) as error:  # unreachable, connection reset, timed out
                if not last:
                    time.sleep(_retry_after(None, attempt))
                    continue
                raise ModelError(f"{role} call failed: {type(error).__name__}: {error}") from error
            try:
                return json.loads(raw)
            except ValueError as error:  # not retried: the endpoint did serve (and record) this call
                raise ModelError(f"{role} call returned a body that is not JSON: {raw[:200]!r}") from error
        raise AssertionError("unreachable: the last attempt returns or raises")


def main_tools(names: tuple[str, ...] | None) -> list[dict[str, Any]]:
    """The main agent's tool schemas, in MAIN_TOOLS order, restricted to ``names`` (None: all of them)."""
    if names is None:
        return list(MAIN_TOOLS)
    known = [tool["function"]["name"] for tool in MAIN_TOOLS]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"unknown tool(s) {unknown}; the reference agent's tools are {known}")
    if "finish" not in names:
        raise ValueError("the tools must include finish (the only way the agent ends a task)")
    return [tool for tool in MAIN_TOOLS if tool["function"]["name"] in names]


def sub_tools(names: tuple[str, ...] | None) -> list[dict[str, Any]]:
    """The sub-agents' tool schemas, in SUB_TOOLS order, restricted to ``names`` (None: all of them)."""
    if names is None:
        return list(SUB_TOOLS)
    known = [tool["function"]["name"] for tool in SUB_TOOLS]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"unknown sub-agent tool(s) {unknown}; the sub-agents' tools are {known}")
    if "report" not in names:
        raise ValueError("the sub-agent tools must include report (the only way a sub-agent hands back its result)")
    return [tool for tool in SUB_TOOLS if tool["function"]["name"] in names]


def _error_message(raw: bytes) -> str:
    """The ``error.message`` of an OpenAI-shaped error body, else the body itself (cut to 2000 chars)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        return str(json.loads(text)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return text[:2000]


def _retry_after(header: str | None, attempt: int) -> float:
    try:
        return min(30.0, max(0.0, float(header))) if header else min(8.0, 0.5 * 2**attempt)
    except ValueError:
        return min(8.0, 0.5 * 2**attempt)


@dataclass
class Conversation:
    """A message list whose first ``base`` messages (system prompt + task) survive compaction."""

    messages: list[dict[str, Any]]
    base: int = 2
    last_prompt_tokens: int | None = None

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.messages[self.base :]

    def chars(self) -> int:
        return sum(len(json.dumps(m, ensure_ascii=False)) for m in self.messages)


class Agent:
    """The main loop (see the module docstring for the branching it produces)."""

    def __init__(self, instruction: str, workspace: Path, settings: Settings, model: Model | None = None) -> None:
        self.instruction = instruction
        self.workspace = workspace
        self.settings = settings
        self.stats = Stats()
        self.model = model or Model(settings, self.stats)
        self.tools = Tools(workspace, timeout_s=settings.tool_timeout_s, max_output_chars=settings.max_output_chars)
        self.main_tools = main_tools(settings.tools)
        self.sub_tools = sub_tools(settings.sub_tools)
        self.task_message: dict[str, Any] = {"role": "user", "content": f"Task:\n{instruction}"}

    # ------------------------------------------------------------------ the run

    def run(self) -> int:
        try:
            code = self._run()
        except ModelError as error:
            self.stats.error = str(error)
            code = EXIT_MODEL_ERROR
        self.stats.exit = {EXIT_FINISHED: "finished", EXIT_MAX_TURNS: "max_turns", EXIT_MODEL_ERROR: "model_error"}[code]
        return code

    def _run(self) -> int:
        task = f"Task:\n{self.instruction}"
        if self.settings.sub_agent and self.settings.explore:
            report = self.sub_agent(EXPLORE_TASK.format(workspace=self.workspace, instruction=self.instruction))
            task += f"\n\nA helper explored the repository and reported:\n{report}"
        self.task_message = {"role": "user", "content": task}
        conversation = Conversation([{"role": "system", "content": MAIN_SYSTEM}, self.task_message])
        delays = random.Random(f"{self.workspace}|{self.instruction}")
        for _ in range(self.settings.max_turns):
            self.stats.turns += 1
            if self.settings.tool_delay_mu is not None:
                time.sleep(delays.lognormvariate(self.settings.tool_delay_mu, self.settings.tool_delay_sigma))
            if self.should_compact(conversation):
                conversation = self.compact(conversation)
            try:
                reply, calls, problem = self.turn(conversation, self.main_tools, "main")
            except PromptTooLong:
                if not conversation.history:
                    raise
                conversation = self.compact(conversation)
                continue
            if calls is None:
                self.reject(conversation, reply, problem or NO_TOOL_CALL, self.main_tools)
                continue
            conversation.messages.append(reply.message)
            for call in calls:
                if call.name == "finish":
                    return EXIT_FINISHED
                result = self.sub_agent(call.arguments["task"]) if call.name == "delegate" else self.tools.run(call)
                self.stats.tool_calls += 1
                conversation.messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return EXIT_MAX_TURNS

    # ------------------------------------------------------------------ one turn, with retries

    def turn(self, conversation: Conversation, tools: list[dict[str, Any]], role: str) -> tuple[Reply, list[Call] | None, str | None]:
        """Call the model; re-send the same conversation after an unusable reply (``max_retries`` times).

        Returns the reply with its checked calls, or the last reply with ``None`` and the problem."""
        problem = None
        for attempt in range(self.settings.max_retries + 1):
            if attempt:
                self.stats.retries += 1
            reply = self.model.chat(conversation.messages, tools, role)
            conversation.last_prompt_tokens = reply.prompt_tokens
            try:
                if not reply.tool_calls:
                    raise InvalidCall(NO_TOOL_CALL)
                return reply, [check_call(cid, name, args, tools) for cid, name, args in reply.tool_calls], None
            except InvalidCall as error:
                problem = str(error)
        return reply, None, problem

    def reject(self, conversation: Conversation, reply: Reply, problem: str, tools: list[dict[str, Any]]) -> None:
        """Keep the invalid reply and tell the model what was wrong (as tool results when it made calls,
        since every tool call must be answered; as a user message otherwise)."""
        self.stats.invalid_turns += 1
        names = ", ".join(tool["function"]["name"] for tool in tools)
        text = INVALID_REPLY.format(problem=problem, tools=names)
        conversation.messages.append(reply.message)
        if reply.tool_calls:
            for cid, _, _ in reply.tool_calls:
                conversation.messages.append({"role": "tool", "tool_call_id": cid, "content": f"error: {text}"})
        else:
            conversation.messages.append({"role": "user", "content": text})

    # ------------------------------------------------------------------ compaction

    def should_compact(self, conversation: Conversation) -> bool:
        if len(conversation.history) < 2:
            return False  # nothing to condense: compacting again would loop
        if conversation.chars() > self.settings.context_chars:
            return True
        limit, used = self.settings.context_tokens, conversation.last_prompt_tokens
        return limit is not None and used is not None and used + self.settings.max_tokens > limit

    def compact(self, conversation: Conversation) -> Conversation:
        """Summarise with a ``main-summary`` call; restart from system + task + summary."""
        self.stats.compactions += 1
        request = conversation.messages + [{"role": "user", "content": SUMMARY_PROMPT}]
        try:
            summary = self.model.chat(request, self.main_tools, "main-summary", allow_tools=False).message["content"]
        except PromptTooLong:
            summary = "(the conversation was too long to summarise; the work done so far is in the workspace)"
        content = f"{self.task_message['content']}\n\nSummary of your work so far:\n{summary}"
        return Conversation([conversation.messages[0], {"role": "user", "content": content}])

    # ------------------------------------------------------------------ sub-agents

    def sub_agent(self, task: str) -> str:
        """Run a sub-agent on ``task`` (its own conversation, calls tagged ``sub``); return its report."""
        self.stats.sub_agents += 1
        conversation = Conversation([{"role": "system", "content": SUB_SYSTEM}, {"role": "user", "content": task}])
        last_text = ""
        for _ in range(self.settings.sub_max_turns):
            try:
                reply, calls, problem = self.turn(conversation, self.sub_tools, "sub")
            except PromptTooLong:
                break
            last_text = reply.message["content"] or last_text
            if calls is None:
                self.reject(conversation, reply, problem or NO_TOOL_CALL, self.sub_tools)
                continue
            conversation.messages.append(reply.message)
            for call in calls:
                if call.name == "report":
                    return call.arguments["report"]
                result = self.tools.run(call)
                self.stats.tool_calls += 1
                conversation.messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return f"(the helper ended without a report; its last message was: {last_text[:2000]!r})"


# ---------------------------------------------------------------------- command line


def parse_args(argv: list[str] | None = None) -> tuple[str, Path, Settings]:
    defaults = Settings()
    parser = argparse.ArgumentParser(prog="python -m gyre.harness.reference", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--instruction-file", type=Path, help="file holding the task instruction")
    source.add_argument("--instruction", help="the task instruction itself")
    parser.add_argument("--workspace", type=Path, default=Path.cwd(), help="folder to work in (default: cwd)")
    parser.add_argument("--model", default=defaults.model, help="model name sent to the endpoint")
    parser.add_argument("--max-turns", type=int, default=defaults.max_turns, help="main-agent turns before giving up")
    parser.add_argument("--max-tokens", type=int, default=defaults.max_tokens, help="max_tokens of every call")
    parser.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: the endpoint's)")
    parser.add_argument("--max-retries", type=int, default=defaults.max_retries, help="re-sends of a turn after an unusable reply")
    parser.add_argument("--context-chars", type=int, default=defaults.context_chars, help="compact past this many characters")
    parser.add_argument("--context-tokens", type=int, default=None, help="compact when prompt + max_tokens passes this")
    parser.add_argument("--no-sub-agent", action="store_true", help="no sub-agents at all (no exploration, no delegate)")
    parser.add_argument("--no-explore", action="store_true", help="skip the first-turn exploration sub-agent (delegate still works)")
    parser.add_argument("--sub-max-turns", type=int, default=defaults.sub_max_turns, help="turns of each sub-agent")
    parser.add_argument("--tool-timeout", type=float, default=defaults.tool_timeout_s, help="seconds per bash command")
    parser.add_argument("--max-output-chars", type=int, default=defaults.max_output_chars, help="tool output kept per call")
    parser.add_argument("--request-timeout", type=float, default=defaults.request_timeout_s, help="seconds per model call")
    parser.add_argument("--api-retries", type=int, default=defaults.api_retries, help="SDK retries on 429/5xx/connection errors")
    parser.add_argument("--tool-delay-mu", type=float, default=None, help="log-normal mu of simulated tool seconds per turn")
    parser.add_argument("--tool-delay-sigma", type=float, default=defaults.tool_delay_sigma, help="log-normal sigma of it")
    parser.add_argument("--tools", default=None, help="comma-separated main-agent tools to offer (default: all)")
    parser.add_argument("--sub-tools", default=None, help="comma-separated sub-agent tools to offer (default: all)")
    args = parser.parse_args(argv)
    for name in ("max_turns", "max_tokens", "context_chars", "sub_max_turns", "max_output_chars"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    for name in ("max_retries", "api_retries"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if args.instruction_file is not None:
        try:
            instruction = args.instruction_file.read_text(encoding="utf-8")
        except OSError as error:
            parser.error(f"--instruction-file: cannot read {args.instruction_file}: {error}")
    else:
        instruction = args.instruction
    if not instruction.strip():
        parser.error("the instruction is empty")
    if not args.workspace.is_dir():
        parser.error(f"--workspace {args.workspace} is not a folder")
    tools = tuple(name.strip() for name in args.tools.split(",") if name.strip()) if args.tools is not None else None
    try:
        main_tools(tools)
    except ValueError as error:
        parser.error(f"--tools: {error}")
    if tools is not None and "delegate" in tools and args.no_sub_agent:
        parser.error("--tools: delegate needs the sub-agent (drop --no-sub-agent or the delegate tool)")
    sub_names = tuple(name.strip() for name in args.sub_tools.split(",") if name.strip()) if args.sub_tools is not None else None
    try:
        sub_tools(sub_names)
    except ValueError as error:
        parser.error(f"--sub-tools: {error}")
    settings = Settings(
        model=args.model,
        max_turns=args.max_turns,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        max_retries=args.max_retries,
        context_chars=args.context_chars,
        context_tokens=args.context_tokens,
        sub_agent=not args.no_sub_agent,
        explore=not args.no_explore,
        sub_max_turns=args.sub_max_turns,
        tool_timeout_s=args.tool_timeout,
        max_output_chars=args.max_output_chars,
        request_timeout_s=args.request_timeout,
        api_retries=args.api_retries,
        tool_delay_mu=args.tool_delay_mu,
        tool_delay_sigma=args.tool_delay_sigma,
        tools=tools,
        sub_tools=sub_names,
    )
    return instruction, args.workspace.absolute(), settings


def main(argv: list[str] | None = None) -> int:
    instruction, workspace, settings = parse_args(argv)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        if not os.environ.get(name):
            print(f"gyre reference agent: environment variable {name} is not set (it must point at the proxy)", file=sys.stderr)
            return EXIT_USAGE
    agent = Agent(instruction, workspace, settings)
    code = agent.run()
    print(json.dumps({"gyre_reference": asdict(agent.stats)}), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
