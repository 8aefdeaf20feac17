"""The role timeline kept in the run folder: a resumed run plots the roles of every session."""

from __future__ import annotations

import json

from gyre.plots import ROLE_COLOURS, plot_timeline
from gyre.scheduler.state import Role
from gyre.single_controller import Membership
from gyre.trainer.timeline import STOPPED, TimelineLog


def session(path, keep: bool, to: Role) -> TimelineLog:
    log = TimelineLog(path)
    log.start(keep=keep)
    membership = Membership(["cell0"])
    membership.move({"cell0": to.value})
    log.record(membership.timeline, seen=True)
    log.record(membership.timeline, seen=False)  # nothing new: nothing written twice
    return log


def test_a_resumed_session_keeps_the_roles_before_it(tmp_path):
    path = tmp_path / "timeline.jsonl"
    session(path, keep=False, to=Role.TRAIN)
    log = session(path, keep=True, to=Role.ROLLOUT)
    assert log.session == 1
    timelines, resumes = log.load()
    roles = [role for _, role in timelines["cell0"]]
    assert roles == ["idle", "switching", "train", STOPPED, "idle", "switching", "rollout"]
    assert len(resumes) == 1 and resumes[0] >= timelines["cell0"][3][0]
    assert plot_timeline(timelines, resumes[0] + 1, tmp_path / "t.png", resumes=resumes).stat().st_size > 1000


def test_a_fresh_run_in_a_used_folder_starts_a_new_timeline(tmp_path):
    path = tmp_path / "timeline.jsonl"
    session(path, keep=False, to=Role.TRAIN)
    log = session(path, keep=False, to=Role.ROLLOUT)
    assert log.session == 0
    assert {json.loads(line)["session"] for line in path.read_text().splitlines()} == {0}
    assert [role for _, role in log.load()[0]["cell0"]] == ["idle", "switching", "rollout"]


def test_the_simulator_and_the_run_share_one_role_palette():
    from gyre.sim import report

    assert report.ROLE_COLOURS is ROLE_COLOURS
    assert ROLE_COLOURS["rollout"] != ROLE_COLOURS["train"]
