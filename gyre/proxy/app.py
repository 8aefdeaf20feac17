"""The HTTP surface: a FastAPI app whose routes read raw bodies and delegate to the API modules.

Routes: ``GET /health``; OpenAI ``GET /v1/models``, ``POST /v1/chat/completions``, ``/v1/completions``,
``/v1/responses``; Anthropic ``POST /v1/messages`` and ``/v1/messages/count_tokens``. Errors under
``/v1/messages`` use Anthropic's error shape, everything else OpenAI's; unknown paths (404) and wrong
methods (405) too. Bodies are read with a size limit (413 beyond ``proxy.max_body_bytes``) and parsed by
hand, so unknown fields are ignored and errors name the field.

One execution cannot stall another's calls: a body whose JSON would cost many times its size to parse is
refused before parsing (`gyre.proxy.body_cost`); a prompt too long for the context window is refused
before tokenising (`Proxy.check_prompt_size`); large bodies are parsed and tokenised on a worker thread
(the tokenizer releases the GIL for long texts) while the event loop serves other calls; and each
execution's requests are prepared one at a time (``OpenExecution.chat_lock``), so a flood from one
execution queues behind itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from gyre.chat.roles import AGENT_HEADER
from gyre.proxy import body_cost
from gyre.proxy.anthropic_messages import Messages
from gyre.proxy.errors import ProxyError
from gyre.proxy.openai_chat import ChatCompletions
from gyre.proxy.openai_completions import Completions
from gyre.proxy.openai_responses import Responses
from gyre.proxy.service import Proxy
from gyre.proxy.validate import parse_json_object

log = logging.getLogger(__name__)
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def api_of(path: str) -> str:
    return "anthropic" if path.startswith("/v1/messages") else "openai"


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def error_response(error: ProxyError, api: str) -> Response:
    return json_response(error.body(api), error.status(api), error.headers())


def api_key(request: Request) -> str | None:
    key = request.headers.get("x-api-key")
    if key:
        return key.strip()
    authorization = request.headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


async def read_body(request: Request, limit: int) -> bytearray:
    """The raw body, refusing (413) more than ``limit`` bytes whether or not Content-Length says so. One
    buffer of the declared length, filled in place (joining parts, or growing a buffer, holds the body
    twice for a moment)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ProxyError("too_large", f"request body is {int(declared)} bytes; the limit is {limit} bytes (proxy.max_body_bytes)")
    body = bytearray(int(declared)) if declared is not None and declared.isdigit() else bytearray()
    filled = 0
    async for part in request.stream():
        end = filled + len(part)
        if end > limit:
            raise ProxyError("too_large", f"request body exceeds the limit of {limit} bytes (proxy.max_body_bytes)")
        body[filled:end] = part  # in place while within the declared length; grows past it
        filled = end
    del body[filled:]
    return body


async def disconnected(request: Request) -> None:
    """Return once the client has gone away (after the body was read, ``receive`` only reports that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def guarded(fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """Turn unexpected exceptions into a 500 in the API's shape (the server keeps serving)."""

    async def route(request: Request) -> Response:
        try:
            return await fn(request)
        except ProxyError as error:
            return error_response(error, api_of(request.url.path))
        except ClientDisconnect:
            return Response(status_code=499)  # the client left mid-request: nobody to answer, nothing recorded
        except Exception as error:
            log.exception("proxy: %s %s failed", request.method, request.url.path)
            internal = ProxyError("internal", f"internal error: {type(error).__name__}: {error}")
            return error_response(internal, api_of(request.url.path))

    return route


class Routes:
    """The request handlers, independent of how they are mounted."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.limit = proxy.config.max_body_bytes
        self.apis = {
            "chat": ChatCompletions(proxy),
            "completions": Completions(proxy),
            "responses": Responses(proxy),
            "messages": Messages(proxy),
        }
        self.post: dict[str, Callable[[Request], Awaitable[Response]]] = {
            "/v1/chat/completions": guarded(lambda request: self.generation(request, "chat")),
            "/v1/completions": guarded(lambda request: self.generation(request, "completions")),
            "/v1/responses": guarded(lambda request: self.generation(request, "responses")),
            "/v1/messages": guarded(lambda request: self.generation(request, "messages")),
            "/v1/messages/count_tokens": guarded(self.count_tokens),
        }

    def parse(self, raw: bytearray) -> dict[str, Any]:
        config = self.proxy.config
        body_cost.check(raw, config.max_parse_memory_ratio, config.parse_memory_floor_mb << 20)
        return parse_json_object(raw)

    async def off_loop(self, raw: bytearray, work: Callable[[], Any]) -> Any:
        """Run ``work`` (parsing and planning ``raw``) here when the body is small, else on a worker thread."""
        if len(raw) < self.proxy.config.worker_thread_bytes:
            return work()
        return await asyncio.to_thread(work)

    async def generation(self, request: Request, name: str) -> Response:
        proxy = self.proxy
        execution = proxy.executions.get(api_key(request))
        raw = await read_body(request, self.limit)
        api = self.apis[name]
        agent = request.headers.get(AGENT_HEADER)
        async with execution.chat_lock:
            call, flags = await self.off_loop(raw, lambda: api.prepare(execution, self.parse(raw), agent))
        if flags["stream"]:
            await proxy.admit(call)  # backpressure as an HTTP status, before the stream starts
            return StreamingResponse(api.stream(call, flags), media_type="text/event-stream", headers=SSE_HEADERS)
        run = asyncio.ensure_future(proxy.run(call))
        gone = asyncio.ensure_future(disconnected(request))
        try:
            await asyncio.wait({run, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not run.done():  # the client left: cancelling the call makes the engine abort it
                run.cancel()
                # cancel() only requests it: wait until the call has really stopped before looking at it
                await asyncio.wait({run})
        if run.cancelled():
            return Response(status_code=499)  # nobody is listening; nothing was recorded
        return json_response(api.response(call, run.result(), flags))

    async def count_tokens(self, request: Request) -> Response:
        execution = self.proxy.executions.get(api_key(request))
        raw = await read_body(request, self.limit)
        messages = self.apis["messages"]
        async with execution.chat_lock:
            counted = await self.off_loop(raw, lambda: messages.count_tokens(execution, self.parse(raw)))
        return json_response(counted)

    async def models(self, request: Request) -> Response:
        self.proxy.executions.get(api_key(request))
        name = self.proxy.config.served_model_name
        if request.headers.get("anthropic-version"):
            entry = {"type": "model", "id": name, "display_name": name, "created_at": "1970-01-01T00:00:00Z"}
            return json_response({"data": [entry], "has_more": False, "first_id": name, "last_id": name})
        return json_response({"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "gyre"}]})

    async def health(self, request: Request) -> Response:
        proxy = self.proxy
        return json_response({"status": "ok", "executions": len(proxy.executions), "router": proxy.router.stats()})


def build_fastapi(routes: Routes) -> FastAPI:
    """Every route as a FastAPI app, with 404/405 in the API's error shape."""
    app = FastAPI(title="Gyre proxy", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.proxy = routes.proxy
    for path, handler in routes.post.items():
        app.add_api_route(path, handler, methods=["POST"])
    app.add_api_route("/v1/models", guarded(routes.models), methods=["GET"])
    app.add_api_route("/health", guarded(routes.health), methods=["GET"])

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        kind = "not_found" if error.status_code == 404 else "invalid_request"
        message = f"{request.method} {request.url.path}: {error.detail}"
        proxy_error = ProxyError(kind, message)  # type: ignore[arg-type]
        api = api_of(request.url.path)
        return json_response(proxy_error.body(api), error.status_code, dict(error.headers or {}))

    return app


class FastPathApp:
    """The ASGI app uvicorn serves: the POST API routes go straight to their handlers, everything else
    (GETs, unknown paths, wrong methods) to the FastAPI app.

    Why: FastAPI's per-request machinery (middleware stack, route matching, dependency solving) costs
    about a millisecond per request on a small CPU, which is the proxy's whole latency budget; the hot
    routes need none of it (they read raw bodies and build their own responses). The handlers are the
    same objects FastAPI mounts, so behaviour does not depend on the path taken.
    """

    def __init__(self, routes: Routes) -> None:
        self.routes = routes
        self.fastapi = build_fastapi(routes)
        self.state = self.fastapi.state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            handler = self.routes.post.get(scope["path"])
            if handler is not None:
                response = await handler(Request(scope, receive))
                await response(scope, receive, send)
                return
        await self.fastapi(scope, receive, send)


def build_app(proxy: Proxy) -> FastPathApp:
    return FastPathApp(Routes(proxy))
