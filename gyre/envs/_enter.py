"""Start bubblewrap as an unprivileged user, from root, with the host folders it must bind reachable.

    python -I -S _enter.py UID GID STAGE SOURCE... -- bwrap ARGS...

Run as root (`gyre.envs.sandbox` does, when Gyre is root): it enters a private mount namespace, mounts a
small tmpfs on the empty folder STAGE, bind-mounts each SOURCE at ``STAGE/<index>``, becomes UID:GID with
no supplementary groups, and execs the rest. bwrap then runs unprivileged (its own user namespace, so the
command is never host root) yet can bind folders that user could not reach by path, such as a Python under
``/root`` or a workspace under a private temp folder: bwrap's options name them at ``STAGE/<index>``.
Nothing changes in the host's mount namespace. Standard library only (``-I -S``), so it starts fast.
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"gyre sandbox: {what}: {os.strerror(error)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                    data.encode() if data else None),
        f"mount {source} on {target}",
    )


def main(argv: list[str]) -> None:
    split = argv.index("--")
    (uid, gid, stage, *sources), command = argv[:split], argv[split + 1 :]
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _mount("none", "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the host
    _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
    for index, source in enumerate(sources):
        target = os.path.join(stage, str(index))
        if os.path.isdir(source):
            os.mkdir(target)
        else:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        _mount(source, target, None, MS_BIND | MS_REC)
    os.setgroups([])
    os.setgid(int(gid))
    os.setuid(int(uid))  # all of root's ids and capabilities go: the rest runs as that user
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
