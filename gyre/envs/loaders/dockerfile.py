"""The part of a Terminal-Bench Dockerfile that can be honoured without Docker.

Terminal-Bench builds each task's starting state with a Dockerfile. Gyre runs tasks in a bubblewrap
sandbox on the host's system instead, so it takes from the Dockerfile only what describes the workspace:
``WORKDIR`` (the agent's folder, e.g. ``/app``), ``COPY``/``ADD`` of local files into it, and ``ENV``.
Everything else (``RUN apt-get ...``, copies outside the workspace, ``--from`` stages) is reported in
``unsupported`` so the loader can warn: such a task may need tools the host does not have.
"""

from __future__ import annotations

import glob
import json
import os
import posixpath
import shlex
from dataclasses import dataclass, field
from pathlib import Path

IGNORED = {
    "FROM",
    "LABEL",
    "MAINTAINER",
    "CMD",
    "ENTRYPOINT",
    "EXPOSE",
    "USER",
    "SHELL",
    "ARG",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "VOLUME",
    "ONBUILD",
}


@dataclass
class DockerfilePlan:
    workdir: str = "/"
    copies: list[tuple[str, str]] = field(default_factory=list)  # (host source, workspace-relative target)
    env: dict[str, str] = field(default_factory=dict)
    unsupported: list[str] = field(default_factory=list)


def _instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction, with line continuations joined and comments dropped."""
    result: list[tuple[str, str]] = []
    buffer = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not buffer and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        buffer += line
        keyword, _, args = buffer.strip().partition(" ")
        result.append((keyword.upper(), args.strip()))
        buffer = ""
    if buffer.strip():
        keyword, _, args = buffer.strip().partition(" ")
        result.append((keyword.upper(), args.strip()))
    return result


def _copy_args(args: str) -> tuple[list[str], list[str]]:
    """(flags, paths) of a COPY/ADD instruction, shell or JSON form."""
    flags: list[str] = []
    rest = args
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        flags.append(flag)
        rest = rest.strip()
    if rest.startswith("["):
        paths = json.loads(rest)
    else:
        paths = shlex.split(rest)
    return flags, [str(p) for p in paths]


def plan(dockerfile: Path, context: Path) -> DockerfilePlan:
    """Read ``dockerfile`` (build context ``context``) into a `DockerfilePlan`."""
    result = DockerfilePlan()
    pending: list[tuple[str, str, str]] = []  # (source, absolute destination, instruction) before WORKDIR is final
    for keyword, args in _instructions(dockerfile.read_text(encoding="utf-8")):
        if keyword == "WORKDIR":
            result.workdir = posixpath.normpath(posixpath.join(result.workdir, args.strip('"')))
        elif keyword in ("COPY", "ADD"):
            try:
                flags, paths = _copy_args(args)
            except (ValueError, json.JSONDecodeError):
                result.unsupported.append(f"{keyword} {args}")
                continue
            if any(flag.startswith("--from") for flag in flags) or len(paths) < 2:
                result.unsupported.append(f"{keyword} {args}")
                continue
            *sources, dest = paths
            dest_abs = posixpath.normpath(posixpath.join(result.workdir, dest))
            is_dir_dest = dest.endswith("/") or len(sources) > 1
            for pattern in sources:
                if "://" in pattern:
                    result.unsupported.append(f"{keyword} {args}")
                    continue
                matches = sorted(glob.glob(str(context / pattern))) or []
                if not matches:
                    result.unsupported.append(f"{keyword} {args} (source {pattern!r} not found)")
                for match in matches:
                    if os.path.isdir(match):
                        pending.append((match, dest_abs, f"{keyword} {args}"))
                    elif is_dir_dest or (len(matches) > 1):
                        pending.append((match, posixpath.join(dest_abs, os.path.basename(match)), f"{keyword} {args}"))
                    else:
                        pending.append((match, dest_abs, f"{keyword} {args}"))
        elif keyword == "ENV":
            result.env.update(_env_pairs(args))
        elif keyword not in IGNORED:
            result.unsupported.append(f"{keyword} {args}"[:200])
    for source, dest_abs, instruction in pending:
        rel = posixpath.relpath(dest_abs, result.workdir)
        if rel == ".." or rel.startswith("../"):
            result.unsupported.append(f"{instruction} (destination {dest_abs} is outside WORKDIR {result.workdir})")
            continue
        if rel == "." and not os.path.isdir(source):
            rel = os.path.basename(source)  # a file copied onto the WORKDIR folder lands inside it
        result.copies.append((source, rel))
    return result


def _env_pairs(args: str) -> dict[str, str]:
    parts = shlex.split(args)
    if parts and "=" not in parts[0]:
        return {parts[0]: " ".join(parts[1:])}
    pairs = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if sep:
            pairs[key] = value
    return pairs
