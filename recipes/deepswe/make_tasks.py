"""Generate the built-in DeepSWE mini suite: SWE-bench-format rows plus one repository tarball each.

    python recipes/deepswe/make_tasks.py [--out recipes/deepswe/tasks]

Writes ``instances.jsonl`` (fields of SWE-bench: repo, instance_id, base_commit, patch, test_patch,
problem_statement, hints_text, version, environment_setup_commit, FAIL_TO_PASS, PASS_TO_PASS as JSON
strings, plus ``test_cmd``) and ``repos/<instance_id>.tar.gz`` (the repository at its base commit, with the
bug). FAIL_TO_PASS / PASS_TO_PASS are not written by hand: the script runs pytest on the buggy and the
fixed repository (both with the test patch) and keeps the tests that fail then pass, and those that pass
both times. Output is deterministic (sorted, fixed timestamps), so re-running changes nothing unless
`families.py` changed. Add bugs or families in `families.py` to make more tasks.
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from families import FAMILIES, Bug, Family

from gyre.envs.testlog import parse_pytest

TEST_CMD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -rA -p no:cacheprovider"


def git_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile=f"a/{path}", tofile=f"b/{path}"
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def repo_files(family: Family, module_source: str, tests: str) -> dict[str, str]:
    return {
        "README.md": f"# {family.package}\n\n{family.summary.capitalize()}. Run the tests with `python -m pytest`.\n",
        f"{family.package}/__init__.py": f'"""{family.summary.capitalize()}."""\n',
        f"{family.package}/{family.module}.py": module_source,
        f"tests/test_{family.module}.py": tests,
    }


def tarball(files: dict[str, str]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in sorted(files):
            data = files[name].encode()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            archive.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0) as handle:
        handle.write(raw.getvalue())
    return packed.getvalue()


def run_pytest(files: dict[str, str]) -> dict[str, str]:
    folder = Path(tempfile.mkdtemp(prefix="gyre-deepswe-"))
    try:
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
        env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "tests"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return parse_pytest(done.stdout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def make_instance(family: Family, number: int, bug: Bug) -> tuple[dict[str, object], bytes]:
    if family.source.count(bug.fixed) != 1:
        raise SystemExit(f"{family.package}/{bug.name}: `fixed` must occur exactly once in the source")
    buggy_source = family.source.replace(bug.fixed, bug.buggy)
    module_path = f"{family.package}/{family.module}.py"
    tests_path = f"tests/test_{family.module}.py"
    new_tests = family.tests + bug.new_tests
    base = repo_files(family, buggy_source, family.tests)
    before = run_pytest({**base, tests_path: new_tests})
    after = run_pytest({**repo_files(family, family.source, new_tests)})
    base_run = run_pytest(base)
    instance = f"gyre-mini__{family.package}-{number}"
    if not after or any(status != "PASSED" for status in after.values()):
        raise SystemExit(f"{instance}: the fixed repository does not pass its tests: {after}")
    if not base_run or any(status != "PASSED" for status in base_run.values()):
        raise SystemExit(f"{instance}: the buggy repository fails its own (old) tests: {base_run}")
    fail_to_pass = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) != "PASSED")
    pass_to_pass = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED")
    if not fail_to_pass:
        raise SystemExit(f"{instance}: the new tests do not catch the bug")
    digest = hashlib.sha1(json.dumps(base, sort_keys=True).encode()).hexdigest()
    title, _, body = bug.statement.partition("\n")
    row = {
        "repo": f"gyre-mini/{family.package}",
        "instance_id": instance,
        "base_commit": digest,
        "patch": git_diff(module_path, buggy_source, family.source),
        "test_patch": git_diff(tests_path, family.tests, new_tests),
        "problem_statement": f"{title}\n{body}",
        "hints_text": "",
        "created_at": "2025-01-01T00:00:00Z",
        "version": "0.1",
        "environment_setup_commit": digest,
        "FAIL_TO_PASS": json.dumps(fail_to_pass),
        "PASS_TO_PASS": json.dumps(pass_to_pass),
        "test_cmd": TEST_CMD,
        "bug_kind": bug.kind,
    }
    return row, tarball(base)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "tasks"))
    args = parser.parse_args()
    out = Path(args.out)
    repos = out / "repos"
    if repos.exists():
        shutil.rmtree(repos)
    repos.mkdir(parents=True)
    rows = []
    for family in FAMILIES:
        for number, bug in enumerate(family.bugs, start=1):
            row, data = make_instance(family, number, bug)
            (repos / f"{row['instance_id']}.tar.gz").write_bytes(data)
            rows.append(row)
            print(f"{row['instance_id']}: {bug.kind}, FAIL_TO_PASS={len(json.loads(row['FAIL_TO_PASS']))}")
    with (out / "instances.jsonl").open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    print(f"wrote {len(rows)} instances to {out}")


if __name__ == "__main__":
    main()
