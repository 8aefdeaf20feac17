"""Demonstrations for supervised training, in the two forms users have them, as per-execution call lists.

- **Call records** (``records/*.jsonl`` of a training run, of ``gyre.serve`` or of recorded
  demonstrations): one file per execution, already token-exact.
- **Chat transcripts** in the OpenAI format, one conversation per JSONL line:
  ``{"messages": [...], "tools": [...], "agent": "main"}`` (``tools`` and ``agent`` optional). Each is
  replayed through the proxy's own prompt planning (`gyre.chat.transcript`), so it gives exactly the
  tokens the proxy would have recorded for a harness holding that conversation.

Both become `SFTExample`s (an execution's calls) and then the same prefix-shared trees RL trains on.
A malformed line is skipped and reported with its file and line; nothing is skipped silently.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gyre.protocol import AGENT_ROLES, CallRecord

log = logging.getLogger(__name__)


@dataclass
class SFTExample:
    """One demonstrated execution: its calls (prompt and response ids; responses are what is trained)."""

    execution_id: str
    calls: list[CallRecord]
    source: str  # file, or file:line for a transcript


@dataclass
class DemonstrationSet:
    examples: list[SFTExample] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "file:line: problem", one per line left out

    def extend(self, other: DemonstrationSet) -> None:
        self.examples.extend(other.examples)
        self.skipped.extend(other.skipped)

    def summary(self) -> str:
        calls = sum(len(example.calls) for example in self.examples)
        tokens = sum(len(call.response_ids) for example in self.examples for call in example.calls)
        return (f"{len(self.examples)} demonstrated executions, {calls} calls, {tokens} response tokens; "
                f"{len(self.skipped)} malformed line(s) skipped")


def _files(paths: Iterable[str | Path], pattern: str) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            files.extend(sorted(path.rglob(pattern)))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"demonstrations: {path} does not exist")
    return files


def load_records(paths: Sequence[str | Path]) -> DemonstrationSet:
    """Every record file (``*.jsonl``) of the given files and folders; one execution per file."""
    from gyre.proxy.recorder import read_record_file

    data = DemonstrationSet()
    for file in _files(paths, "*.jsonl"):
        errors: list[str] = []
        calls = read_record_file(file, errors)
        data.skipped.extend(errors)
        if calls:
            data.examples.append(SFTExample(calls[0].execution_id, calls, str(file)))
        elif not errors:
            data.skipped.append(f"{file}: holds no call record")
    return data


def load_transcripts(paths: Sequence[str | Path], template: Any) -> DemonstrationSet:
    """Every conversation of the given JSONL files (folders: their ``*.jsonl``), replayed token-exactly."""
    from gyre.chat import ChatFormatError, Conversation
    from gyre.chat.transcript import replay_conversation
    from gyre.proxy.errors import ProxyError
    from gyre.proxy.openai_chat import parse_messages, parse_tools

    data = DemonstrationSet()
    for file in _files(paths, "*.jsonl"):
        for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{file}:{number}"
            try:
                item = json.loads(line)
                if not isinstance(item, dict) or not isinstance(item.get("messages"), list):
                    raise ValueError('expected an object with a "messages" list')
                agent = item.get("agent", "main")
                if agent not in AGENT_ROLES:
                    raise ValueError(f"agent must be one of {AGENT_ROLES}, got {agent!r}")
                conversation = Conversation(parse_messages(item["messages"]), parse_tools({"tools": item.get("tools") or []}))
                turns = replay_conversation(template, conversation)
                if not turns:
                    raise ValueError("the conversation has no assistant turn to learn from")
            except ProxyError as error:
                data.skipped.append(f"{where}: {error.message}")
                continue
            except (ValueError, ChatFormatError) as error:
                data.skipped.append(f"{where}: {error}")
                continue
            execution_id = f"{file.stem}-{number}"
            calls = [
                CallRecord(execution_id, f"{execution_id}:{index}", agent, prompt, response, [0.0] * len(response), 0)
                for index, (prompt, response) in enumerate(turns)
            ]
            data.examples.append(SFTExample(execution_id, calls, where))
    return data


def report_skipped(data: DemonstrationSet, shown: int = 10) -> None:
    """Log every skipped line (the first ``shown`` in full) and their count."""
    for message in data.skipped[:shown]:
        log.warning("skipped a malformed demonstration line: %s", message)
    if len(data.skipped) > shown:
        log.warning("... and %d more malformed demonstration lines", len(data.skipped) - shown)
