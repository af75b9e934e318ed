"""The transition table (django_ojs.protocol.states) against ojs-core §6.3 and §6.4 (pure)."""

from __future__ import annotations

import pytest

from django_ojs.protocol.states import (
    ALLOWED_PAIRS,
    INITIAL_STATES,
    MOVES,
    TERMINAL,
    JobState,
    Move,
    can,
    is_allowed,
    sources,
    target,
)

S = JobState

# ojs-core §6.4, "Valid State Transitions" (the rows between two states).
SECTION_6_4 = [
    (S.SCHEDULED, S.AVAILABLE),
    (S.AVAILABLE, S.ACTIVE),
    (S.PENDING, S.AVAILABLE),
    (S.ACTIVE, S.COMPLETED),
    (S.ACTIVE, S.RETRYABLE),
    (S.ACTIVE, S.CANCELLED),
    (S.ACTIVE, S.DISCARDED),
    (S.RETRYABLE, S.AVAILABLE),
    (S.DISCARDED, S.AVAILABLE),
]
# ojs-core §6.3 adds CANCEL before execution and the visibility timeout.
SECTION_6_3_EXTRA = [
    (S.SCHEDULED, S.CANCELLED),
    (S.AVAILABLE, S.CANCELLED),
    (S.PENDING, S.CANCELLED),
    (S.RETRYABLE, S.CANCELLED),
    (S.ACTIVE, S.AVAILABLE),
]
# ojs-core §5.2 expires_at ("MUST transition the job to discarded"), the
# operator's discard of a waiting job, and a rate limit's on_limit
# "reschedule" (ojs-rate-limiting §6.2): the only pairs beyond §6.3/§6.4.
EXPIRY_AND_DISCARD = [
    (S.SCHEDULED, S.DISCARDED),
    (S.AVAILABLE, S.DISCARDED),
    (S.PENDING, S.DISCARDED),
    (S.RETRYABLE, S.DISCARDED),
    (S.AVAILABLE, S.SCHEDULED),
]
# This server's snooze and wait (docs/how-to/snooze-signals-timers.md): a running
# job put back for later, its lease released, no new state.
PARKED = [(S.ACTIVE, S.SCHEDULED)]

# ojs-core §6.4, "Invalid Transitions (examples)".
INVALID_EXAMPLES = [
    (S.AVAILABLE, S.COMPLETED),
    *[(S.COMPLETED, state) for state in S],
    (S.DISCARDED, S.ACTIVE),
    *[(S.CANCELLED, state) for state in S],
    (S.SCHEDULED, S.ACTIVE),
    (S.RETRYABLE, S.ACTIVE),
]


@pytest.mark.parametrize(("source", "destination"), SECTION_6_4 + SECTION_6_3_EXTRA)
def test_every_transition_of_the_spec_is_allowed(source, destination):
    assert is_allowed(source, destination)


@pytest.mark.parametrize(("source", "destination"), INVALID_EXAMPLES)
def test_the_spec_invalid_examples_are_refused(source, destination):
    assert not is_allowed(source, destination)


def test_the_table_allows_nothing_beyond_the_spec_expiry_and_parking():
    assert ALLOWED_PAIRS == frozenset(SECTION_6_4 + SECTION_6_3_EXTRA + EXPIRY_AND_DISCARD + PARKED)


def test_terminal_states_have_no_way_out_but_manual_retry_of_discarded():
    leaving_terminal = {(a, b) for a, b in ALLOWED_PAIRS if a in TERMINAL}
    assert leaving_terminal == {(S.DISCARDED, S.AVAILABLE)}
    assert TERMINAL == {S.COMPLETED, S.CANCELLED, S.DISCARDED}


def test_only_a_claim_makes_a_job_active():
    assert {move for move, t in MOVES.items() if t.target == S.ACTIVE} == {Move.CLAIM}
    assert sources(Move.CLAIM) == {S.AVAILABLE}


@pytest.mark.parametrize(
    ("move", "allowed_from", "lands_in"),
    [
        (Move.ACK, {S.ACTIVE}, S.COMPLETED),
        (Move.RETRY, {S.ACTIVE}, S.RETRYABLE),
        (Move.FAIL, {S.ACTIVE}, S.DISCARDED),
        (Move.ACTIVATE, {S.PENDING}, S.AVAILABLE),
        (Move.RESURRECT, {S.DISCARDED}, S.AVAILABLE),
        (Move.PROMOTE, {S.SCHEDULED, S.RETRYABLE}, S.AVAILABLE),
        (Move.REQUEUE, {S.ACTIVE}, S.AVAILABLE),
        (Move.CANCEL, {S.SCHEDULED, S.AVAILABLE, S.PENDING, S.RETRYABLE, S.ACTIVE}, S.CANCELLED),
    ],
)
def test_each_operation_leaves_only_its_source_states(move, allowed_from, lands_in):
    assert target(move) == lands_in
    for state in S:
        assert can(move, state) is (state in allowed_from), state


def test_push_creates_jobs_only_in_the_three_initial_states():
    assert INITIAL_STATES == {S.SCHEDULED, S.AVAILABLE, S.PENDING}


def test_states_are_accepted_as_plain_strings():
    assert is_allowed("active", "completed")
    assert can(Move.ACK, "active")
    with pytest.raises(ValueError):
        is_allowed("running", "completed")
