"""Terminal-Bench loader and scorers on small task folders in the 1.x and Harbor layouts, the
Dockerfile subset, "no parsed results is a failure", and the bad-input cases."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from gyre.envs import EvaluationError, Sandbox, load_tasks
from gyre.envs.loaders.dockerfile import plan
from gyre.envs.scorers.terminal import read_reward

RUN_TESTS = '#!/bin/bash\nexport PYTEST_DISABLE_PLUGIN_AUTOLOAD=1\npython3 -m pytest -p no:cacheprovider -rA "$TEST_DIR/test_outputs.py"\n'
CHECKS = (
    "from pathlib import Path\n\n\n"
    "def test_answer():\n    assert Path('answer.txt').read_text() == Path('question.txt').read_text().upper()\n\n\n"
    "def test_question_kept():\n    assert Path('question.txt').read_text() == 'why?\\n'\n"
)
HARBOR_TEST = (
    '#!/bin/bash\nLOGS="${VERIFIER_LOGS_DIR:-/logs/verifier}"\nmkdir -p "$LOGS"\nexport PYTEST_DISABLE_PLUGIN_AUTOLOAD=1\n'
    'if python3 -m pytest -p no:cacheprovider -rA "${TEST_DIR:-/tests}/test_outputs.py"; then echo 1 > "$LOGS/reward.txt"; '
    'else echo 0 > "$LOGS/reward.txt"; fi\n'
)
SOLUTION = "#!/bin/bash\ntr a-z A-Z < question.txt > answer.txt\n"


def write(folder: Path, files: dict[str, str | None]) -> Path:
    for rel, text in files.items():
        if text is None:
            continue
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def tb_task(root: Path, name: str = "shout", **overrides: str | None) -> Path:
    return write(
        root / name,
        {
            "task.yaml": "instruction: Upper-case question.txt into answer.txt.\nparser_name: pytest\n"
            "max_agent_timeout_sec: 120\nmax_test_timeout_sec: 30\ndifficulty: easy\n",
            "Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\nCOPY question.txt /app/question.txt\nRUN apt-get update\n",
            "question.txt": "why?\n",
            "run-tests.sh": RUN_TESTS,
            "tests/test_outputs.py": CHECKS,
            "solution.sh": SOLUTION,
            **overrides,
        },
    )


def harbor_task(root: Path, name: str = "shout-harbor", **overrides: str | None) -> Path:
    return write(
        root / name,
        {
            "task.toml": 'version = "1.0"\n\n[verifier]\ntimeout_sec = 30.0\n\n[agent]\ntimeout_sec = 120.0\n',
            "instruction.md": "Upper-case question.txt into answer.txt.\n",
            "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\nCOPY data/ /app/\n",
            "environment/data/question.txt": "why?\n",
            "tests/test.sh": HARBOR_TEST,
            "tests/test_outputs.py": CHECKS,
            "solution/solve.sh": SOLUTION,
            **overrides,
        },
    )


def test_tb_task_fields(tmp_path: Path) -> None:
    task = load_tasks("terminal", tb_task(tmp_path)).tasks[0]
    assert task.id == "shout" and task.domain == "terminal"
    assert (task.agent_timeout, task.test_timeout) == (120.0, 30.0)
    assert task.workdir == "/app"
    assert task.meta["dockerfile_unsupported"] == ["RUN apt-get update"]
    workspace = task.materialise(tmp_path / "ws")
    assert sorted(os.listdir(workspace)) == ["question.txt"]  # tests and solution stay hidden


def test_harbor_task_fields(tmp_path: Path) -> None:
    task = load_tasks("terminal", harbor_task(tmp_path)).tasks[0]
    assert task.meta["format"] == "harbor"
    assert (task.agent_timeout, task.test_timeout) == (120.0, 30.0)
    assert sorted(os.listdir(task.materialise(tmp_path / "ws"))) == ["question.txt"]


@pytest.mark.parametrize("make", [tb_task, harbor_task], ids=["tb", "harbor"])
def test_reference_one_untouched_zero(make, tmp_path: Path, sandbox: Sandbox) -> None:
    task = load_tasks("terminal", make(tmp_path / "tasks")).tasks[0]
    base = task.materialise(tmp_path / "base")
    score = task.score(base, sandbox)
    assert score.reward == 0.0 and score.passed == 1 and score.total == 2
    solved = task.materialise(tmp_path / "solved")
    task.apply_solution(solved, sandbox)
    score = task.score(solved, sandbox)
    assert score.reward == 1.0 and score.passed == score.total == 2, score.log_tail


def test_no_parsed_results_is_a_failure(tmp_path: Path, sandbox: Sandbox) -> None:
    task = load_tasks(
        "terminal", tb_task(tmp_path / "tasks", **{"run-tests.sh": "#!/bin/bash\necho all good\nexit 0\n"})
    ).tasks[0]
    workspace = task.materialise(tmp_path / "ws")
    task.apply_solution(workspace, sandbox)
    score = task.score(workspace, sandbox)
    assert score.reward == 0.0 and score.total == 0
    assert "no reported test results" in score.detail["reason"]


def test_tests_run_from_a_pristine_copy(tmp_path: Path, sandbox: Sandbox) -> None:
    """Tests are staged per run: a test run that edits its own folder does not change the task."""
    folder = tb_task(tmp_path / "tasks", **{"run-tests.sh": RUN_TESTS + 'echo junk > "$TEST_DIR/test_outputs.py"\n'})
    task = load_tasks("terminal", folder).tasks[0]
    workspace = task.materialise(tmp_path / "ws")
    task.apply_solution(workspace, sandbox)
    assert task.score(workspace, sandbox).reward == 1.0
    assert (folder / "tests" / "test_outputs.py").read_text() == CHECKS


def test_test_timeout_raises(tmp_path: Path, sandbox: Sandbox) -> None:
    task = load_tasks("terminal", tb_task(tmp_path / "tasks", **{"run-tests.sh": "#!/bin/bash\nsleep 30\n"})).tasks[0]
    task = dataclasses.replace(task, test_timeout=1.0)
    with pytest.raises(EvaluationError) as info:
        task.score(task.materialise(tmp_path / "ws"), sandbox)
    assert info.value.reason == "timeout"


def test_harbor_missing_reward_is_zero(tmp_path: Path, sandbox: Sandbox) -> None:
    task = load_tasks(
        "terminal", harbor_task(tmp_path / "tasks", **{"tests/test.sh": "#!/bin/bash\necho forgot the reward\n"})
    ).tasks[0]
    workspace = task.materialise(tmp_path / "ws")
    task.apply_solution(workspace, sandbox)
    score = task.score(workspace, sandbox)
    assert score.reward == 0.0 and score.detail["reward_source"] == "no reward file written"


def test_harbor_reward_json_partial(tmp_path: Path, sandbox: Sandbox) -> None:
    script = (
        '#!/bin/bash\nmkdir -p "$VERIFIER_LOGS_DIR"\necho \'{"reward": 0.25}\' > "$VERIFIER_LOGS_DIR/reward.json"\n'
    )
    task = load_tasks("terminal", harbor_task(tmp_path / "tasks", **{"tests/test.sh": script})).tasks[0]
    score = task.score(task.materialise(tmp_path / "ws"), sandbox)
    assert score.reward == 0.25 and score.detail["reward_source"] == "reward.json[reward]"


def test_read_reward_rules(tmp_path: Path) -> None:
    assert read_reward(tmp_path) == (None, "no reward file written")
    (tmp_path / "reward.json").write_text('{"a": 1, "b": 0}')
    assert read_reward(tmp_path) == (0.5, "reward.json (mean of values)")
    (tmp_path / "reward.txt").write_text("1\n")
    assert read_reward(tmp_path) == (1.0, "reward.txt")  # reward.txt wins, as in Harbor
    (tmp_path / "reward.txt").write_text("yes\n")
    assert read_reward(tmp_path)[0] is None


def test_legacy_descriptions(tmp_path: Path) -> None:
    yaml_text = "descriptions:\n  - key: base\n    description: Do the thing.\n"
    task = load_tasks("terminal", tb_task(tmp_path, **{"task.yaml": yaml_text})).tasks[0]
    assert task.instruction == "Do the thing."
    assert (task.agent_timeout, task.test_timeout) == (360.0, 60.0)  # Terminal-Bench 1.x defaults


def test_bad_task_folders_reported(tmp_path: Path) -> None:
    tb_task(tmp_path, "good")
    harbor_task(tmp_path, "good-harbor")
    tb_task(tmp_path, "bad-yaml", **{"task.yaml": "instruction: [unclosed\n"})
    tb_task(tmp_path, "no-instruction", **{"task.yaml": "parser_name: pytest\n"})
    tb_task(tmp_path, "wrong-type", **{"task.yaml": "instruction: x\nmax_agent_timeout_sec: soon\n"})
    tb_task(tmp_path, "bad-parser", **{"task.yaml": "instruction: x\nparser_name: mocha\n"})
    tb_task(tmp_path, "no-run-tests", **{"run-tests.sh": None})
    harbor_task(tmp_path, "bad-toml", **{"task.toml": "[verifier\n"})
    harbor_task(tmp_path, "negative-timeout", **{"task.toml": "[agent]\ntimeout_sec = -5\n"})
    harbor_task(tmp_path, "no-test-sh", **{"tests/test.sh": None})
    (tmp_path / "not-a-task").mkdir()
    result = load_tasks("terminal", tmp_path)
    assert sorted(t.id for t in result.tasks) == ["good", "good-harbor"]
    found = {Path(e.path.split(" [")[0]).relative_to(tmp_path).parts[0]: e.field for e in result.errors}
    assert found == {
        "bad-yaml": "task.yaml",
        "no-instruction": "instruction",
        "wrong-type": "max_agent_timeout_sec",
        "bad-parser": "parser_name",
        "no-run-tests": "run-tests.sh",
        "bad-toml": "task.toml",
        "negative-timeout": "timeout_sec",
        "no-test-sh": "tests/test.sh",
        "not-a-task": "task.yaml",
    }


def test_dockerfile_plan(tmp_path: Path) -> None:
    context = write(tmp_path, {"a.txt": "a", "dir/b.txt": "b", "c.sh": "c", "x.cfg": "x", "y.cfg": "y"})
    (context / "Dockerfile").write_text(
        "FROM python:3.12\n# comment\nWORKDIR /srv\nWORKDIR app\nENV MODE=test LEVEL=2\n"
        'COPY a.txt .\nCOPY dir/ ./data/\nCOPY ["c.sh", "/srv/app/bin/"]\nCOPY *.cfg conf/\n'
        "COPY a.txt /etc/a.txt\nRUN pip install \\\n    requests\n"
    )
    result = plan(context / "Dockerfile", context)
    assert result.workdir == "/srv/app"
    assert result.env == {"MODE": "test", "LEVEL": "2"}
    targets = sorted(rel for _, rel in result.copies)
    assert targets == ["a.txt", "bin/c.sh", "conf/x.cfg", "conf/y.cfg", "data"]
    assert any("/etc/a.txt" in line for line in result.unsupported)
    assert any(line.startswith("RUN pip install") for line in result.unsupported)
