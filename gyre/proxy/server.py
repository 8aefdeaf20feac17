"""Running the proxy: build it over engines, and serve it with uvicorn on its own thread and event loop.

A background thread (rather than a subprocess) keeps the proxy in the driver's process, so the driver (or
a test) calls ``open_execution``, ``records`` and the router's ``drain`` directly; ``ProxyServer.call``
runs a coroutine on the server's loop for the async parts. The socket is bound before the thread starts,
so ``port=0`` gives a free port with no race.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, Self, TypeVar

import uvicorn

from gyre.chat import ChatTemplate
from gyre.proxy.app import build_app
from gyre.proxy.config import ProxyConfig
from gyre.proxy.router import RoutedCell, Router
from gyre.proxy.service import Proxy
from gyre.rollout.base import RolloutEngine

T = TypeVar("T")


def build_proxy(
    tokenizer: Any,
    engines: Sequence[RolloutEngine],
    config: ProxyConfig,
    *,
    cell_ids: Sequence[str] | None = None,
    call_capacity: int = 64,
) -> Proxy:
    """A proxy over one cell per engine (cells ``cell-0``, ``cell-1``, ... unless ``cell_ids`` names them),
    each taking at most ``call_capacity`` calls in flight (more wait, bounded by ``queue_timeout_s``)."""
    ids = list(cell_ids) if cell_ids is not None else [f"cell-{i}" for i in range(len(engines))]
    if len(ids) != len(engines):
        raise ValueError(f"{len(engines)} engines but {len(ids)} cell ids")
    if call_capacity < 1:
        raise ValueError(f"call_capacity must be >= 1, got {call_capacity}")
    cells = [RoutedCell(cell_id, engine, capacity=call_capacity) for cell_id, engine in zip(ids, engines)]
    router = Router(cells, queue_timeout_s=config.queue_timeout_s, retry_after_s=config.retry_after_s)
    return Proxy(ChatTemplate(tokenizer), router, config)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket. Created with an explicit ``IPPROTO_TCP``: asyncio only sets TCP_NODELAY on
    accepted sockets whose ``proto`` says TCP, and without it every response pays a ~40 ms delayed-ACK
    stall (headers and body are separate writes)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    return sock


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where installed (cheaper per request), else asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class ProxyServer:
    """uvicorn serving ``proxy`` on a background thread; ``start()`` returns once it accepts connections."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        config = proxy.config
        self._socket = bind_socket(config.host, config.port)
        self.host, self.port = self._socket.getsockname()[:2]
        self._server = uvicorn.Server(
            uvicorn.Config(
                build_app(proxy),
                log_level=config.log_level,
                lifespan="off",
                loop="asyncio",
                timeout_graceful_shutdown=2,
                timeout_keep_alive=config.keep_alive_s,  # (why: ProxyConfig.keep_alive_s)
                backlog=4096,
                proxy_headers=False,  # loopback clients; skip the forwarded-header middleware
                server_header=False,
                date_header=False,
            )
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._serve, name="gyre-proxy", daemon=True)
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    def start(self, timeout_s: float = 30.0) -> ProxyServer:
        self._thread.start()
        ready = threading.Event()

        def poll() -> None:
            while not (self._server.started or self._error or not self._thread.is_alive()):
                threading.Event().wait(0.01)
            ready.set()

        threading.Thread(target=poll, daemon=True).start()
        if not ready.wait(timeout_s) or not self._server.started:
            raise RuntimeError(f"the proxy did not start on {self.base_url} within {timeout_s}s: {self._error!r}")
        return self

    def _serve(self) -> None:
        self.loop = new_event_loop()
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._server.serve(sockets=[self._socket]))
        except BaseException as error:  # noqa: BLE001 - reported by start()
            self._error = error
        finally:
            self.loop.close()

    def call(self, coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coroutine`` on the server's event loop (router methods must run there) and wait for it."""
        if self.loop is None:
            raise RuntimeError("the proxy server is not running")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def on_loop(self, coroutine: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        """Run ``coroutine`` on the server's loop, awaitable from another running loop (the driver's)."""
        if self.loop is None:
            raise RuntimeError("the proxy server is not running")
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self.loop))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop serving and flush the records (engines belong to the caller)."""
        self._server.should_exit = True
        self._thread.join(timeout_s)
        self._socket.close()
        self.proxy.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
