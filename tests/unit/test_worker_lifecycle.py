"""Worker states under signals and directives (ojs-worker-protocol §2, ojs-graceful-shutdown §4.2)."""

from __future__ import annotations

import signal

from django_ojs.protocol.states import WorkerState as S
from django_ojs.worker.lifecycle import Change, Lifecycle


def test_sigtstp_quiets_and_sigcont_resumes():
    life = Lifecycle()
    assert life.on_signal(signal.SIGTSTP) is Change.QUIET and not life.fetching
    assert life.on_signal(signal.SIGTSTP) is Change.NONE
    assert life.on_signal(signal.SIGCONT) is Change.RESUME and life.fetching


def test_sigterm_then_sigterm_forces():
    life = Lifecycle()
    assert life.on_signal(signal.SIGTERM) is Change.TERMINATE
    assert life.on_signal(signal.SIGINT) is Change.FORCE and life.forced
    assert life.on_signal(signal.SIGTERM) is Change.NONE


def test_terminate_is_irreversible():
    life = Lifecycle()
    life.on_signal(signal.SIGTSTP)
    assert life.on_signal(signal.SIGTERM) is Change.TERMINATE  # quiet -> terminate
    assert life.on_signal(signal.SIGCONT) is Change.NONE
    assert life.on_directive(S.RUNNING) is Change.NONE
    assert life.on_directive(S.QUIET) is Change.NONE
    assert life.state == S.TERMINATE


def test_directives_quiet_and_terminate_are_level_running_is_an_edge():
    life = Lifecycle()
    assert life.on_directive(S.RUNNING) is Change.NONE
    # A local SIGTSTP survives the default "running" in every heartbeat reply.
    life.on_signal(signal.SIGTSTP)
    assert life.on_directive(S.RUNNING) is Change.NONE and life.state == S.QUIET
    life.on_signal(signal.SIGCONT)
    assert life.on_directive(S.QUIET) is Change.QUIET
    # SIGCONT while the operator still says quiet: the next reply quiets again.
    life.on_signal(signal.SIGCONT)
    assert life.on_directive(S.QUIET) is Change.QUIET
    # The operator's change back to running resumes.
    assert life.on_directive(S.RUNNING) is Change.RESUME
    assert life.on_directive(S.TERMINATE) is Change.TERMINATE
    assert life.on_directive(S.TERMINATE) is Change.NONE  # repeated directive: no force
    assert not life.forced


def test_an_operators_resume_of_a_worker_quiet_on_its_own_resumes_it():
    """SIGTSTP quiets a worker whose directive stays "running"; the admin's Resume sets
    "running" again, which is only told from the default by when it was set."""
    life = Lifecycle()
    assert life.on_directive(S.RUNNING, None) is Change.NONE
    life.on_signal(signal.SIGTSTP)
    assert life.on_directive(S.RUNNING, None) is Change.NONE and life.state == S.QUIET
    assert life.on_directive(S.RUNNING, "12:00:01") is Change.RESUME and life.fetching
    # The same setting read again is no new request: a later SIGTSTP stands.
    life.on_signal(signal.SIGTSTP)
    assert life.on_directive(S.RUNNING, "12:00:01") is Change.NONE and life.state == S.QUIET
