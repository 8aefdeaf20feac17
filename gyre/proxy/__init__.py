"""The LLM proxy: OpenAI and Anthropic HTTP APIs over rollout cells, with token-exact call records."""

from gyre.proxy.config import ProxyConfig
from gyre.proxy.errors import ProxyError
from gyre.proxy.recorder import RecordWriter
from gyre.proxy.router import DrainReport, OverloadedError, RoutedCell, Router
from gyre.proxy.service import CallResult, GenOptions, Proxy

__all__ = [
    "CallResult",
    "DrainReport",
    "GenOptions",
    "OverloadedError",
    "Proxy",
    "ProxyConfig",
    "ProxyError",
    "RecordWriter",
    "RoutedCell",
    "Router",
]
