"""The test runner of a scoring sandbox: ``python``, ``python3``, ``pytest`` and ``py.test`` on the test
command's PATH lead here (``bin/``), started by the real interpreter with ``-s -P`` and no PYTHONPATH, so
nothing in the workspace or the current folder can stand in for the runner.

- ``pytest ARGS`` and ``python [flags] -m pytest ARGS`` run pytest in this process with the report plugin
  (``report_plugin.py``): the workspace paths the command would have had (the current folder for ``-m``,
  then PYTHONPATH) join ``sys.path`` only after pytest and its plugins are loaded.
- Anything else (``python script.py``, ``python -c ...``) is handed to the real interpreter unchanged.

Standard library and the installed pytest only; run inside the sandbox, never imported by Gyre.
"""

from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYTEST_MODULES = ("pytest", "py.test")
FLAGS = set("bBdEiIOPqsSuvxR")  # python's options that take no value
WITH_VALUE = ("-W", "-X")


def pytest_args(name: str, args: list[str]) -> tuple[list[str], bool, list[str]] | None:
    """(pytest arguments, whether the current folder goes on sys.path, -W filters) for a pytest
    invocation, None for anything else."""
    if name in PYTEST_MODULES:
        return args, False, []
    safe_path, warnings = False, []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg.startswith("-m"):
            module = arg[2:] or (args[index + 1] if index + 1 < len(args) else "")
            rest = args[index + (1 if arg[2:] else 2):]
            return (rest, not safe_path, warnings) if module in PYTEST_MODULES else None
        if arg in WITH_VALUE:
            if arg == "-W" and index + 1 < len(args):
                warnings.append(args[index + 1])
            index += 2
            continue
        if arg.startswith(WITH_VALUE):
            if arg.startswith("-W"):
                warnings.append(arg[2:])
            index += 1
            continue
        if arg.startswith("-") and len(arg) > 1 and set(arg[1:]) <= FLAGS:
            safe_path = safe_path or "I" in arg or "P" in arg
            index += 1
            continue
        return None  # a script, -c, -, or an option we do not know: not a pytest run
    return None


def main() -> int:
    name, args = os.path.basename(sys.argv[1]), sys.argv[2:]
    report_fd = os.environ.pop("GYRE_PYTEST_REPORT_FD", "")  # not left for the code under test to find
    pythonpath = os.environ.pop("GYRE_SCORING_PYTHONPATH", "")
    if pythonpath:
        os.environ["PYTHONPATH"] = pythonpath  # what the command's children inherit
    found = pytest_args(name, args)
    if found is None:
        if report_fd:
            os.close(int(report_fd))  # a script the tests run does not get the report
        os.execv(sys.executable, [sys.executable, *args])
    if not report_fd:  # a pytest started by the tests themselves: not the scorer's run, so unguarded
        os.execv(sys.executable, [sys.executable, *(["-m", "pytest"] if name in PYTEST_MODULES else []), *args])
    arguments, with_cwd, warnings = found
    sys.dont_write_bytecode = sys.dont_write_bytecode or bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    import_paths = ([os.getcwd()] if with_cwd else []) + [p for p in pythonpath.split(os.pathsep) if p]
    import pytest  # from the installed packages: sys.path holds nothing of the workspace yet

    spec = importlib.util.spec_from_file_location("gyre_report_plugin", os.path.join(HERE, "report_plugin.py"))
    assert spec is not None and spec.loader is not None
    plugin_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin_module)
    fd = os.dup(int(report_fd))  # close-on-exec: processes the tests start do not inherit the report
    os.close(int(report_fd))
    report = plugin_module.GyreReport(fd, import_paths)
    extra = [arg for warning in warnings for arg in ("-W", warning)]
    return int(pytest.main([*extra, *arguments], plugins=[report]))


if __name__ == "__main__":
    sys.exit(main())
