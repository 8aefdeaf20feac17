"""Loaders from the public task formats into `gyre.envs.task.Task`; `load_tasks` picks one by domain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gyre.envs.loaders.common import LoadResult
from gyre.envs.loaders.nl2repo import load_nl2repo
from gyre.envs.loaders.swe import load_swe
from gyre.envs.loaders.terminal import load_terminal
from gyre.envs.task import DOMAINS

LOADERS = {"swe": load_swe, "nl2repo": load_nl2repo, "terminal": load_terminal}


def load_tasks(domain: str, path: str | Path, **options: Any) -> LoadResult:
    """Load every task of ``domain`` found at ``path``; broken tasks land in ``result.errors``.

    ``options`` go to the domain's loader (e.g. ``repos=`` / ``mirror=`` for swe, ``tests_root=`` for
    nl2repo, timeouts and ``env``); an option the loader does not take fails loudly.
    """
    if domain not in LOADERS:
        raise ValueError(f"unknown task domain {domain!r}; expected one of {DOMAINS}")
    return LOADERS[domain](path, **options)


__all__ = ["LOADERS", "LoadResult", "load_nl2repo", "load_swe", "load_tasks", "load_terminal"]
