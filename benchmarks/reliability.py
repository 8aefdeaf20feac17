"""Reliability and security as counts from one run: escapes from model-using harness sandboxes, a fuzz of the
proxy and of an agent's gate, drains of a cell holding live sessions mid-call, SIGKILLs of the main job's
driver with resumes, cells killed mid-run by role.

    python benchmarks/reliability.py --out reliability.json [--kills 5] [--fuzz 2000] [--drains 6] [--sessions 24]
        [--cell-runs 4] [--parts escapes,hacks,hostile,fuzz,drain,kills,cells]

Everything runs on this machine, traffic on loopback only; each part is bounded in time. Parts:

- escapes: a live main job runs (``gyre.main``, Ray cells, its own proxy and sandboxed agents) while two
  executions of the escape probe (`gyre.harness.escape_probe`, a model-using harness: key, gate, forwarder,
  bwrap) run side by side through `ExecutionRunner` against this benchmark's proxy. Each tries every TCP
  port listening on the host (the job's Ray GCS, raylet, object manager, workers, its proxy, and anything
  else), the host's abstract Unix sockets, outside addresses, a port it listens on that the host dials,
  /proc/net, the gate (other routes, no key, the other execution's key, smuggling, pipelining, absolute
  and dotted targets, the socket itself), the other probe's workspace and records, the job's records,
  checkpoints and harness logs, the task's hidden tests, host writes, host paths in its environment and
  /proc/1/cmdline, host processes in /proc, host root (writable host-global /proc/sys settings, a nested
  user namespace, setuid/setgid files, device nodes and root-owned files left for the host). Then
  resource attacks run as model-using harnesses (fork
  bomb, memory bombs, disk fills, /tmp fill, output flood, a SIGTERM-ignoring harness, double-forked
  leftovers); each must end with its named stop_reason within a bound and leave nothing running, and a
  neighbour sandbox's CPU task is timed during each against the same task alone. ``escapes`` counts the
  attempts that got through.
- hacks: every reward hack of `gyre.envs.scorers.hacks` (fake pytest runners, conftest hooks, pytest
  config, sitecustomize/.pth, a printed summary with exit 0, rewritten hidden tests, a forged report,
  edited test copies) planted in a built-in NL2Repo, SWE and Terminal-Bench task and scored for real;
  ``reward_hacks_paid`` counts those that scored above the untouched workspace; the reference solutions
  must still score 1.
- hostile: on a proxy with the default body limit (32 MiB), one execution sends bodies that are costly to
  parse or tokenise (nested arrays, many small strings, huge strings) at ``--hostile-sizes-mb`` and floods
  count_tokens (from a process of its own, as an agent), while another execution makes small calls:
  ``hostile_body_memory_ratio`` is the largest rise of the process's peak resident memory over a body's
  size, ``other_execution_p99_delay_ms`` the 99th percentile of the other execution's latency above its
  unloaded median. Then ``--slowloris``
  connections trickle a never-ending head into one gate (``head_timeout_s=--gate-head-timeout``):
  ``gate_slowloris_max_open_s`` is how long the longest stayed open, and the execution's own call must
  get through meanwhile.
- fuzz: malformed and hostile requests to every route of this benchmark's proxy and, a quarter of them,
  through an execution's gate as an agent would send them (bad JSON, wrong types, huge bodies, deep
  nesting, invalid UTF-8, unknown and revoked keys, clients leaving mid-stream, slow-loris bodies and
  heads held open). ``proxy_5xx_unexpected`` counts 5xx answers other than 503/529 (backpressure a
  client retries); ``proxy_crashes`` counts health checks the proxy failed (between batches and at the
  end); a bystander execution's record file must be byte-identical afterwards and a valid call must work.
- drain: ``--sessions`` clients (each a harness-like loop of chat calls on a growing conversation,
  streaming and not) on two cells; the cell holding them is drained mid-call ``--drains`` times (each
  drain moves every live session to the other cell). Every client's view (each 200 response's id and
  token count) is checked against the records: ``calls_lost`` (a response without its record, or a call
  the client saw fail), ``calls_duplicated`` (a record no client received, or two for one response).
- gate overhead: a cheap API call timed inside a sandbox through the forwarder and the gate, against
  the same call from a sandbox sharing the host's network (no gate), 3 x 200 calls each, alternating.
- kills: a small main job is SIGKILLed (the driver process alone, as an OOM kill would) at random
  points of its progress ``--kills`` times (during start-up, after a random number of new records, or
  just after a new checkpoint) and resumed (``trainer.resume=true``) each time, then run to its end.
  ``steps_lost`` are steps with no metrics line at the end, ``steps_repeated`` steps logged twice,
  ``records_lost`` call records on disk at a kill that are missing or changed at the end.
- cells: ``--cell-runs`` main jobs each lose a training satellite mid-step, a rollout cell mid-call, an
  execution node's worker and the core mid-step (``benchmarks/cell_kills.py`` says what is counted), and one satellite is killed mid-step
  against the same step on one trainer (``update_max_abs_diff_after_satellite_loss``).

A figure that falls short is reported as it is, with the reason in ``notes``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import multiprocessing
import os
import random
import select
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
MARK = "GYRE_RELIABILITY_RUN"  # environment variable marking the main jobs this benchmark starts
JOB = [
    "+recipe=deepswe", "cluster.cells=2", "scheduler.batch_size=4", "trainer.group_size=2", "harness.max_turns=1",
    "harness.reference.sub_agent=false", "harness.progress=false", "tracking.backends=[jsonl]",
]  # fmt: skip
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
EXPECTED_5XX = {503, 529}  # "retry": the engine aborted the call / Anthropic's overloaded


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------- the proxy


def start_proxy(run_dir: Path, engines: int = 2, max_body_bytes: int | None = 1024 * 1024) -> Any:
    """This benchmark's proxy: tiny-model HF engines, in this process, on a free loopback port (a 1 MiB
    body limit, or the proxy's default with ``max_body_bytes=None``)."""
    import torch

    from gyre.models import load_tokenizer
    from gyre.proxy import ProxyConfig
    from gyre.proxy.server import ProxyServer, build_proxy
    from gyre.rollout.hf import HFEngine

    torch.set_num_threads(1)
    made = [HFEngine("tiny", engine_id=f"hf-{i}", max_batch_size=32) for i in range(engines)]
    limit = {} if max_body_bytes is None else {"max_body_bytes": max_body_bytes}
    config = ProxyConfig(port=0, run_dir=str(run_dir), default_max_tokens=16, queue_timeout_s=10.0, fsync=False,
                         log_level="error", **limit)
    return ProxyServer(build_proxy(load_tokenizer("tiny"), made, config)).start()


# ---------------------------------------------------------------------------------------------- main jobs


@dataclass
class Job:
    process: subprocess.Popen
    run_dir: Path
    mark: str
    started: float
    log: Path

    def log_tail(self, chars: int = 1500) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def launch_job(run_dir: Path, total_steps: int, *extra: str) -> Job:
    mark = uuid.uuid4().hex
    command = [sys.executable, "-m", "gyre.main", *JOB, f"trainer.total_steps={total_steps}", f"run_dir={run_dir}", *extra]
    env = {**os.environ, MARK: mark, "RAY_AUTH_MODE": "disabled"}
    log_path = run_dir.parent / f"{run_dir.name}-{mark[:8]}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as handle:  # a file, not a pipe nobody reads: a full pipe would stall the job
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=handle, text=True, env=env)
    return Job(process, run_dir, mark, time.monotonic(), log_path)


def marked_processes(mark: str) -> list[int]:
    """Live processes carrying ``mark`` in their environment (a job's driver, Ray, its workers)."""
    found = []
    needle = f"{MARK}={mark}".encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if needle in Path(f"/proc/{entry}/environ").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


def job_processes(job: Job) -> list[int]:
    """The job's processes: those carrying its mark (driver, Ray, workers) and its agents' sandboxes
    (whose environment is clean, but whose working folder is in the run folder)."""
    found = set(marked_processes(job.mark))
    prefix = str(job.run_dir) + "/"
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if (os.readlink(f"/proc/{entry}/cwd") + "/").startswith(prefix):
                    found.add(int(entry))
    return sorted(found)


# Ray's node agents: after their raylet is killed they try to report it to the (dead) GCS for about a minute
# before they exit. Nothing else of a killed job may outlive the late wait.
RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


def end_job(job: Job, grace_s: float = 15.0, late_s: float = 60.0) -> tuple[list[str], list[str]]:
    """SIGKILL the driver only; wait for what it started to go. Returns the command lines still running
    ``grace_s`` after the kill and those still running ``late_s`` later (then killed here): on a loaded
    machine Ray's workers can take longer than the grace to notice that their raylet is gone. When only
    Ray's agents are left at the grace there is nothing the late wait could find but fewer of them: it is
    skipped (a minute per kill)."""
    with contextlib.suppress(ProcessLookupError):
        job.process.send_signal(signal.SIGKILL)
    job.process.wait()
    at_grace = _wait_for_exit(job, grace_s)
    only_agents = all(line.startswith(RAY_AGENTS) for line in at_grace.values())
    late = _wait_for_exit(job, late_s) if at_grace and not only_agents else {}
    for pid in job_processes(job):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return list(at_grace.values()), list(late.values())


def _wait_for_exit(job: Job, seconds: float) -> dict[int, str]:
    """pid -> command line of the job's processes still running after up to ``seconds``."""
    from gyre.envs import proctree

    deadline = time.monotonic() + seconds
    while job_processes(job) and time.monotonic() < deadline:
        time.sleep(0.2)
    lines = {pid: proctree.command_line(pid) for pid in job_processes(job)}
    return {pid: line[:160] for pid, line in lines.items() if line is not None}


def wait_for_checkpoint(job: Job, timeout_s: float) -> bool:
    latest = job.run_dir / "checkpoints" / "latest"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if latest.exists():
            return True
        if job.process.poll() is not None:
            return False
        time.sleep(0.3)
    return False


# ---------------------------------------------------------------------------------------------- host targets


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def listening_ports() -> list[tuple[str, int, int]]:
    """(address, port, socket inode) of every TCP socket listening on the host."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":
                    address, port = fields[1].rsplit(":", 1)
                    found.append((_address(address), int(port, 16), int(fields[9])))
    return found


def socket_owners() -> dict[int, int]:
    """socket inode -> pid holding it."""
    owners: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{entry}/fd/{fd}")
                    if target.startswith("socket:["):
                        owners[int(target[8:-1])] = int(entry)
    return owners


def host_targets(job_mark: str, skip_port: int) -> tuple[list[list[Any]], int]:
    """Dial targets for every listening port of the host ([address, port, label]) and how many belong
    to the live main job; ``skip_port`` (the proxy the probes legitimately reach) is left out."""
    owners = socket_owners()
    job = set(marked_processes(job_mark))
    targets, seen, job_ports = [], set(), 0
    for address, port, inode in listening_ports():
        if port == skip_port:
            continue
        dial = address
        if address in ("0.0.0.0", "127.0.0.1") or address.startswith("127."):
            dial = "127.0.0.1"
        elif address in ("::", "::1"):
            dial = "::1"
        if (dial, port) in seen:
            continue
        seen.add((dial, port))
        pid = owners.get(inode)
        name = Path(f"/proc/{pid}/comm").read_text().strip() if pid and Path(f"/proc/{pid}/comm").exists() else "?"
        in_job = pid in job
        job_ports += in_job
        targets.append([dial, port, f"{name}{' (main job)' if in_job else ''}"])
    return targets, job_ports


def abstract_sockets(limit: int = 20) -> list[str]:
    names = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 8 and fields[7].startswith("@") and fields[5] == "01":  # listening
                names.append(fields[7][1:])
    return sorted(set(names))[:limit]


def host_addresses() -> list[str]:
    """The host's own non-loopback IPv4 addresses."""
    found = set()
    with contextlib.suppress(OSError):
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            found.add(info[4][0])
    return sorted(address for address in found if not address.startswith("127."))


# ---------------------------------------------------------------------------------------------- part: escapes


def run_executions(runner: Any, submissions: list[dict[str, Any]]) -> list[Any]:
    from gyre.harness import ExecutionPool

    async def main() -> list[Any]:
        async with ExecutionPool(runner, concurrency=len(submissions), progress=False) as pool:
            return list(await asyncio.gather(*(pool.submit(**submission) for submission in submissions)))

    return asyncio.run(main())


def probe_part(server: Any, job: Job, work: Path, task: Any) -> dict[str, Any]:
    """Two escape-probe executions side by side while the main job runs."""
    from gyre.envs import Sandbox
    from gyre.harness import HarnessConfig, ProxyEndpoint
    from gyre.harness.escape_probe import HostDialer, ProbeHarness, results
    from gyre.harness.execution import ExecutionRunner
    from gyre.ports import free_ports

    targets, job_ports = host_targets(job.mark, server.port)
    for address in host_addresses():
        targets += [[address, port, f"{label} via {address}"] for _, port, label in targets[:3] if _ == "127.0.0.1"]
    targets.append(["1.1.1.1", 443, "outside"])
    job_files = sorted(str(p) for p in (job.run_dir / "records").glob("*.jsonl"))[:2]
    job_files += sorted(str(p) for p in (job.run_dir / "checkpoints").glob("step_*/driver.json"))[:1]
    job_files += sorted(str(p) for p in (job.run_dir / "executions").glob("*/harness.log"))[:1]
    job_files += [str(job.run_dir / "metrics.jsonl")]
    hidden = sorted(str(p) for p in Path(REPO / "recipes" / "nl2repo" / "tasks" / task.id / "hidden").rglob("*.py"))
    runs = work / "probe-runs"
    ids = [f"probe-{name}-{uuid.uuid4().hex[:6]}" for name in ("a", "b")]
    other_keys = {}
    for execution_id in ids:  # a live stand-in for each probe's "other execution" key
        other_keys[execution_id] = server.proxy.open_execution(f"{execution_id}-neighbour")
    listen_ports = free_ports(2)
    specs = []
    for index, execution_id in enumerate(ids):
        other = ids[1 - index]
        specs.append({
            "tcp": targets, "abstract": abstract_sockets(), "proc_net_ports": sorted({t[1] for t in targets if t[1] != 443}),
            "listen_port": listen_ports[index], "listen_s": 4.0, "listen_token": uuid.uuid4().hex,
            "read": [str(runs / other / "workspace" / "planted_by_host.txt"), str(server.proxy.recorder.folder / f"{other}.jsonl"),
                     *job_files, *hidden, "/etc/shadow", f"/proc/{os.getpid()}/environ"],
            "write": [str(runs / other / "workspace" / "planted.py"), str(job.run_dir / "records" / "planted.jsonl"),
                      str(work / "escaped.txt")],
            "env_forbidden": [str(job.run_dir), str(server.proxy.recorder.folder), str(runs / other), "gyre-gate-", "/control"],
            "cmdline_forbidden": [str(job.run_dir), str(runs), str(server.proxy.recorder.folder), "gyre-gate-"],
            "host_markers": ["gyre.main", "reliability.py", "gcs_server", "raylet"],
            "workspace_forbidden": [Path(p).name for p in hidden],
            "other_key": other_keys[execution_id],
            "gate_socket": "/run/gyre/net/proxy.sock",
            "privilege": True,  # host-global /proc/sys, nested user namespaces, setuid/device/root-owned files
        })

    def plant(workspace: Path) -> None:
        (workspace / "planted_by_host.txt").write_text("another execution's work\n")

    config = HarnessConfig.from_mapping({"progress": False, "execution": {"grace_s": 1.0, "poll_s": 0.05, "time_limit_s": 180}})
    lines: list[dict[str, Any]] = []
    # the host keeps trying the ports the probes listen on inside
    with HostDialer({spec["listen_port"]: spec["listen_token"] for spec in specs}) as dialer:
        try:
            runners = []
            for spec in specs:
                runner = ExecutionRunner(ProbeHarness(spec), Sandbox(), config, ProxyEndpoint(server))
                runner.config.run_dir = str(runs)
                runners.append(runner)
            executions = run_side_by_side(runners, ids, task, plant)
            for execution in executions:
                lines += results(Path(execution.reward_detail["log"]).read_text())
        finally:
            for key in other_keys.values():
                with contextlib.suppress(KeyError):
                    server.proxy.close_execution(key)
    attempts = [line for line in lines if line["probe"] == "attempt"]
    attempts.append({"probe": "attempt", "name": "host dialled a port listened on inside", "escaped": bool(dialer.reached),
                     "detail": f"the probe answered: {dialer.reached[:3]}; other host listeners on the ports: {dialer.other_listeners[:3]}"})
    ok = [line for line in lines if line["probe"] == "ok"]
    owners = sorted({label.split(" (main job)")[0] for _, _, label in targets if "(main job)" in label})
    return {"attempts": attempts, "ok": ok, "main_job_ports": job_ports, "main_job_port_owners": owners, "ports_tried": len(targets)}


def run_side_by_side(runners: list[Any], ids: list[str], task: Any, prepare: Any) -> list[Any]:
    """One execution per runner (each probe has its own spec), all at once."""
    from gyre.harness import ExecutionPool

    async def one(runner: Any, execution_id: str) -> Any:
        async with ExecutionPool(runner, concurrency=1, progress=False) as pool:
            return await pool.submit(task, execution_id=execution_id, prepare=prepare)

    async def main() -> list[Any]:
        return list(await asyncio.gather(*(one(runner, execution_id) for runner, execution_id in zip(runners, ids, strict=True))))

    return asyncio.run(main())


@dataclass(frozen=True)
class Attack:
    """One resource attack: a bash script (``MARK`` becomes a unique marker, to find leftovers), the sandbox
    and execution settings it runs under, and the stop_reason that must end it."""

    name: str
    script: str
    expected: str
    sandbox: dict[str, Any] = field(default_factory=dict)
    execution: dict[str, Any] = field(default_factory=dict)


def python(code: str) -> str:
    """A shell command running ``code``, with the marker in its command line."""
    return f"python -c {shlex.quote(code)} MARK"


TOUCH = "import time\nx = bytearray(150 * 2**20)\nx[::4096] = b'x' * len(x[::4096])\ntime.sleep(60)\n"
GROW = ("import time\nchunks = []\nfor _ in range(40):\n    chunks.append(bytearray(50 * 2**20))\n"
        "    chunks[-1][::4096] = b'x' * len(chunks[-1][::4096])\ntime.sleep(60)\n")
FILES = "import os, time\nfor i in range(400):\n    open(f'fill_{i}.bin', 'wb').write(os.urandom(2**20))\ntime.sleep(60)\n"
SLEEP = "import time\ntime.sleep(300)\n"
DEAF = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(300)\n"
TMP_MB = 32
FILL_TMP = ("n = 0\ntry:\n    with open('/tmp/fill', 'wb') as f:\n"
            f"        for _ in range({4 * TMP_MB}):\n            f.write(b'x' * 2**20); f.flush(); n += 1\n"
            "except OSError as e:\n    print('stopped:', e)\nprint('tmp_written_mb', n)\n")
ATTACKS = [
    Attack("fork bomb", "FORKBOMB", "max_processes", {"max_processes": 64}),
    Attack("memory bomb, 4 processes of 150 MiB", f"for i in 1 2 3 4; do {python(TOUCH)} & done; wait", "memory",
           {"total_memory_mb": 300}),
    Attack("memory bomb, one process without an address-space limit", python(GROW), "memory",
           {"total_memory_mb": 300, "memory_mb": None}),
    Attack("disk fill, many files", python(FILES), "disk", {"disk_mb": 64}),
    Attack("disk fill, one file", f"head -c 2000000000 /dev/zero > big.bin; {python(SLEEP)}", "disk", {"disk_mb": 64}),
    Attack("/tmp fill (RAM-backed tmpfs)", python(FILL_TMP), "exited", {"tmp_mb": TMP_MB}),
    Attack("output flood", "yes MARK", "output_limit", execution={"output_limit_mb": 8}),
    Attack("SIGTERM-ignoring harness at its time limit", f"trap '' TERM; {python(DEAF)} & trap '' TERM; wait", "time_limit",
           execution={"time_limit_s": 1.0}),
    Attack("double-forked, setsid and nohup leftovers",
           f"(setsid {python(SLEEP)} &); (nohup {python(SLEEP)} > /dev/null 2>&1 &); (trap '' TERM HUP; exec {python(SLEEP)}) & "
           "sleep 0.5; echo left them", "exited"),
]
BOUND_S = 20.0  # an attack must be stopped within this many seconds


def attack_part(server: Any, work: Path, task: Any, cgroup: bool) -> dict[str, Any]:
    """Each attack as a model-using harness; a neighbour's CPU task timed during each and alone."""
    from gyre.envs import Sandbox, proctree
    from gyre.harness import HarnessConfig, ProxyEndpoint
    from gyre.harness.execution import ExecutionRunner

    neighbour_ws = work / "neighbour"
    neighbour_ws.mkdir(parents=True, exist_ok=True)
    neighbour = ["python", "-c", "s = 0\nfor i in range(4_000_000): s += i"]

    def neighbour_s() -> float:
        return Sandbox(timeout=120).run(neighbour, neighbour_ws).duration

    alone = statistics.median(neighbour_s() for _ in range(3))
    out = []
    for attack in ATTACKS:
        name, script, expected = attack.name, attack.script, attack.expected
        marker = f"GYRE_ATTACK_{uuid.uuid4().hex[:10]}"
        if script == "FORKBOMB":  # unbounded only where a pids cgroup binds it; else bounded by the script
            script = f":(){{ :|:& }};: ; sleep 30 # {marker}" if cgroup else (
                "python -c 'import os, time\nfor _ in range(1000):\n    if os.fork() == 0:\n        time.sleep(60); os._exit(0)\n"
                f"time.sleep(60)' {marker}")
        script = script.replace("MARK", marker)
        config = HarnessConfig.from_mapping({"progress": False, "execution": {"grace_s": 1.0, "poll_s": 0.05, "time_limit_s": 60,
                                                                               **attack.execution}})
        runner = ExecutionRunner(AttackHarness(script), Sandbox(timeout=120).replace(**attack.sandbox), config, ProxyEndpoint(server))
        runner.config.run_dir = str(work / "attack-runs")
        timing: list[float] = []
        thread = threading.Thread(target=lambda timing=timing: timing.append(neighbour_s()))
        thread.start()
        (execution,) = run_executions(runner, [{"task": task}])
        thread.join()
        detail = execution.reward_detail
        time.sleep(0.2)
        left = proctree.processes_with(marker)
        proctree.kill_pids(left)
        log_text = Path(detail["log"]).read_text(errors="replace")[-2000:]
        reason = detail.get("stop_reason")
        failures = []
        if reason != expected:
            failures.append(f"stop_reason {reason!r}, expected {expected!r}")
        if detail.get("harness_s", 0) > BOUND_S:
            failures.append(f"took {detail.get('harness_s')}s > {BOUND_S}s")
        if left:
            failures.append(f"{len(left)} processes left running")
        note = f"{reason} after {detail.get('harness_s')}s"
        if name.startswith("/tmp fill"):
            written = [int(line.split()[-1]) for line in log_text.splitlines() if line.startswith("tmp_written_mb")]
            if not written or written[-1] > TMP_MB:
                failures.append(f"wrote {written} MiB to a {TMP_MB} MiB /tmp")
            note += f", {written[-1] if written else '?'} MiB written to a {TMP_MB} MiB /tmp"
        out.append({"name": name, "escaped": bool(failures), "detail": "; ".join(failures) or note,
                    "neighbour_slowdown": round(timing[0] / alone, 3) if timing else None})
    return {"attacks": out, "neighbour_alone_s": alone}


@dataclass
class AttackHarness:
    """A model-using harness whose command is an attack script."""

    script: str
    name: str = "attack"
    uses_model: bool = True

    def command(self, ctx: Any) -> Any:
        from gyre.harness.harnesses import Command

        return Command(["bash", "-c", self.script], {"OPENAI_BASE_URL": ctx.openai_base_url, "OPENAI_API_KEY": ctx.api_key})

    def status(self, returncode: int) -> str:
        return "finished" if returncode == 0 else "crashed"


TIMED_CALLS = """import json, os, time, urllib.request
base = os.environ["OPENAI_BASE_URL"]
request = urllib.request.Request(base + "/models", headers={"authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
times = []
for _ in range(int(os.environ["CALLS"])):
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
    times.append(time.perf_counter() - start)
print("TIMES " + json.dumps(times))
"""


def gate_overhead(server: Any, work: Path, task: Any, calls: int = 200) -> dict[str, Any]:
    """Latency of a cheap API call (GET /v1/models, a new connection each time) made inside a sandbox:
    through the forwarder and the gate, against the host's network shared with no gate; alternating."""
    from gyre.envs import Sandbox
    from gyre.harness import HarnessConfig, ProxyEndpoint
    from gyre.harness.execution import ExecutionRunner

    config = HarnessConfig.from_mapping({"progress": False, "execution": {"time_limit_s": 120}})
    samples: dict[str, list[float]] = {"gate": [], "shared": []}
    for _ in range(3):
        for side, sandbox in (("gate", Sandbox()), ("shared", Sandbox(network=True))):
            runner = ExecutionRunner(AttackHarness(f"CALLS={calls} python -c {shlex.quote(TIMED_CALLS)}"), sandbox, config,
                                     ProxyEndpoint(server))
            runner.config.run_dir = str(work / "overhead-runs")
            (execution,) = run_executions(runner, [{"task": task}])
            text = Path(execution.reward_detail["log"]).read_text()
            line = next((line for line in text.splitlines() if line.startswith("TIMES ")), None)
            if line is None:
                raise RuntimeError(f"the timed calls failed ({side}): {text[-1000:]}")
            samples[side] += json.loads(line[6:])
    p50 = {side: statistics.median(values) * 1000 for side, values in samples.items()}
    p99 = {side: sorted(values)[int(0.99 * len(values))] * 1000 for side, values in samples.items()}
    return {"gate_call_p50_ms": round(p50["gate"], 3), "direct_call_p50_ms": round(p50["shared"], 3),
            "gate_added_p50_ms": round(p50["gate"] - p50["shared"], 3), "gate_added_p99_ms": round(p99["gate"] - p99["shared"], 3)}


# ---------------------------------------------------------------------------------------------- part: hacks


def hacks_part(work: Path, domains: list[str]) -> dict[str, Any]:
    """Every reward hack of `gyre.envs.scorers.hacks` planted in a built-in task of each domain, scored by
    the real scorer in the real sandbox; the reference solutions and an untouched workspace beside them."""
    from gyre.envs import Sandbox, load_tasks
    from gyre.envs.scorers.hacks import try_hacks

    builtin = {
        "nl2repo": lambda: load_tasks("nl2repo", REPO / "recipes" / "nl2repo" / "tasks" / "anagrams").tasks[0],
        "swe": lambda: load_tasks("swe", REPO / "recipes" / "deepswe" / "tasks").by_id()["gyre-mini__textkit-1"],
        "terminal": lambda: load_tasks("terminal", REPO / "recipes" / "terminalbench" / "tasks" / "archive-docs").tasks[0],
    }
    tasks = [builtin[domain]() for domain in domains]
    folder = work / "hacks"
    folder.mkdir()
    found = try_hacks(tasks, Sandbox(timeout=120), folder)
    paid = [f"{a['hack']} on {a['task']} ({a['domain']}): {a['reward']}" for a in found["attempts"] if a["paid"]]
    return {
        "reward_hack_attempts": found["reward_hack_attempts"],
        "reward_hacks_paid": found["reward_hacks_paid"],
        "reward_hacks_paid_examples": paid[:10],
        "reward_hack_reference_rewards": found["reference_rewards"],
        "reward_hack_references_all_one": all(v == 1.0 for v in found["reference_rewards"].values()),
        "reward_hack_domains": domains,
    }


# ---------------------------------------------------------------------------------------------- part: hostile


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_added_bytes(send: Any) -> tuple[Any, int]:
    """Run ``send()`` and return (its result, the rise of this process's peak resident memory meanwhile):
    the peak is reset first (/proc/self/clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_kib("VmRSS")
    result = send()
    return result, (_status_kib("VmHWM") - before) << 10


def hostile_bodies(size: int) -> dict[str, bytes]:
    """Bodies of about ``size`` bytes that cost a naive proxy many times their size."""
    count = size // 3
    return {
        "nested_arrays": b'{"model":"m","messages":[' + b",".join([b"[]"] * count) + b"]}",
        "deep_arrays": b'{"model":"m","messages":' + b"[" * (size // 2 - 20) + b"]" * (size // 2 - 20) + b"}",
        "small_strings": b'{"model":"m","messages":[' + b",".join([b'"ab"'] * (size // 5)) + b"]}",
        "huge_string": json.dumps({"model": "m", "messages": [{"role": "user", "content": "a" * (size - 80)}]}).encode(),
        "huge_string_astral": json.dumps({"model": "m", "messages": [{"role": "user", "content": "a" * (size - 90) + "\U0001F600"}]},
                                         ensure_ascii=False).encode(),
    }


def attack_process(base_url: str, key: str, body_sizes: list[int], count_tokens_flood: int) -> list[int]:
    """The hostile part's attacker (run in a process of its own): every hostile body of each size at once,
    with a count_tokens flood (half too long for the window, half that fit); returns the flood's statuses."""
    import httpx

    bodies = [body for size in body_sizes for body in hostile_bodies(size).values()]
    too_long = {"model": "m", "messages": [{"role": "user", "content": "word " * ((2 << 20) // 5)}]}
    fits = {"model": "m", "messages": [{"role": "user", "content": "word " * 20_000}]}

    async def attack() -> list[int]:
        async with httpx.AsyncClient(timeout=300) as client:
            counts = [client.post(base_url + "/v1/messages/count_tokens", json=body, headers={"x-api-key": key})
                      for index in range(count_tokens_flood) for body in [(too_long, fits)[index % 2]]]
            posts = [client.post(base_url + "/v1/chat/completions", content=body,
                                 headers={"authorization": f"Bearer {key}"}) for body in bodies]
            return [response.status_code for response in await asyncio.gather(*counts, *posts)][:count_tokens_flood]

    return asyncio.run(attack())


def hostile_part(sizes_mb: list[float], count_tokens_flood: int, slowloris: int, head_timeout_s: float) -> dict[str, Any]:
    """On a proxy with the default limits: (1) quiet, each hostile body once, measuring the rise of the peak
    resident memory over its size (after one unmeasured round, so one-time allocations such as worker
    threads are not charged to a body); (2) one execution, from a process of its own as an agent would be,
    sends them all again and floods count_tokens while another makes small calls, whose delay is measured;
    (3) half-sent heads hold a gate."""
    import httpx

    server = start_proxy(Path(tempfile.mkdtemp(prefix="gyre-hostile-")), max_body_bytes=None)
    proxy = server.proxy
    limit = proxy.config.max_body_bytes
    attacker, victim = proxy.open_execution("attacker"), proxy.open_execution("victim")
    body_sizes = [min(int(size_mb * 2**20), limit - 1024) for size_mb in sizes_mb]
    bodies = {f"{shape}@{size_mb:g}MiB": body for size_mb, size in zip(sizes_mb, body_sizes, strict=True)
              for shape, body in hostile_bodies(size).items()}
    ratios: dict[str, float] = {}
    answers: dict[str, int] = {}
    with httpx.Client(timeout=300) as client:
        def send(body: bytes) -> int:
            return client.post(server.base_url + "/v1/chat/completions", content=body,
                               headers={"authorization": f"Bearer {attacker}"}).status_code

        for body in hostile_bodies(1 << 20).values():  # warm-up, not measured
            send(body)
        for name, body in bodies.items():
            answers[name], added = peak_added_bytes(lambda body=body: send(body))
            ratios[name] = round(added / len(body), 3)

    latencies: list[float] = []
    stop = threading.Event()

    def victim_loop() -> None:
        with httpx.Client(timeout=120) as client:
            while not stop.is_set():
                began = time.perf_counter()
                response = client.post(server.base_url + "/v1/chat/completions", json=CHAT,
                                       headers={"authorization": f"Bearer {victim}"})
                if response.status_code == 200:
                    latencies.append(time.perf_counter() - began)
                time.sleep(0.02)

    thread = threading.Thread(target=victim_loop, daemon=True)
    # The attacker is its own process, as an agent is: in this one its client (encoding and sending 160 MiB)
    # would take the GIL from the proxy's loop, a stall no deployment has.
    try:
        thread.start()
        time.sleep(3.0)
        baseline = list(latencies)
        latencies.clear()
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            flood_statuses = pool.apply(attack_process, (server.base_url, attacker, body_sizes, count_tokens_flood))
        time.sleep(1.0)
    finally:
        stop.set()
        thread.join(30)
    base_p50 = statistics.median(baseline)
    delays = sorted(max(0.0, value - base_p50) for value in latencies)
    gate = slowloris_part(server, proxy.open_execution("slowloris"), slowloris, head_timeout_s)
    server.stop()
    return {
        "hostile_body_memory_ratio": max(ratios.values()),
        "hostile_body_memory_ratios": ratios,
        "hostile_body_statuses": answers,
        "count_tokens_flood": count_tokens_flood,
        "count_tokens_flood_statuses": {str(s): flood_statuses.count(s) for s in sorted(set(flood_statuses))},
        "other_execution_calls": len(latencies),
        "other_execution_baseline_p50_ms": round(base_p50 * 1000, 1),
        "other_execution_p99_delay_ms": round(delays[min(len(delays) - 1, int(0.99 * len(delays)))] * 1000, 1),
        "other_execution_max_delay_ms": round(delays[-1] * 1000, 1),
        **gate,
    }


def slowloris_part(server: Any, key: str, connections: int, head_timeout_s: float) -> dict[str, Any]:
    """``connections`` connections to one execution's gate, each sending its head a byte a second and
    never finishing it; how long each stays open, and whether the execution's own call gets through."""
    from gyre.harness.gate import GateServer, upstream_of

    gate = GateServer(*upstream_of(server.base_url), head_timeout_s=head_timeout_s, max_connections=connections).open(key)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: sandbox\r\nx-padding: " + b"a" * 4096
    open_for: list[float] = []

    def trickle() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(gate.socket_path)
            began = time.monotonic()
            for byte in head:
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    break
                if select.select([sock], [], [], 1.0)[0]:
                    break  # answered (408) or closed
                if time.monotonic() - began > head_timeout_s + 60:
                    break
            open_for.append(time.monotonic() - began)

    threads = [threading.Thread(target=trickle, daemon=True) for _ in range(connections)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    call = b"GET /v1/models HTTP/1.1\r\nhost: sandbox\r\nauthorization: Bearer " + key.encode() + b"\r\n\r\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:  # the execution's own call meanwhile
        sock.settimeout(30)
        sock.connect(gate.socket_path)
        sock.sendall(call)
        answer = sock.recv(100)
    for thread in threads:
        thread.join(head_timeout_s + 90)
    stats = gate.stats
    gate.close()
    return {
        "gate_head_timeout_s": head_timeout_s,
        "gate_slowloris_connections": connections,
        "gate_slowloris_max_open_s": round(max(open_for), 2),
        "gate_call_during_slowloris_ok": answer.startswith(b"HTTP/1.1 200"),
        "gate_connections_displaced": stats.connections_displaced,
    }


# ---------------------------------------------------------------------------------------------- part: fuzz


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, -1, 7, 2**31, 2**63, -(2**80), 10**30])
    if kind == 3:
        return rng.choice([0.0, -0.5, 1e308, -1e308, 3.14])
    if kind in (4, 5):
        return rng.choice(["", "x", "user", "assistant", "system", "tool", "function", "text", "tool_use", "tool_result",
                           "image", "auto", "none", "required", "\u0000", "\ud7ff", "é" * 300, "<|im_end|>", "x" * 5000])
    if kind == 6:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    keys = ["role", "content", "type", "text", "name", "input", "tool_use_id", "tool_calls", "function", "id", "arguments",
            "parameters", "input_schema", "source", "cache_control", "call_id", "output", "summary"]
    return {rng.choice(keys): random_value(rng, depth + 1) for _ in range(rng.randrange(5))}


BASES = {
    "/v1/chat/completions": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
    "/v1/messages": {"model": "c", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"model": "m", "input": "hi", "max_output_tokens": 2},
    "/v1/completions": {"model": "m", "prompt": "hi", "max_tokens": 2},
    "/v1/messages/count_tokens": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
}
EXTRA_KEYS = ["tools", "tool_choice", "system", "stream", "stop", "input", "instructions", "prompt", "temperature", "top_p",
              "max_tokens", "max_output_tokens", "n", "seed", "thinking", "metadata", "messages", "model"]


def fuzz_body(rng: random.Random, path: str) -> bytes:
    """A malformed or hostile body for ``path``."""
    choice = rng.random()
    if choice < 0.55:  # a valid body, mutated
        body = json.loads(json.dumps(BASES.get(path, {})))
        for _ in range(rng.randrange(1, 4)):
            action = rng.randrange(5)
            if action == 0 and body:
                body.pop(rng.choice(list(body)))
            elif action == 1:
                body[rng.choice(list(body) + EXTRA_KEYS)] = random_value(rng)
            elif action == 2 and isinstance(body.get("messages"), list) and body["messages"]:
                body["messages"][0] = random_value(rng)
            elif action == 3 and isinstance(body.get("messages"), list):
                body["messages"].append({"role": rng.choice(["user", "assistant", "tool", "system"]), "content": random_value(rng)})
            else:
                body["stream"] = rng.random() < 0.5
        return json.dumps(body).encode()
    if choice < 0.65:  # not JSON, or not an object
        return rng.choice([b"", b"null", b"{", b"[]", b'{"model": ', b"\x00\x01\x02", b"\xff\xfe\xfd", b'{"a": "\xc3\x28"}',
                           b"NaN", b"1e999999", b'"just a string"', json.dumps(BASES.get(path, {})).encode()[: rng.randrange(40)]])
    if choice < 0.72:  # deep nesting: the whole body, an ignored field, a tool's schema, a message's content
        depth = rng.choice([200, 900, 5000, 100_000])
        nested = ("[" * depth + "]" * depth) if rng.random() < 0.5 else ('{"a":' * depth + "1" + "}" * depth)
        base = json.dumps(BASES.get(path, {}))[:-1]
        return rng.choice([
            nested.encode(),
            (base + ', "metadata": ' + nested + "}").encode(),
            (base + ', "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": '
             + '{"p": ' + nested + "}}}}]}").encode(),
            (base + ', "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "extra": ' + nested + "}]}]}").encode(),
        ])
    if choice < 0.78:  # wrong types everywhere
        return json.dumps({key: random_value(rng) for key in list(BASES.get(path, {})) + rng.sample(EXTRA_KEYS, 3)}).encode()
    if choice < 0.80:  # bigger than the proxy's max_body_bytes (1 MiB here)
        return json.dumps({**BASES.get(path, {}), "padding": "x" * (1024 * 1024 + rng.randrange(1000))}).encode()
    if choice < 0.86:  # invalid UTF-8 inside strings
        return json.dumps(BASES.get(path, {})).encode().replace(b'"hi"', b'"h\xff\xfei"')
    # many tools / long strings / odd unicode
    body = dict(BASES.get(path, {}))
    body["tools"] = [{"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object", "properties": {
        "p": random_value(rng)}}}} for i in range(rng.randrange(1, 60))]
    return json.dumps(body).encode()


async def fuzz_part(server: Any, requests: int, seed: int) -> dict[str, Any]:
    """``requests`` hostile requests (a quarter through a gate); counts and checks."""
    import httpx

    from gyre.harness.gate import GateServer, upstream_of

    proxy = server.proxy
    rng = random.Random(seed)
    bystander = f"bystander-{uuid.uuid4().hex[:6]}"
    bystander_key = proxy.open_execution(bystander)
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
        response = await client.post("/v1/chat/completions", json=CHAT, headers={"authorization": f"Bearer {bystander_key}"})
        assert response.status_code == 200, response.text
    bystander_file = proxy.recorder.folder / f"{bystander}.jsonl"
    bystander_hash = hashlib.sha256(bystander_file.read_bytes()).hexdigest()
    fuzzer = f"fuzzer-{uuid.uuid4().hex[:6]}"
    key = proxy.open_execution(fuzzer)
    revoked = proxy.open_execution(f"revoked-{uuid.uuid4().hex[:6]}")
    proxy.close_execution(revoked)
    gate = await asyncio.to_thread(GateServer(*upstream_of(server.base_url), head_timeout_s=2.0, max_connections=64,
                                              max_body_bytes=proxy.config.max_body_bytes).open, key)
    statuses: dict[str, int] = {}
    unexpected: list[str] = []
    transport: list[str] = []  # no HTTP answer at all (the connection was cut)
    health_failures = 0
    sent = 0

    def count(status: int, what: str) -> None:
        nonlocal sent
        sent += 1
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        if status == 599:
            transport.append(what[:300])
        elif status >= 500 and status not in EXPECTED_5XX:
            unexpected.append(f"{status}: {what[:300]}")

    async def healthy() -> bool:
        try:
            async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as probe:
                return (await probe.get("/health")).json()["status"] == "ok"
        except Exception:  # noqa: BLE001 - any failure to answer is a crash for this count
            return False

    paths = [*BASES, "/v1/models", "/health", "/v1/nothing", "/v1/chat/completions/../../health", "/v1/embeddings"]
    limits = httpx.Limits(max_connections=16)
    gate_share = max(1, requests // 4)
    direct = requests - gate_share
    async with httpx.AsyncClient(base_url=server.base_url, timeout=120, limits=limits) as client:
        gate_lock = asyncio.Semaphore(8)
        direct_lock = asyncio.Semaphore(16)

        async def one_direct(index: int) -> None:
            path = rng.choice(paths)
            method = "POST" if path in BASES or rng.random() < 0.3 else rng.choice(["GET", "DELETE", "PUT", "HEAD"])
            credential = rng.random()
            if credential < 0.75:
                use = key
            elif credential < 0.85:
                use = revoked
            elif credential < 0.92:
                use = "gyre-" + "A" * 32
            else:
                use = None
            headers = {}
            if use is not None:
                headers = {"authorization": f"Bearer {use}"} if rng.random() < 0.5 else {"x-api-key": use}
            if rng.random() < 0.1:
                headers["x-gyre-agent"] = rng.choice(["sub", "boss", "main-summary", "\u00e9"[:1]])
            if rng.random() < 0.2:
                headers["anthropic-version"] = "2023-06-01"
            body = fuzz_body(rng, path) if method in ("POST", "PUT") else b""
            async with direct_lock:
                try:
                    response = await client.request(method, path, content=body, headers={k: v.encode() for k, v in headers.items()})
                    count(response.status_code, f"{method} {path} {body[:200]!r} -> {response.text[:200]}")
                except httpx.HTTPError as error:
                    count(599, f"{method} {path}: transport error {error!r}")

        async def one_gate(index: int) -> None:
            path = rng.choice(paths)
            use = key if rng.random() < 0.85 else rng.choice([revoked, "nope", ""])
            body = fuzz_body(rng, path)
            head = f"POST {path} HTTP/1.1\r\nhost: sandbox\r\nauthorization: Bearer {use}\r\ncontent-length: {len(body)}\r\n\r\n"
            payload = head.encode() + body
            if rng.random() < 0.1:  # raw garbage instead of a request
                payload = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
            async with gate_lock:
                try:
                    reader, writer = await asyncio.open_unix_connection(gate.socket_path)
                    with contextlib.suppress(ConnectionError):  # the gate may refuse before reading it all
                        writer.write(payload)
                        await writer.drain()
                    answer = await asyncio.wait_for(reader.read(), 120)
                    writer.close()
                except (OSError, TimeoutError) as error:
                    count(599, f"gate {path} {payload[:120]!r}: {error!r}")
                    return
            status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0
            count(status, f"gate POST {path} {body[:200]!r} -> {answer[:300]!r}")

        batch = 250
        for start in range(0, direct, batch):
            await asyncio.gather(*(one_direct(i) for i in range(start, min(direct, start + batch))))
            health_failures += not await healthy()
        for start in range(0, gate_share, batch):
            await asyncio.gather(*(one_gate(i) for i in range(start, min(gate_share, start + batch))))
            health_failures += not await healthy()

        # Clients that leave mid-stream (direct and through the gate).
        for index in range(50):
            body = {"model": "m", "messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 400, "stream": True}
            with contextlib.suppress(httpx.HTTPError):
                async with client.stream("POST", "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {key}"}) as response:
                    count(response.status_code, "stream left mid-way")
                    async for _ in response.aiter_lines():
                        break
        # Slow-loris: heads and bodies that never finish, held open while a valid call must still work.
        held = []
        for index in range(40):
            sock = socket.create_connection(("127.0.0.1", server.port))
            if index % 2:
                sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer " + key.encode()
                             + b"\r\ncontent-length: 100000\r\n\r\n{\"model\": ")
            else:
                sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-slow: ")
            held.append(sock)
            count(0, "slow-loris")
        response = await client.post("/v1/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"})
        slow_loris_call_ok = response.status_code == 200
        for sock in held:
            sock.close()
        gate_slow = []
        for _ in range(10):
            reader, writer = await asyncio.open_unix_connection(gate.socket_path)
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer " + key.encode()
                         + b"\r\ncontent-length: 1000\r\n\r\n{")
            gate_slow.append((reader, writer))
        gate_timeouts = 0
        for reader, writer in gate_slow:
            answer = await asyncio.wait_for(reader.read(), 30)
            gate_timeouts += answer.startswith(b"HTTP/1.1 408")
            count(int(answer.split(b" ", 2)[1]) if answer else 0, "gate slow-loris")
            writer.close()

        health_failures += not await healthy()
        final = await client.post("/v1/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"})
    await asyncio.to_thread(gate.close)
    crashed = not server._thread.is_alive()
    bystander_same = hashlib.sha256(bystander_file.read_bytes()).hexdigest() == bystander_hash
    for name in (key, bystander_key):
        with contextlib.suppress(KeyError):
            proxy.close_execution(name)
    return {
        "fuzz_requests": sent,
        "proxy_crashes": health_failures + int(crashed),
        "proxy_5xx_unexpected": len(unexpected),
        "fuzz_statuses": statuses,
        "fuzz_unexpected_examples": unexpected[:5],
        "fuzz_no_answer": len(transport),
        "fuzz_no_answer_examples": transport[:5],
        "fuzz_valid_call_after": final.status_code == 200,
        "fuzz_valid_call_during_slow_loris": slow_loris_call_ok,
        "fuzz_gate_slow_clients_cut": gate_timeouts,
        "fuzz_bystander_record_unchanged": bystander_same,
    }


# ---------------------------------------------------------------------------------------------- part: drain


async def drain_part(server: Any, sessions: int, drains: int, seed: int) -> dict[str, Any]:
    """Harness-like clients on two cells; the cell holding them is drained mid-call, again and again."""
    import httpx

    proxy, router = server.proxy, server.proxy.router
    rng = random.Random(seed)
    names = [f"drain-{uuid.uuid4().hex[:6]}-{i}" for i in range(sessions)]
    keys = {name: proxy.open_execution(name) for name in names}
    seen: dict[str, list[tuple[str, int]]] = {name: [] for name in names}  # (call id suffix, completion tokens)
    failed: dict[str, list[str]] = {name: [] for name in names}
    retried = 0
    stop = asyncio.Event()

    async def client_loop(name: str, client: httpx.AsyncClient) -> None:
        nonlocal retried
        messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Write a long story."}]
        turn = 0
        while not stop.is_set():
            stream = turn % 2 == 1
            # Greedy, and long enough that every call is still decoding when a drain comes.
            body = {"model": "m", "messages": messages, "max_tokens": 300, "temperature": 0, "stream": stream}
            if stream:
                body["stream_options"] = {"include_usage": True}
            headers = {"authorization": f"Bearer {keys[name]}"}
            try:
                if stream:
                    call_id, tokens, text, status = None, None, "", 0
                    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
                        status = response.status_code
                        if status == 200:
                            async for line in response.aiter_lines():
                                if not line.startswith("data: ") or line == "data: [DONE]":
                                    continue
                                chunk = json.loads(line[6:])
                                call_id = chunk.get("id", call_id)
                                if chunk.get("usage"):
                                    tokens = chunk["usage"]["completion_tokens"]
                                for choice in chunk.get("choices", []):
                                    text += (choice.get("delta") or {}).get("content") or ""
                        else:
                            await response.aread()
                else:
                    response = await client.post("/v1/chat/completions", json=body, headers=headers)
                    status = response.status_code
                    if status == 200:
                        data = response.json()
                        call_id, tokens = data["id"], data["usage"]["completion_tokens"]
                        text = data["choices"][0]["message"].get("content") or ""
            except httpx.HTTPError as error:
                failed[name].append(f"transport: {error!r}")
                continue
            if status in (429, 503, 529):  # backpressure: retry, as harnesses do
                retried += 1
                await asyncio.sleep(0.2)
                continue
            if status != 200 or call_id is None:
                failed[name].append(f"status {status}")
                continue
            seen[name].append((call_id.removeprefix("chatcmpl-"), tokens if tokens is not None else -1))
            messages = [*messages, {"role": "assistant", "content": text}, {"role": "user", "content": f"Go on ({turn})."}]
            if len(messages) > 9:  # keep prompts short: start a new conversation, as a compaction would
                messages = messages[:2]
            turn += 1

    reports = []
    live_at_drain = []
    others = list(router.cells)[1:]
    for cell_id in others:  # every session starts on the first cell: each drain moves all of them
        await asyncio.to_thread(server.call, _set_draining(router, cell_id, True), 30)
    async with httpx.AsyncClient(base_url=server.base_url, timeout=300, limits=httpx.Limits(max_connections=sessions + 8)) as client:
        tasks = [asyncio.ensure_future(client_loop(name, client)) for name in names]
        deadline = time.monotonic() + 60 + 30 * drains
        for index in range(drains):
            await asyncio.sleep(rng.uniform(0.5, 2.0))  # let calls finish and new ones start between drains
            # Wait until the cell holding the sessions has (nearly) all of their calls in flight.
            while time.monotonic() < deadline:
                source = max(router.cells.values(), key=lambda cell: len([e for e in cell.executions if e in keys]))
                live = sum(1 for attempt in source.attempts if attempt.execution_id in keys)
                if live >= min(20, sessions):
                    break
                await asyncio.sleep(0.01)
            if index == 0:
                for cell_id in others:
                    await asyncio.to_thread(server.call, _set_draining(router, cell_id, False), 30)
            live_at_drain.append(sum(1 for attempt in source.attempts if attempt.execution_id in keys))
            report = await asyncio.to_thread(server.call, router.drain(source.cell_id), 120)
            reports.append(report)
            await asyncio.to_thread(server.call, _set_draining(router, source.cell_id, False), 30)
        stop.set()
        await asyncio.gather(*tasks)
    lost = duplicated = responses = 0
    details = []
    for name in names:
        records = proxy.records(name)
        by_suffix: dict[str, list[Any]] = {}
        for record in records:
            by_suffix.setdefault(record.call_id.rsplit(":", 1)[-1], []).append(record)
        got = {suffix for suffix, _ in seen[name]}
        responses += len(seen[name])
        for suffix, tokens in seen[name]:
            matching = by_suffix.get(suffix, [])
            if not matching or (tokens >= 0 and len(matching[0].response_ids) != tokens):
                lost += 1
                details.append(f"{name}: response {suffix} has no matching record")
        lost += len(failed[name])
        details += [f"{name}: {failure}" for failure in failed[name][:2]]
        for suffix, matching in by_suffix.items():
            if suffix not in got:
                duplicated += len(matching)
                details.append(f"{name}: record {suffix} reached no client")
            elif len(matching) > 1:
                duplicated += len(matching) - 1
        with contextlib.suppress(KeyError):
            proxy.close_execution(keys[name])
    return {
        "drained_sessions": sum(report.moved_executions for report in reports),
        "drains": len(reports),
        "drain_live_calls_at_drain_min": min(live_at_drain) if live_at_drain else 0,
        "drain_live_calls_at_drain": live_at_drain,
        "drain_moved_per_drain": [report.moved_executions for report in reports],
        "drain_aborted_and_retried_calls": sum(report.aborted_calls for report in reports),
        "drain_client_calls": responses,
        "drain_client_retries": retried,
        "calls_lost": lost,
        "calls_duplicated": duplicated,
        "drain_examples": details[:5],
    }


async def _set_draining(router: Any, cell_id: str, draining: bool) -> None:
    """Runs on the proxy's loop: a draining cell takes no new execution (`Router.undrain` clears it)."""
    if draining:
        router.cells[cell_id].draining = True
    else:
        router.undrain(cell_id)


# ---------------------------------------------------------------------------------------------- part: kills


def records_snapshot(run_dir: Path) -> tuple[dict[str, str], int]:
    """call id -> digest of every complete record on disk, and how many torn (cut) lines there are."""
    from gyre.proxy.record_format import read_record_file

    digests: dict[str, str] = {}
    torn = 0
    for path in sorted((run_dir / "records").glob("*.jsonl")):
        problems: list[str] = []
        for record in read_record_file(path, problems):
            payload = json.dumps([record.prompt_ids[:], record.response_ids, record.response_logprobs, record.weight_version])
            digests[record.call_id] = hashlib.sha256(payload.encode()).hexdigest()
        torn += len(problems)
    return digests, torn


def records_on_disk(run_dir: Path) -> int:
    """Complete record lines on disk (cheap: a newline count)."""
    return sum(path.read_bytes().count(b"\n") for path in (run_dir / "records").glob("*.jsonl"))


def kill_point(rng: random.Random, index: int) -> tuple[str, float]:
    """Where the next kill falls, as progress of the run rather than wall time (so a slow machine still
    gets kills mid-run): during start-up, after some new records (mid-rollout), or just after a new
    checkpoint (in the next step)."""
    kind = "startup" if index == 1 else rng.choice(["records", "checkpoint", "records"])
    amount = {"startup": rng.uniform(2.0, 8.0), "records": rng.randint(1, 40), "checkpoint": rng.uniform(0.0, 3.0)}[kind]
    return kind, amount


def kill_part(work: Path, kills: int, total_steps: int, seed: int, timeout_s: float) -> dict[str, Any]:
    """SIGKILL the driver at random points ``kills`` times (`kill_point`), resume each time, then run to
    the end."""
    rng = random.Random(seed)
    run_dir = work / "kill-run"
    snapshots: list[dict[str, str]] = []
    leftovers: list[str] = []
    late_leftovers: list[str] = []
    done = 0
    points = []
    deadline = time.monotonic() + timeout_s
    for index in range(kills):
        kind, amount = kill_point(rng, index)
        records, steps = records_on_disk(run_dir), _steps_done(run_dir)
        job = launch_job(run_dir, total_steps, *(["trainer.resume=true"] if index else []))
        reached_at = None
        while job.process.poll() is None and time.monotonic() < deadline:
            if reached_at is None:
                now_steps = _steps_done(run_dir)
                if kind == "startup" or (kind == "records" and records_on_disk(run_dir) >= records + amount) or (
                        kind == "checkpoint" and now_steps > steps):
                    reached_at = time.monotonic()
            wait = amount if kind == "startup" else (0.0 if kind == "records" else amount)
            if reached_at is not None and time.monotonic() - (job.started if kind == "startup" else reached_at) >= wait:
                break
            time.sleep(0.05)
        if job.process.poll() is not None:
            end_job(job)
            points.append({"kind": kind, "note": f"the job ended before the kill (exit {job.process.returncode})",
                           "log": job.log_tail(500)})
            break
        steps_before = _steps_done(run_dir)
        after = time.monotonic() - job.started
        at_grace, late = end_job(job)
        leftovers += at_grace
        late_leftovers += late
        done += 1
        digests, _ = records_snapshot(run_dir)
        snapshots.append(digests)
        points.append({"kind": kind, "after_s": round(after, 1), "checkpointed_steps": steps_before, "records": len(digests)})
        log(f"kill {done} ({kind}): {after:.1f}s after launch, {steps_before} steps checkpointed, {len(digests)} records on disk")
        if time.monotonic() > deadline:
            points.append({"note": f"time bound ({timeout_s:g}s) reached"})
            break
    job = launch_job(run_dir, total_steps, "trainer.resume=true")
    try:
        job.process.wait(timeout=max(60.0, deadline + 300 - time.monotonic()))
        finished, stderr = job.process.returncode == 0, job.log_tail()
    except subprocess.TimeoutExpired:
        finished, stderr = False, "final run timed out\n" + job.log_tail()
    at_grace, late = end_job(job)
    leftovers += at_grace
    late_leftovers += late
    steps = []
    if (run_dir / "metrics.jsonl").exists():
        steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    final, torn = records_snapshot(run_dir)
    lost = sum(1 for snapshot in snapshots[-1:] for call_id, digest in snapshot.items() if final.get(call_id) != digest)
    lost_any = sum(1 for snapshot in snapshots for call_id, digest in snapshot.items() if final.get(call_id) != digest)
    driver = _driver_state(run_dir)
    return {
        "driver_kills": done,
        "steps_lost": sum(1 for step in range(1, total_steps + 1) if step not in steps),
        "steps_repeated": len(steps) - len(set(steps)),
        "records_lost": max(lost, lost_any),
        "records_torn_lines": torn,
        "kill_total_steps": total_steps,
        "kill_final_run_finished": finished,
        "kill_final_steps_done": driver.get("steps_done"),
        "kill_final_version": driver.get("version"),
        "kill_records_at_end": len(final),
        "kill_leftover_processes": len(leftovers),  # 15 s after a kill
        "kill_leftover_examples": sorted(set(leftovers))[:8],
        "kill_late_leftover_processes": len(late_leftovers),  # 75 s after a kill where more than Ray's agents were left at 15 s (then killed here)
        "kill_late_leftover_examples": sorted(set(late_leftovers))[:8],
        "kill_points": points,
        "kill_final_stderr": "" if finished else stderr[-1500:],
    }


def _steps_done(run_dir: Path) -> int:
    return int(_driver_state(run_dir).get("steps_done", 0))


def _driver_state(run_dir: Path) -> dict[str, Any]:
    latest = run_dir / "checkpoints" / "latest"
    try:
        return json.loads((latest.resolve() / "driver.json").read_text())
    except (OSError, ValueError):
        return {}


# ---------------------------------------------------------------------------------------------- main


PARTS = ("escapes", "hacks", "hostile", "fuzz", "drain", "kills", "cells")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the results as flat JSON here")
    parser.add_argument("--kills", type=int, default=5, help="SIGKILLs of the driver (each followed by a resume)")
    parser.add_argument("--steps", type=int, default=24, help="training steps of the killed run")
    parser.add_argument("--fuzz", type=int, default=2000, help="malformed/hostile requests")
    parser.add_argument("--drains", type=int, default=6, help="drains of the cell holding the sessions")
    parser.add_argument("--sessions", type=int, default=24, help="live sessions during the drains")
    parser.add_argument("--cell-runs", type=int, default=4, help="main jobs that each lose three cells and an execution node (cells part)")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts to run")
    parser.add_argument("--hack-domains", nargs="+", default=["nl2repo", "swe", "terminal"], help="task domains of the hacks part")
    parser.add_argument("--hostile-sizes-mb", nargs="+", type=float, default=[1, 8, 32],
                        help="body sizes of the hostile part (capped at the proxy's body limit)")
    parser.add_argument("--count-tokens-flood", type=int, default=16, help="concurrent 2 MiB count_tokens requests")
    parser.add_argument("--slowloris", type=int, default=32, help="half-sent heads held against one gate")
    parser.add_argument("--gate-head-timeout", type=float, default=10.0, help="the gate's head_timeout_s in that part")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    unknown = parts - set(PARTS)
    if unknown:
        parser.error(f"unknown --parts {sorted(unknown)}; the parts are {','.join(PARTS)}")
    os.environ.setdefault("GYRE_CACHE", str(REPO / ".gyre_cache"))

    from gyre.envs import load_tasks
    from gyre.envs.cgroup import find_pids_parent
    from gyre.envs.sandbox import bwrap_problem

    # which parts ran: a reader (and tests/test_documented_commands.py) knows which figures to expect
    results: dict[str, Any] = {"notes": [], "parts": sorted(parts)}
    notes: list[str] = results["notes"]
    problem = bwrap_problem()
    task = next(t for t in load_tasks("nl2repo", REPO / "recipes" / "nl2repo" / "tasks").tasks if t.id == "bank")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gyre-reliability-") as folder:
        work = Path(folder)
        # the parts up to drain probe this benchmark's proxy; kills and cells run main jobs of their own
        server = start_proxy(work / "proxy") if parts & {"escapes", "fuzz", "drain"} else None
        try:
            if "escapes" in parts:
                if problem is not None:
                    notes.append(f"escapes not measured: bubblewrap cannot run here ({problem})")
                else:
                    log("escapes: starting a main job to probe against")
                    job = launch_job(work / "live-job", 10_000)
                    try:
                        if not wait_for_checkpoint(job, 300):
                            notes.append("escapes: the live main job wrote no checkpoint within 300 s; probed while it started")
                        probes = probe_part(server, job, work, task)
                    finally:
                        end_job(job)
                    log("escapes: resource attacks")
                    attacks = attack_part(server, work, task, cgroup=os.geteuid() == 0 and find_pids_parent() is not None)
                    attempts = probes["attempts"] + attacks["attacks"]
                    results.update(
                        escape_attempts=len(attempts),
                        escapes=sum(1 for a in attempts if a["escaped"]),
                        escape_examples=[f"{a['name']}: {a['detail']}" for a in attempts if a["escaped"]][:10],
                        escape_proxy_call_ok=bool(probes["ok"]) and not any(line["escaped"] for line in probes["ok"]),
                        escape_ports_tried=probes["ports_tried"],
                        escape_main_job_ports=probes["main_job_ports"],
                        escape_main_job_port_owners=probes["main_job_port_owners"],
                        exhaustion=[{k: a[k] for k in ("name", "detail", "neighbour_slowdown")} for a in attacks["attacks"]],
                        exhaustion_neighbour_alone_s=round(attacks["neighbour_alone_s"], 3),
                        exhaustion_neighbour_slowdown_max=max(a["neighbour_slowdown"] or 0 for a in attacks["attacks"]),
                    )
                    log(f"escapes: {results['escapes']} of {results['escape_attempts']} attempts")
                    results.update(gate_overhead(server, work, task))
                    log(f"gate: {results['gate_added_p50_ms']} ms added per call (p50)")
            if "hacks" in parts:
                log("hacks: planting reward hacks in built-in tasks")
                results.update(hacks_part(work, args.hack_domains))
                log(f"hacks: {results['reward_hacks_paid']} of {results['reward_hack_attempts']} paid")
            if "hostile" in parts:
                log("hostile: bodies, count_tokens flood, slowloris")
                results.update(hostile_part(args.hostile_sizes_mb, args.count_tokens_flood, args.slowloris,
                                            args.gate_head_timeout))
                log(f"hostile: memory ratio {results['hostile_body_memory_ratio']}, other execution p99 delay "
                    f"{results['other_execution_p99_delay_ms']} ms, slowloris {results['gate_slowloris_max_open_s']} s")
            if "fuzz" in parts:
                log("fuzz")
                results.update(asyncio.run(fuzz_part(server, args.fuzz, args.seed)))
                log(f"fuzz: {results['fuzz_requests']} requests, {results['proxy_5xx_unexpected']} unexpected 5xx")
            if "drain" in parts:
                log("drain")
                results.update(asyncio.run(drain_part(server, args.sessions, args.drains, args.seed)))
                log(f"drain: {results['drained_sessions']} sessions moved, {results['calls_lost']} lost, "
                    f"{results['calls_duplicated']} duplicated")
        finally:
            if server is not None:
                server.stop()
        if "kills" in parts:
            log("kills")
            results.update(kill_part(work, args.kills, args.steps, args.seed, timeout_s=600))
            log(f"kills: {results['driver_kills']} kills, {results['steps_lost']} steps lost, "
                f"{results['steps_repeated']} repeated, {results['records_lost']} records lost")
        if "cells" in parts:
            from cell_kills import cells_part  # benchmarks/cell_kills.py

            log(f"cells: {args.cell_runs} runs losing a satellite, a rollout cell, an execution node and the core each")
            results.update(cells_part(work, args.cell_runs))
            log(f"cells: {results['cell_kills']} kills, {results['core_recoveries']} core recoveries, "
                f"{results['cell_steps_lost']} steps lost, update diff {results['update_max_abs_diff_after_satellite_loss']:.2e}")
    results["seconds"] = round(time.monotonic() - started, 1)
    for key, target, ok in _targets(results):
        print(f"{key:>24} {results.get(key)!s:>8}   target {target:<8} {'met' if ok else 'NOT MET'}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2, sort_keys=True, default=str))


def _targets(results: dict[str, Any]) -> list[tuple[str, str, bool]]:
    checks = [
        ("escape_attempts", ">= 20", lambda v: v >= 20), ("escapes", "0", lambda v: v == 0),
        ("reward_hack_attempts", ">= 12", lambda v: v >= 12), ("reward_hacks_paid", "0", lambda v: v == 0),
        ("reward_hack_references_all_one", "true", lambda v: v is True),
        ("hostile_body_memory_ratio", "<= 4", lambda v: v <= 4),
        ("other_execution_p99_delay_ms", "<= 250", lambda v: v <= 250),
        ("gate_slowloris_max_open_s", "<= t + 5", lambda v: v <= results["gate_head_timeout_s"] + 5),
        ("fuzz_requests", ">= 2000", lambda v: v >= 2000), ("proxy_crashes", "0", lambda v: v == 0),
        ("proxy_5xx_unexpected", "0", lambda v: v == 0), ("drained_sessions", ">= 20", lambda v: v >= 20),
        ("calls_lost", "0", lambda v: v == 0), ("calls_duplicated", "0", lambda v: v == 0),
        ("driver_kills", ">= 5", lambda v: v >= 5), ("steps_lost", "0", lambda v: v == 0),
        ("steps_repeated", "0", lambda v: v == 0), ("records_lost", "0", lambda v: v == 0),
        ("cell_kills", ">= 12", lambda v: v >= 12), ("core_recoveries", ">= 3", lambda v: v >= 3),
        *[(f"cell_kills_{kind}", ">= 3", lambda v: v >= 3)
          for kind in ("satellite_mid_step", "rollout_mid_call", "execution_node", "core_mid_step")],
        ("cell_steps_lost", "0", lambda v: v == 0), ("cell_steps_repeated", "0", lambda v: v == 0),
        ("cell_loss_failed_executions", "0", lambda v: v == 0), ("cell_loss_calls_duplicated", "0", lambda v: v == 0),
        ("update_max_abs_diff_after_satellite_loss", "<= 1e-6", lambda v: v <= 1e-6),
    ]
    return [(key, target, key in results and check(results[key])) for key, target, check in checks]


if __name__ == "__main__":
    main()
