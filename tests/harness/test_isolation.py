"""An agent reaches the proxy (its own key, API routes only) and nothing else of the host.

A model-using harness whose command is the escape probe (`gyre.harness.escape_probe`) runs through the
real execution path (live proxy, `ExecutionRunner`, gate, forwarder, bwrap) while the host offers targets:
a TCP listener on 127.0.0.1, an abstract Unix socket, another execution's key, workspace and records, the
task's hidden tests, and a port the host keeps trying to connect to inside. A control run with the
host's network shared shows the probe does detect a reachable listener. Without bubblewrap, the process
sandbox refuses a model-using harness unless the user opts in.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from gyre.envs import Sandbox, SandboxError
from gyre.envs.sandbox import Forward, bwrap_problem
from gyre.harness import ExecutionPool, HarnessConfig, ProxyEndpoint, make_runner
from gyre.harness.escape_probe import HostDialer, ProbeHarness, results
from gyre.harness.execution import ExecutionRunner
from gyre.ports import free_ports

needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unavailable ({bwrap_problem()})")
ROOT = Path(__file__).resolve().parents[2]
HIDDEN_TEST = ROOT / "recipes" / "nl2repo" / "tasks" / "bank" / "hidden" / "tests" / "test_bank.py"


class HostListener:
    """A TCP listener on the host's loopback that greets and counts whoever connects."""

    def __init__(self, family: int = socket.AF_INET, address: object = ("127.0.0.1", 0)) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.connections = 0
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.sendall(b"host-secret-banner\n")
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        self.sock.close()


def probe_config() -> HarnessConfig:
    return HarnessConfig.from_mapping({"progress": False, "execution": {"grace_s": 1.0, "poll_s": 0.05, "time_limit_s": 60}})


def run_probe(server, sandbox: Sandbox, spec: dict, task, run_dir: Path):
    """One execution of the probe; the host keeps dialling the port it listens on (``listen_port``) meanwhile."""
    runner = ExecutionRunner(ProbeHarness(spec), sandbox, probe_config(), ProxyEndpoint(server))
    runner.config.run_dir = str(run_dir)

    async def main():
        async with ExecutionPool(runner, concurrency=1, progress=False) as pool:
            return await pool.submit(task)

    ports = {spec["listen_port"]: spec["listen_token"]} if "listen_port" in spec else {}
    with HostDialer(ports) as dialer:
        execution = asyncio.run(main())
    log_text = Path(execution.reward_detail["log"]).read_text()
    return execution, results(log_text), dialer.reached, log_text


@needs_bwrap
def test_agent_reaches_the_proxy_and_nothing_else(server, sandbox, builtin_tasks, tmp_path, no_leftover_processes) -> None:
    bank = next(task for task in builtin_tasks["nl2repo"] if task.id == "bank")
    tcp = HostListener()
    tcp6 = HostListener(socket.AF_INET6, ("::1", 0))
    abstract_name = f"gyre-test-{uuid.uuid4().hex[:8]}"
    abstract = HostListener(socket.AF_UNIX, "\0" + abstract_name)
    proxy = server.proxy
    # Another execution, live: its key, a recorded call, and a file in its workspace.
    other_id = f"other-{uuid.uuid4().hex[:6]}"
    other_key = proxy.open_execution(other_id)
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    assert httpx.post(server.openai_base_url + "/chat/completions", json=chat, headers={"authorization": f"Bearer {other_key}"}, timeout=60).status_code == 200
    other_records = proxy.recorder.folder / f"{other_id}.jsonl"
    other_workspace = tmp_path / "runs" / other_id / "workspace"
    other_workspace.mkdir(parents=True)
    (other_workspace / "solution.py").write_text("the other agent's work\n")
    records_before = other_records.read_bytes()
    listen_port = free_ports(1)[0]
    spec = {
        "tcp": [["127.0.0.1", tcp.port, "host listener"], ["::1", tcp6.port, "host listener v6"],
                ["127.0.0.1", listen_port, "free port"], ["1.1.1.1", 80, "outside"]],
        "abstract": [abstract_name],
        "proc_net_ports": [tcp.port, tcp6.port],
        "listen_port": listen_port,
        "listen_s": 3.0,
        "listen_token": uuid.uuid4().hex,
        "read": [str(other_workspace / "solution.py"), str(other_records), str(HIDDEN_TEST), "/etc/shadow"],
        "write": [str(tmp_path / "escaped.txt"), str(other_workspace / "planted.py")],
        # The workspace's own path is what the agent works in; nothing else of the run may show.
        "env_forbidden": [str(proxy.recorder.folder), str(other_workspace), "gyre-gate-", "/control"],
        "cmdline_forbidden": [str(tmp_path), str(proxy.recorder.folder), "gyre-gate-"],
        "host_markers": ["pytest"],
        "workspace_forbidden": ["test_bank.py"],
        "other_key": other_key,
        "gate_socket": "/run/gyre/net/proxy.sock",
    }
    try:
        execution, lines, reached, log_text = run_probe(server, sandbox, spec, bank, tmp_path / "runs")
    finally:
        for listener in (tcp, tcp6, abstract):
            listener.close()
        proxy.close_execution(other_key)

    attempts = [line for line in lines if line["probe"] == "attempt"]
    escaped = [line for line in attempts if line["escaped"]]
    assert not escaped, escaped
    assert len(attempts) >= 25, log_text[-3000:]
    ok = {line["name"]: line for line in lines if line["probe"] == "ok"}
    assert not ok["api_call_with_own_key"]["escaped"], ok  # the proxy itself is reachable, with the own key
    assert tcp.connections == tcp6.connections == abstract.connections == 0
    assert reached == []  # the host never reached the port the agent listened on
    assert not (tmp_path / "escaped.txt").exists() and not (other_workspace / "planted.py").exists()
    assert other_records.read_bytes() == records_before  # the other execution's record is untouched
    # Only API calls with the own key got through the gate (the plain one, and the valid halves of the
    # smuggling and pipelining attempts), each recorded once for this execution.
    gate = execution.reward_detail["gate"]
    assert gate["relayed"] == 3 and sum(gate["refused"].values()) >= 8, gate
    assert len(execution.calls) == 3 and all(call.execution_id == execution.id for call in execution.calls)
    assert execution.reward_detail["stop_reason"] == "exited"


@needs_bwrap
def test_agent_is_never_host_root(server, sandbox, builtin_tasks, tmp_path, no_leftover_processes) -> None:
    """The agent cannot change host-global kernel settings, make a user namespace of its own, or leave a
    setuid/setgid file, a device node or a root-owned file in the folders the host reads afterwards."""
    bank = next(task for task in builtin_tasks["nl2repo"] if task.id == "bank")
    execution, lines, _, log_text = run_probe(server, sandbox, {"gate": False, "privilege": True}, bank, tmp_path / "runs")
    attempts = {line["name"]: line for line in lines if line["probe"] == "attempt"}
    assert len(attempts) == 2 + 4 * 2, log_text[-3000:]  # /proc/sys, user namespace, 4 files in 2 folders
    assert not [line for line in attempts.values() if line["escaped"]], attempts
    workspace = Path(execution.workspace)
    if os.geteuid() == 0:  # what the agent wrote is the unprivileged sandbox user's on the host
        assert (workspace / ".probe_owner").stat().st_uid == sandbox.uid
        assert (workspace / ".probe_setuid_id").stat().st_mode & 0o6000 == 0


@needs_bwrap
def test_the_probe_sees_a_shared_network(server, sandbox, builtin_tasks, tmp_path) -> None:
    """Control: with the host's network shared (env.sandbox.network=true) the same probe reaches the
    listener, so the test above fails if isolation is lost."""
    tcp = HostListener()
    try:
        spec = {"gate": False, "tcp": [["127.0.0.1", tcp.port, "host listener"]],
                "listen_port": free_ports(1)[0], "listen_s": 3.0, "listen_token": uuid.uuid4().hex}
        _, lines, reached, log_text = run_probe(server, sandbox.replace(network=True), spec, builtin_tasks["nl2repo"][0], tmp_path / "runs")
    finally:
        tcp.close()
    attempts = {line["name"]: line for line in lines if line["probe"] == "attempt"}
    dialled = attempts[f"tcp 127.0.0.1:{spec['tcp'][0][1]} (host listener)"]
    assert dialled["escaped"] and "host-secret-banner" in dialled["detail"], log_text[-2000:]
    # ... and the host's dial reached the listener inside, which answered with its token
    assert reached and set(reached) == {str(spec["listen_port"])}, log_text[-2000:]
    assert attempts[f"listen on 127.0.0.1:{spec['listen_port']} for the host"]["escaped"]


def test_a_host_process_on_the_dialled_port_is_not_taken_for_the_probe() -> None:
    """The port a probe listens on was free when chosen; a host process that binds it meanwhile answers the
    host's dial too (another test's server, say). Only the probe's token counts as reaching inside; a dialler
    without a token for a port is refused, since an empty answer would match it."""
    other = HostListener()  # answers with its own banner, as any host server would answer something (or nothing)
    try:
        with HostDialer({other.port: uuid.uuid4().hex}) as dialer:
            deadline = time.monotonic() + 10
            while not dialer.other_listeners and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        other.close()
    assert dialer.reached == [] and dialer.other_listeners and "host-secret-banner" in dialer.other_listeners[0]
    with pytest.raises(ValueError, match="listen_token"):
        HostDialer({1: ""})


def test_process_sandbox_refuses_model_harnesses_without_opt_in(server, tmp_path) -> None:
    process = Sandbox(kind="process")
    config = HarnessConfig.from_mapping({"progress": False})
    with pytest.raises(SandboxError) as refused:
        make_runner(config, sandbox=process, run_dir=tmp_path, endpoint=ProxyEndpoint(server))
    message = str(refused.value)
    assert "env.sandbox.allow_unisolated=true" in message and "apt-get install -y bubblewrap" in message
    assert "harness 'reference'" in message
    with pytest.raises(SandboxError, match="allow_unisolated"):  # the sandbox itself refuses a forwarded service
        process.prepare(["true"], tmp_path, forward=Forward(str(tmp_path / "s.sock"), "127.0.0.1", 1))
    # Opted in by name: the runner is built; a harness without a model never needed it.
    make_runner(config, sandbox=process.replace(allow_unisolated=True), run_dir=tmp_path, endpoint=ProxyEndpoint(server))
    make_runner(HarnessConfig.from_mapping({"name": "oracle", "progress": False}), sandbox=process, run_dir=tmp_path)
    with pytest.raises(TypeError, match="allow_unisolated"):
        Sandbox.from_config({"kind": "process", "allow_unisolated": "yes"})


def test_bwrap_missing_means_refusal_too(server, tmp_path, monkeypatch) -> None:
    from gyre.envs import sandbox as sandbox_module

    monkeypatch.setattr(sandbox_module, "bwrap_problem", lambda *ids: "bwrap not found on PATH")
    with pytest.raises(SandboxError, match="bubblewrap is unavailable: bwrap not found on PATH"):
        make_runner(HarnessConfig.from_mapping({"progress": False}), sandbox=Sandbox(), run_dir=tmp_path, endpoint=ProxyEndpoint(server))


def test_main_job_refuses_the_process_sandbox(tmp_path) -> None:
    """The user-facing path: the main job stops at once, naming the key, instead of running agents loose."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "gyre.main", "+recipe=deepswe", "env.sandbox.kind=process", "cluster.cells=1",
         "trainer.total_steps=1", f"run_dir={tmp_path / 'run'}", "harness.progress=false", "tracking.backends=[jsonl]"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "RAY_AUTH_MODE": "disabled"}, check=False,
    )
    assert done.returncode != 0
    assert "env.sandbox.allow_unisolated=true" in done.stderr, done.stderr[-3000:]
