"""The sandbox's promises: confinement (bwrap), no network (bwrap), limits that stop fork bombs,
infinite loops and memory hogs, nothing left running after a timeout, and flagged (never silent)
output truncation."""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from pathlib import Path

import pytest

from gyre.envs import Mount, Sandbox, SandboxError
from gyre.envs.cgroup import PidsCgroup
from gyre.envs.proctree import processes_with

from .helpers import HAVE_CGROUP, needs_bwrap


def test_runs_in_workspace(kind: str, tmp_path: Path) -> None:
    result = Sandbox(kind=kind, timeout=30).run("pwd; echo made > out.txt", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path)
    assert (tmp_path / "out.txt").read_text() == "made\n"
    assert result.kind == kind


def test_python_and_pytest_available(kind: str, tmp_path: Path) -> None:
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    result = Sandbox(kind=kind, timeout=60).run(
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -q -p no:cacheprovider test_ok.py", tmp_path
    )
    assert result.returncode == 0, result.output
    assert "1 passed" in result.stdout


def test_host_environment_not_inherited(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GYRE_SECRET_TOKEN", "do-not-leak")
    result = Sandbox(kind=kind, env={"FROM_CONFIG": "1"}).run("env", tmp_path, env={"FROM_CALL": "2"})
    assert "do-not-leak" not in result.stdout
    assert "FROM_CONFIG=1" in result.stdout and "FROM_CALL=2" in result.stdout


@needs_bwrap
def test_cannot_write_outside_workspace(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    result = Sandbox(kind="bwrap").run(
        f"echo x > {outside}/escape.txt; echo x > /usr/escape.txt; echo x > /etc/escape.txt; "
        f"echo x > $HOME/escape.txt; echo done",
        workspace,
    )
    assert "done" in result.stdout
    assert not (outside / "escape.txt").exists()
    assert not Path("/usr/escape.txt").exists() and not Path("/etc/escape.txt").exists()
    assert "Read-only file system" in result.stderr or "No such file" in result.stderr


@needs_bwrap
def test_cannot_see_host_files(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("private")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    result = Sandbox(kind="bwrap").run(f"cat {secret}", workspace)
    assert result.returncode != 0
    assert "private" not in result.stdout


def _loopback_server() -> tuple[socket.socket, int]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(10)

    def accept() -> None:
        try:
            conn, _ = server.accept()
            conn.sendall(b"hello\n")
            conn.close()
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    return server, server.getsockname()[1]


CONNECT = (
    "python -c \"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=3); "
    "print('got', s.recv(16))\""
)


@needs_bwrap
def test_no_network(tmp_path: Path) -> None:
    server, port = _loopback_server()
    try:
        result = Sandbox(kind="bwrap", timeout=30).run(CONNECT.format(port=port), tmp_path)
    finally:
        server.close()
    assert result.returncode != 0
    assert "got" not in result.stdout
    assert "Connection refused" in result.stderr or "unreachable" in result.stderr.lower()


@needs_bwrap
def test_network_when_asked(tmp_path: Path) -> None:
    """A harness that must reach the proxy asks for the network explicitly."""
    server, port = _loopback_server()
    try:
        result = Sandbox(kind="bwrap", timeout=30).run(CONNECT.format(port=port), tmp_path, network=True)
    finally:
        server.close()
    assert result.returncode == 0, result.stderr
    assert "got b'hello" in result.stdout


@needs_bwrap
def test_workdir_and_mounts(tmp_path: Path) -> None:
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir()
    data.mkdir()
    (data / "in.txt").write_text("input")
    result = Sandbox(kind="bwrap").run(
        "pwd; cat /data/in.txt; echo x > /data/new.txt; echo ok > here.txt",
        workspace,
        workdir="/app",
        mounts=[Mount(str(data), "/data")],
    )
    assert result.stdout.splitlines()[:2] == ["/app", "input"]
    assert not (data / "new.txt").exists()  # read-only mount
    assert (workspace / "here.txt").read_text() == "ok\n"


def test_infinite_loop_stopped_by_cpu_limit(kind: str, tmp_path: Path) -> None:
    result = Sandbox(kind=kind, cpu_seconds=1, timeout=30).run("while :; do :; done", tmp_path)
    assert result.limit == "cpu_seconds"
    assert not result.timed_out
    assert result.duration < 20


def test_timeout_kills_everything(kind: str, tmp_path: Path, marker: str) -> None:
    command = (
        f"(setsid sleep 300 {marker} &) ; (nohup sleep 301 {marker} > /dev/null 2>&1 &) ; "
        f"sh -c 'sleep 302 {marker}' & sleep 303 # {marker}"
    )
    result = Sandbox(kind=kind, timeout=1.5).run(command, tmp_path)
    assert result.timed_out and result.limit == "timeout"
    assert result.duration < 15
    assert processes_with(marker) == []


def test_background_jobs_do_not_outlive_the_command(kind: str, tmp_path: Path, marker: str) -> None:
    result = Sandbox(kind=kind, timeout=30).run(
        f"(setsid sleep 300 {marker} &); sleep 301 {marker} & echo started", tmp_path
    )
    assert result.returncode == 0 and result.stdout == "started\n"
    assert result.duration < 15
    assert processes_with(marker) == []


@pytest.mark.skipif(not HAVE_CGROUP, reason="a real unbounded fork bomb is run only where a pids cgroup binds it")
def test_real_fork_bomb_stopped(kind: str, tmp_path: Path, marker: str) -> None:
    result = Sandbox(kind=kind, max_processes=64, timeout=20).run(
        f":(){{ :|:& }};: ; sleep 2; echo after # {marker}", tmp_path
    )
    assert result.limit == "max_processes"
    assert result.duration < 19
    assert processes_with(marker) == []


@pytest.mark.parametrize("use_cgroup", [True, False], ids=["cgroup", "watchdog"])
def test_bounded_fork_bomb_stopped(kind: str, tmp_path: Path, marker: str, use_cgroup: bool) -> None:
    """300 sleeping children against a limit of 40: the cgroup refuses forks, the watchdog kills.

    Bounded on purpose, so a broken limit fails this test instead of taking the machine down.
    """
    if use_cgroup and not HAVE_CGROUP:
        pytest.skip("no writable pids cgroup here")
    command = (
        "python -c 'import os, time\n"
        "for _ in range(300):\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60); os._exit(0)\n"
        f"time.sleep(60)' {marker}"
    )
    result = Sandbox(kind=kind, cgroup=use_cgroup, max_processes=40, timeout=30).run(command, tmp_path)
    assert result.limit == "max_processes", (result.returncode, result.stderr[-500:])
    assert not result.timed_out
    assert processes_with(marker) == []


def test_memory_limit(kind: str, tmp_path: Path) -> None:
    result = Sandbox(kind=kind, memory_mb=300).run("python -c 'x = bytearray(600 * 1024 * 1024)'", tmp_path)
    assert result.returncode != 0
    assert "MemoryError" in result.stderr


def test_output_cap_is_flagged(kind: str, tmp_path: Path) -> None:
    command = "python -c \"print('HEAD'); print('x' * 200000); print('TAIL')\""
    result = Sandbox(kind=kind, max_output_bytes=10_000).run(command, tmp_path)
    assert result.truncated
    assert result.stdout.startswith("HEAD")
    assert result.stdout.rstrip().endswith("TAIL")
    assert "bytes of output dropped" in result.stdout
    assert len(result.stdout) < 12_000


def test_output_under_cap_not_flagged(kind: str, tmp_path: Path) -> None:
    result = Sandbox(kind=kind, max_output_bytes=10_000).run("echo small; echo err >&2", tmp_path)
    assert not result.truncated
    assert result.stdout == "small\n" and result.stderr == "err\n"


def test_stdin_input(kind: str, tmp_path: Path) -> None:
    assert Sandbox(kind=kind).run("tr a-z A-Z", tmp_path, input="shout\n").stdout == "SHOUT\n"


def test_process_kind_warns_about_network(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from gyre.envs import sandbox as sandbox_module

    sandbox_module._WARNED.discard("process")
    with caplog.at_level(logging.WARNING, logger="gyre.envs.sandbox"):
        Sandbox(kind="process").run("true", tmp_path)
    assert any("network" in record.getMessage() for record in caplog.records)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="kind"):
        Sandbox(kind="docker")
    with pytest.raises(ValueError, match="memroy_mb"):
        Sandbox.from_config({"memroy_mb": 10})
    assert Sandbox.from_config({"kind": "process", "ro_paths": ["/opt"], "env": {"A": 1}}).env == {"A": "1"}


def test_missing_workspace(tmp_path: Path) -> None:
    with pytest.raises(SandboxError):
        Sandbox().run("true", tmp_path / "absent")


def test_bwrap_kind_required_but_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from gyre.envs import sandbox as sandbox_module

    monkeypatch.setattr(sandbox_module, "bwrap_problem", lambda *ids: "bwrap not found on PATH")
    with pytest.raises(SandboxError, match="bwrap"):
        Sandbox(kind="bwrap").resolved_kind()
    assert Sandbox(kind="auto").resolved_kind() == "process"


def test_cgroup_removed_after_run(tmp_path: Path) -> None:
    if not HAVE_CGROUP:
        pytest.skip("no writable pids cgroup here")
    probe = PidsCgroup.create(10)
    assert probe is not None
    parent = probe.path.parent
    probe.remove()
    before = {p.name for p in parent.iterdir() if p.name.startswith(f"gyre-sbx-{os.getpid()}-")}
    Sandbox(max_processes=10).run("true", tmp_path)
    after = {p.name for p in parent.iterdir() if p.name.startswith(f"gyre-sbx-{os.getpid()}-")}
    assert after == before


# ---------------------------------------------------------------------------------------------- never host root

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="dropping to the sandbox user happens when Gyre runs as root")


@needs_bwrap
@ROOT_ONLY
def test_commands_run_as_the_unprivileged_user(tmp_path: Path) -> None:
    private = tmp_path / "private"  # a 0700 folder of root's, as pytest's own tmp and /root are
    private.mkdir(mode=0o700)
    sandbox = Sandbox(timeout=30)
    result = sandbox.run(f"id -u; id -G; touch made; {sys.executable} -c 'print(42)'", private)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(sandbox.uid), str(sandbox.gid), "42"]
    assert (private / "made").stat().st_uid == sandbox.uid


@needs_bwrap
@ROOT_ONLY
def test_host_kernel_settings_are_read_only(tmp_path: Path) -> None:
    script = (
        "import os\n"
        "writable = []\n"
        "for folder, dirs, files in os.walk('/proc/sys'):\n"
        "    for name in files:\n"
        "        try:\n"
        "            os.close(os.open(os.path.join(folder, name), os.O_WRONLY))\n"
        "            writable.append(name)\n"
        "        except OSError:\n"
        "            pass\n"
        "print(len(writable), writable[:5])\n"
    )
    result = Sandbox(timeout=60).run(["python3", "-c", script], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("0 "), result.stdout


@needs_bwrap
def test_no_nested_user_namespace(tmp_path: Path) -> None:
    result = Sandbox(timeout=30).run("unshare --user true && echo MADE || echo REFUSED", tmp_path)
    assert result.stdout.strip() == "REFUSED", result.output


@needs_bwrap
@ROOT_ONLY
def test_nothing_privileged_is_left_on_the_host(tmp_path: Path) -> None:
    control = tmp_path / "control"
    control.mkdir()
    script = (
        "for d in . /ctl; do cp /usr/bin/id $d/id && chmod 6755 $d/id; mkdir $d/shared && chmod 2777 $d/shared; "
        "mknod $d/null c 1 3 2>/dev/null; ls -l $d/id; done"
    )
    (tmp_path / "ws").mkdir()
    result = Sandbox(timeout=30).run(script, tmp_path / "ws", mounts=[Mount(str(control), "/ctl", writable=True)])
    assert "rws" in result.stdout  # it did set the bits inside
    for folder in (tmp_path / "ws", control):
        assert (folder / "id").stat().st_mode & 0o6000 == 0
        assert (folder / "shared").stat().st_mode & 0o2000 == 0
        assert not (folder / "null").exists()
