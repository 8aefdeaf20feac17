"""Turning Hydra config sections into the typed dataclasses the rooms take, with errors that name the key.

Hydra's struct mode already rejects an unknown key given on the command line; this adds the same for keys
written in yaml, and checks each value's type against the dataclass annotation.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any, TypeVar

from omegaconf import DictConfig, ListConfig, OmegaConf

T = TypeVar("T")


class ConfigError(ValueError):
    pass


def closest(name: str, known: list[str] | set[str]) -> str | None:
    """The known name ``name`` most likely meant (a typo), or None when none is close."""
    matches = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def to_plain(section: Any) -> Any:
    if isinstance(section, (DictConfig, ListConfig)):
        return OmegaConf.to_container(section, resolve=True)
    return section


def without_moved(section: Any, prefix: str, moved: dict[str, str]) -> dict[str, Any]:
    """The section as a plain dict without the keys that moved to another section (each kept in its old
    yaml as null, so that setting it anywhere reaches this check); a value set for one is an error naming
    the key to use instead."""
    return _without_retired(section, prefix, {key: f"moved to {new}: set {new} instead" for key, new in moved.items()})


def without_removed(section: Any, prefix: str, removed: dict[str, str]) -> dict[str, Any]:
    """The section as a plain dict without the keys that were removed (kept in their old yaml as null, like
    moved keys); a value set for one is an error naming the key and saying what to use instead."""
    return _without_retired(section, prefix, {key: f"was removed: {instead}" for key, instead in removed.items()})


def _without_retired(section: Any, prefix: str, why: dict[str, str]) -> dict[str, Any]:
    values = dict(to_plain(section) or {})
    for key, reason in why.items():
        if values.pop(key, None) is not None:
            raise ConfigError(f"{prefix}.{key} {reason}")
    return values


def reject_unknown(keys: Any, known: set[str], prefix: str, what: str = "unknown key") -> None:
    """A clear error for the first of ``keys`` not in ``known``: the key, what is wrong, the known keys and
    the closest one (a typo)."""
    for key in keys:
        if key not in known:
            match = closest(key, known)
            hint = f"; did you mean {prefix}.{match}?" if match else ""
            raise ConfigError(f"{prefix}.{key}: {what} (known: {', '.join(sorted(known))}){hint}")


def build(cls: type[T], section: Any, prefix: str, **overrides: Any) -> T:
    """``cls(**section)`` with every key known and every value of the annotated type."""
    values = dict(to_plain(section) or {})
    values.update(overrides)
    hints = typing.get_type_hints(cls)
    reject_unknown(values, {f.name for f in dataclasses.fields(cls)}, prefix)
    for key, value in values.items():
        if not _matches(value, hints[key]):
            raise ConfigError(f"{prefix}.{key}: expected {_name(hints[key])}, got {value!r}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{prefix}: {error}") from error


def _matches(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (list, tuple):
        return isinstance(value, (list, tuple))
    if origin is dict:
        return isinstance(value, dict)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
