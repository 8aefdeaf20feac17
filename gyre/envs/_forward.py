"""In-sandbox forwarder: ``python -I -S _forward.py HOST PORT SOCKET -- CMD...``.

Runs inside a bubblewrap sandbox that has its own network namespace (nothing but its own loopback). It
listens on ``HOST:PORT`` of that loopback, runs ``CMD`` (the harness), and relays every connection made
to ``HOST:PORT`` to the Unix socket ``SOCKET``, a file bound into the sandbox whose listener is on the
host (the execution's gate, `gyre.harness.gate`). So the harness reaches the proxy at the address it
is given, and nothing else of the host is reachable. This relay is not a security boundary: the agent can
bypass it and talk to ``SOCKET`` itself; the gate on the host decides what gets through.

It exits with ``CMD``'s status once ``CMD`` exits (SIGTERM/SIGINT/SIGHUP are passed on to ``CMD``).
Standard library only, no site-packages (started with -I -S for speed and to import nothing of the host).
"""

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading

CHUNK = 65536


async def _pipe(reader, writer):
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # half-close: the other direction may still be answering
    except (ConnectionError, OSError):
        writer.close()


async def _relay(socket_path, client_reader, client_writer):
    try:
        upstream_reader, upstream_writer = await asyncio.open_unix_connection(socket_path)
    except OSError as error:
        sys.stderr.write(f"gyre forwarder: cannot reach {socket_path}: {error}\n")
        client_writer.close()
        return
    try:
        await asyncio.gather(_pipe(client_reader, upstream_writer), _pipe(upstream_reader, client_writer))
    finally:
        upstream_writer.close()
        client_writer.close()


def _serve(listener, socket_path):
    async def main():
        server = await asyncio.start_server(lambda r, w: _relay(socket_path, r, w), sock=listener)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def main(argv):
    if len(argv) < 5 or argv[3] != "--":
        sys.stderr.write("usage: _forward.py HOST PORT SOCKET -- CMD [ARGS...]\n")
        return 2
    host, port, socket_path, command = argv[0], int(argv[1]), argv[2], argv[4:]
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError:
        if host in ("127.0.0.1", "localhost"):
            raise
        # The proxy's address is not on the sandbox's loopback (e.g. 0.0.0.0 or a host IP): listen on all
        # of the sandbox's addresses, which are its own loopback only.
        listener.bind(("", port))
    listener.listen(128)
    threading.Thread(target=_serve, args=(listener, socket_path), daemon=True).start()
    try:
        child = subprocess.Popen(command, close_fds=True)  # the listener is not inherited
    except OSError as error:
        sys.stderr.write(f"sandbox: cannot run {command[0]}: {error}\n")
        return 127

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    while True:
        try:
            code = child.wait()
            break
        except InterruptedError:
            continue
    sys.stdout.flush()
    sys.stderr.flush()
    return 128 - code if code < 0 else code  # a signal, as a shell reports it


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))  # no waiting on the relay thread
