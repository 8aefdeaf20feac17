"""Progress output that stays one line in a log.

On a terminal, rich draws its live bars as usual. Piped or captured (a log file, CI, a subprocess), rich
would fit each line to 80 columns, wrapping it or cutting its summary short with "…"; there the console
is wide and the bar (a row of "━" that says nothing in a file) is left out, so each progress line is one
full line. Hugging Face's tqdm bars (e.g. "Writing model shards") are turned off there too.
"""

from __future__ import annotations

import os
import sys
from typing import Any

LOG_WIDTH = 400  # columns of a console that writes to a file: wider than any progress line


def progress_console() -> Any:
    """A rich console on stderr: the terminal's width there, else ``LOG_WIDTH`` columns."""
    from rich.console import Console

    console = Console(stderr=True)
    return console if console.is_terminal else Console(stderr=True, width=LOG_WIDTH)


def progress_columns(console: Any, *columns: Any) -> list[Any]:
    """``columns`` without the bar when ``console`` writes to a file."""
    from rich.progress import BarColumn

    return [c for c in columns if console.is_terminal or not isinstance(c, BarColumn)]


def quiet_library_bars() -> None:
    """Turn Hugging Face's tqdm bars off when stderr is not a terminal (call before transformers loads)."""
    if not sys.stderr.isatty():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
