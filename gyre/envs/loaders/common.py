"""What every loader shares: the result type, typed field access that names the field at fault, and
reading rows from .jsonl / .json / .parquet files.

A broken task never stops a load: its `TaskFormatError` is logged as a warning and collected in
`LoadResult.errors`, and loading goes on with the next task.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gyre.envs.errors import TaskFormatError
from gyre.envs.task import Task

log = logging.getLogger("gyre.envs.loaders")

ROW_SUFFIXES = (".jsonl", ".json", ".parquet")


@dataclass
class LoadResult:
    """Tasks that loaded, and one error per task (or file) that did not."""

    tasks: list[Task] = field(default_factory=list)
    errors: list[TaskFormatError] = field(default_factory=list)

    def add_error(self, error: TaskFormatError) -> None:
        log.warning("skipping task: %s", error)
        self.errors.append(error)

    def extend(self, other: LoadResult) -> None:
        self.tasks.extend(other.tasks)
        self.errors.extend(other.errors)

    def check_unique(self) -> None:
        """Drop later tasks whose id repeats an earlier one (reported as an error on ``id``)."""
        seen: dict[str, Task] = {}
        kept = []
        for task in self.tasks:
            if task.id in seen:
                self.add_error(
                    TaskFormatError(
                        task.origin, "id", f"duplicate task id {task.id!r} (first in {seen[task.id].origin})"
                    )
                )
                continue
            seen[task.id] = task
            kept.append(task)
        self.tasks = kept

    def __len__(self) -> int:
        return len(self.tasks)

    def by_id(self) -> dict[str, Task]:
        return {task.id: task for task in self.tasks}


_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    list: "a list",
    dict: "an object",
}


def _type_name(types: type | tuple[type, ...]) -> str:
    options = types if isinstance(types, tuple) else (types,)
    if set(options) == {int, float}:
        return "a number"
    return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in options)


def require(row: Mapping[str, Any], name: str, types: type | tuple[type, ...], where: str | Path) -> Any:
    """``row[name]``, checked present, non-null and of ``types`` (a bool is not a number)."""
    if name not in row or row[name] is None:
        raise TaskFormatError(where, name, "missing")
    return check_type(row[name], name, types, where)


def optional(
    row: Mapping[str, Any], name: str, types: type | tuple[type, ...], where: str | Path, default: Any = None
) -> Any:
    if name not in row or row[name] is None:
        return default
    return check_type(row[name], name, types, where)


def check_type(value: Any, name: str, types: type | tuple[type, ...], where: str | Path) -> Any:
    options = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool) and bool not in options:
        raise TaskFormatError(where, name, f"expected {_type_name(types)}, got a boolean")
    if float in options and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, options):
        raise TaskFormatError(where, name, f"expected {_type_name(types)}, got {type(value).__name__}")
    return value


def positive_number(row: Mapping[str, Any], name: str, where: str | Path, default: float) -> float:
    value = optional(row, name, (int, float), where, default)
    if value <= 0:
        raise TaskFormatError(where, name, f"must be > 0, got {value}")
    return float(value)


def string_list(value: Any, name: str, where: str | Path) -> list[str]:
    """A list of strings, given as a list or as a JSON-encoded string of one (SWE-bench's FAIL_TO_PASS)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as exc:
            raise TaskFormatError(where, name, f"not a JSON list: {exc}") from exc
    if hasattr(value, "tolist") and not isinstance(value, list):  # numpy arrays from parquet
        value = value.tolist()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TaskFormatError(where, name, f"expected a list of strings, got {type(value).__name__}")
    return list(value)


def read_json_file(path: Path, name: str | None = None) -> Any:
    """Parse a JSON file; a syntax error names the file and (by default) the file as the field."""
    field_name = name or path.name
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise TaskFormatError(path, field_name, "file is missing") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TaskFormatError(path, field_name, f"invalid JSON: {exc}") from exc


def iter_rows(path: Path) -> Iterator[tuple[str, dict[str, Any] | TaskFormatError]]:
    """(where, row) for every row of a .jsonl, .json (a list of rows) or .parquet file.

    A row that cannot be parsed comes back as a `TaskFormatError` in place of the row, so the caller
    records it and goes on; a file that cannot be read at all raises.
    """
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield where, TaskFormatError(where, "<row>", f"invalid JSON: {exc}")
                    continue
                if not isinstance(row, dict):
                    yield where, TaskFormatError(where, "<row>", f"expected a JSON object, got {type(row).__name__}")
                    continue
                yield where, row
    elif suffix == ".json":
        data = read_json_file(path, "<rows>")
        if not isinstance(data, list):
            raise TaskFormatError(path, "<rows>", "expected a JSON list of row objects")
        for number, row in enumerate(data):
            where = f"{path}[{number}]"
            if isinstance(row, dict):
                yield where, row
            else:
                yield where, TaskFormatError(where, "<row>", f"expected an object, got {type(row).__name__}")
    elif suffix == ".parquet":
        for number, row in enumerate(_parquet_rows(path)):
            yield f"{path}[{number}]", row
    else:
        raise TaskFormatError(path, "<file>", f"unsupported row file type {suffix!r} (use .jsonl, .json or .parquet)")


def _parquet_rows(path: Path) -> Iterator[dict[str, Any]]:
    try:
        import datasets
    except ImportError as exc:
        raise TaskFormatError(
            path,
            "<file>",
            "reading .parquet needs the `datasets` package (pip install datasets); or convert the file to .jsonl",
        ) from exc
    try:
        table = datasets.Dataset.from_parquet(str(path))
    except Exception as exc:  # pyarrow raises its own types for corrupt files
        raise TaskFormatError(path, "<file>", f"cannot read parquet: {exc}") from exc
    yield from table


def row_files(path: Path) -> list[Path]:
    """A row file, or the row files directly inside a folder (sorted)."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in ROW_SUFFIXES)
