"""Disk space used by a set of folders (what a sandboxed command wrote), for the sandbox's ``disk_mb``.

A walk of the folders summing allocated blocks (``st_blocks``): files counted once even when hard-linked,
symlinks not followed, folders that vanish mid-walk skipped. There is no cheaper portable per-folder
figure without file-system quotas, so the sandbox's watchdog spaces walks by their own cost.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def disk_bytes(folders: Iterable[str]) -> int:
    """Bytes allocated on disk under ``folders`` (each folder's own entry included)."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(folder) for folder in folders]
    while stack:
        folder = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_nlink > 1 and not entry.is_dir(follow_symlinks=False):
                    key = (info.st_dev, info.st_ino)
                    if key in seen:
                        continue
                    seen.add(key)
                total += info.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total
