"""The ``env`` config group (conf/env/*.yaml) turned into objects: which tasks, which sandbox.

Keys are checked strictly: an unknown key fails with its name, as everywhere in Gyre.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gyre.envs.loaders import LOADERS, LoadResult, load_tasks
from gyre.envs.sandbox import Sandbox
from gyre.envs.task import DOMAINS

PROJECT_ROOT = Path(__file__).resolve().parents[2]
KEYS = ("domain", "path", "val_path", "loader", "sandbox", "eval_retries")


def project_path(path: str | Path) -> Path:
    """``path`` as given when it is absolute or exists, else relative to the project root (Hydra may change
    cwd, and recipes name their files relative to the repository)."""
    given = Path(path)
    return given if given.is_absolute() or given.exists() else PROJECT_ROOT / given


def _plain(value: Any) -> Any:
    """OmegaConf containers to plain dicts/lists (without importing omegaconf here)."""
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_plain(v) for v in value]
    return value


@dataclass
class EnvConfig:
    domain: str
    path: str
    val_path: str | None = None  # held-out tasks (same domain and loader); None: split from `path`
    loader: dict[str, Any] = field(default_factory=dict)
    sandbox: Sandbox = field(default_factory=Sandbox)
    eval_retries: int = 2

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> EnvConfig:
        data = _plain(config)
        unknown = sorted(set(data) - set(KEYS))
        if unknown:
            raise ValueError(f"env: unknown key(s) {unknown}; known keys are {list(KEYS)}")
        for key in ("domain", "path"):
            if not data.get(key):
                raise ValueError(f"env.{key} is required")
        if data["domain"] not in DOMAINS:
            raise ValueError(f"env.domain must be one of {DOMAINS}, got {data['domain']!r}")
        loader = dict(data.get("loader") or {})
        accepted = set(inspect.signature(LOADERS[data["domain"]]).parameters) - {"path"}
        bad = sorted(set(loader) - accepted)
        if bad:
            raise ValueError(
                f"env.loader: unknown option(s) {bad} for domain {data['domain']!r}; known: {sorted(accepted)}"
            )
        retries = data.get("eval_retries", 2)
        if not isinstance(retries, int) or retries < 0:
            raise ValueError(f"env.eval_retries must be an integer >= 0, got {retries!r}")
        return cls(
            domain=data["domain"],
            path=str(data["path"]),
            val_path=str(data["val_path"]) if data.get("val_path") else None,
            loader=loader,
            sandbox=Sandbox.from_config(data.get("sandbox")),
            eval_retries=retries,
        )

    def resolved_path(self, path: str | None = None) -> Path:
        """``path`` (default: ``self.path``) resolved by `project_path`."""
        return project_path(self.path if path is None else path)

    def load(self) -> LoadResult:
        return load_tasks(self.domain, self._existing("path", self.path), **self.loader)

    def load_val(self) -> LoadResult | None:
        """The held-out tasks of ``val_path`` (None when the suite has no held-out folder)."""
        if self.val_path is None:
            return None
        return load_tasks(self.domain, self._existing("val_path", self.val_path), **self.loader)

    def _existing(self, key: str, path: str) -> Path:
        """``path`` resolved; a path that is not there fails naming the key (not as a suite without tasks)."""
        resolved = self.resolved_path(path)
        if not resolved.exists():
            raise FileNotFoundError(f"env.{key}={path!r} does not exist (looked for {resolved})")
        return resolved
