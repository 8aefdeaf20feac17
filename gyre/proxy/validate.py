"""Reading request JSON field by field, with errors that name the field and what was wrong with it.

Hand-written rather than pydantic models because every API here must accept and ignore fields it does not
know (harnesses send many), and errors must come back in each API's own shape rather than a framework's.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from gyre.chat.messages import Tool
from gyre.proxy.errors import bad_request

_MISSING = object()
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")


def parse_json_object(raw: bytes | bytearray) -> dict[str, Any]:
    """The request body as a JSON object, or a 400 saying why it is not one."""
    try:
        data = json.loads(raw)
    except UnicodeDecodeError as error:
        raise bad_request(f"request body is not valid UTF-8: {error}") from error
    except RecursionError as error:
        raise bad_request("request body is nested too deeply to parse") from error
    except ValueError as error:
        raise bad_request(f"request body is not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise bad_request(f"request body must be a JSON object, got {type(data).__name__}")
    return data


def type_name(value: Any) -> str:
    return "null" if value is None else {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), type(value).__name__
    )


def get_str(data: dict[str, Any], key: str, *, path: str = "", required: bool = False, default: str | None = None) -> str | None:
    value = data.get(key, _MISSING)
    if value is _MISSING or value is None:
        if required:
            raise bad_request(f"{path}{key}: field required", f"{path}{key}")
        return default
    if not isinstance(value, str):
        raise bad_request(f"{path}{key}: expected a string, got {type_name(value)}", f"{path}{key}")
    return value


def get_bool(data: dict[str, Any], key: str, default: bool = False, *, path: str = "") -> bool:
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_request(f"{path}{key}: expected a boolean, got {type_name(value)}", f"{path}{key}")
    return value


def get_int(
    data: dict[str, Any], key: str, *, minimum: int | None = None, required: bool = False, path: str = ""
) -> int | None:
    value = data.get(key)
    name = f"{path}{key}"
    if value is None:
        if required:
            raise bad_request(f"{name}: field required", name)
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"{name}: expected an integer, got {type_name(value)} {value!r:.40}", name)
    if minimum is not None and value < minimum:
        raise bad_request(f"{name}: must be >= {minimum}, got {value}", name)
    return value


def get_float(
    data: dict[str, Any], key: str, *, minimum: float | None = None, maximum: float | None = None, path: str = ""
) -> float | None:
    value = data.get(key)
    name = f"{path}{key}"
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise bad_request(f"{name}: expected a finite number, got {type_name(value)} {value!r:.40}", name)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise bad_request(f"{name}: must be in [{minimum}, {maximum}], got {value}", name)
    return float(value)


def get_list(data: dict[str, Any], key: str, *, required: bool = False, path: str = "") -> list[Any]:
    value = data.get(key)
    name = f"{path}{key}"
    if value is None:
        if required:
            raise bad_request(f"{name}: field required", name)
        return []
    if not isinstance(value, list):
        raise bad_request(f"{name}: expected an array, got {type_name(value)}", name)
    return value


def get_dict(data: dict[str, Any], key: str, *, path: str = "") -> dict[str, Any] | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_request(f"{path}{key}: expected an object, got {type_name(value)}", f"{path}{key}")
    return value


def as_dict(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise bad_request(f"{name}: expected an object, got {type_name(value)}", name)
    return value


def get_stop(data: dict[str, Any], key: str, *, path: str = "") -> tuple[str, ...]:
    """Stop strings: a string or an array of non-empty strings."""
    value = data.get(key)
    name = f"{path}{key}"
    if value is None:
        return ()
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise bad_request(f"{name}: expected a non-empty string or an array of them", name)
    return tuple(values)


def make_tool(name: Any, description: Any, parameters: Any, where: str) -> Tool:
    """A validated tool: a usable name and an object JSON schema (``parameters`` may be absent)."""
    if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
        raise bad_request(
            f"{where}.name: a tool name must be 1-128 characters of letters, digits, _ . : -; got {name!r:.60}",
            f"{where}.name",
        )
    if description is not None and not isinstance(description, str):
        raise bad_request(f"{where}.description: expected a string, got {type_name(description)}", f"{where}.description")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise bad_request(f"{where}: the parameter schema must be a JSON object, got {type_name(parameters)}", where)
    schema_type = parameters.get("type", "object")
    if schema_type != "object":
        raise bad_request(f"{where}: the parameter schema must have type 'object', got {schema_type!r:.40}", where)
    properties = parameters.get("properties")
    if properties is not None and not isinstance(properties, dict):
        raise bad_request(f"{where}.properties: expected an object, got {type_name(properties)}", where)
    return Tool(name=name, description=description or "", parameters=parameters)


def unique_tools(tools: list[Tool], where: str) -> tuple[Tool, ...]:
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise bad_request(f"{where}: tool name {tool.name!r} is defined twice", where)
        seen.add(tool.name)
    return tuple(tools)


def text_of(content: Any, name: str, *, allowed: tuple[str, ...] = ("text",)) -> str:
    """Plain text of a message content: a string, or an array of text parts (joined by newlines).

    Non-text parts (images, audio, files) are refused with a 400: the served model reads text only, and
    dropping them silently would train on a conversation the harness never had.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_request(f"{name}: expected a string or an array of content parts, got {type_name(content)}", name)
    texts: list[str] = []
    for index, part in enumerate(content):
        where = f"{name}[{index}]"
        if isinstance(part, str):
            texts.append(part)
            continue
        part = as_dict(part, where)
        kind = part.get("type")
        if kind not in allowed:
            raise bad_request(
                f"{where}.type: {kind!r:.40} content is not supported here (the served model reads text: {allowed})",
                f"{where}.type",
            )
        text = part.get("text")
        if not isinstance(text, str):
            raise bad_request(f"{where}.text: expected a string, got {type_name(text)}", f"{where}.text")
        texts.append(text)
    return "\n".join(texts)
