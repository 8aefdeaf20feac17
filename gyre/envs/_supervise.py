"""Tiny supervisor for the process sandbox: ``python -S -E _supervise.py CMD...``.

It marks itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every process the command orphans
(double-forked daemons, ``setsid`` jobs, fork-bomb children whose parent died) is re-parented to it
instead of to the host's init. The whole command therefore stays one tree under this pid, which the
sandbox can walk and kill. When the command exits, the supervisor kills what is left and exits with the
command's status. Standard library only, no site-packages (started with -S for speed).
"""

import ctypes
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36


def _descendants(root):
    parents = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if fields and fields[0] not in (b"Z", b"X"):
            parents[int(name)] = int(fields[1])
    children = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = [], list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def _kill_all():
    for _ in range(50):
        pids = _descendants(os.getpid())
        if not pids:
            return
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        _reap()


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv):
    if not argv:
        sys.stderr.write("usage: _supervise.py CMD [ARGS...]\n")
        return 2
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            sys.stderr.write(f"sandbox: cannot run {argv[0]}: {exc}\n")
            os._exit(127)

    def forward(signum, _frame):
        try:
            os.kill(child, signum)
        except OSError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    status = 0
    while True:
        try:
            pid, raw = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == child:
            status = raw
            _kill_all()
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
