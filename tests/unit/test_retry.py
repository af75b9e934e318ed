"""Unit tests for django_ojs.protocol.retry (pure: no Django, no database)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from django_ojs.protocol.errors import PolicyInvalid
from django_ojs.protocol.retry import (
    DEFAULT_POLICY,
    HANDLER_CODES,
    FailureDecision,
    RetryPolicy,
    backoff_delay,
    decide,
    matches_non_retryable,
    parse_policy,
)

S = timedelta(seconds=1)


def no_jitter(**overrides: object) -> RetryPolicy:
    """A validated policy without jitter, so delays are exact."""
    return parse_policy({"jitter": False, **overrides})


def delays(policy: RetryPolicy, count: int) -> list[float]:
    return [backoff_delay(policy, n).total_seconds() for n in range(1, count + 1)]


# --- defaults and merging ---------------------------------------------------


def test_default_policy_matches_section_8() -> None:
    assert DEFAULT_POLICY.to_dict() == {
        "max_attempts": 3,
        "initial_interval": "PT1S",
        "backoff_coefficient": 2.0,
        "max_interval": "PT5M",
        "jitter": True,
        "non_retryable_errors": [],
        "on_exhaustion": "discard",
        "backoff_strategy": "exponential",
    }


def test_none_means_defaults() -> None:
    assert parse_policy(None) is DEFAULT_POLICY
    custom = RetryPolicy(max_attempts=7)
    assert parse_policy(None, custom) is custom


def test_empty_object_means_defaults() -> None:
    assert parse_policy({}) == DEFAULT_POLICY


def test_partial_override_merges_with_defaults() -> None:
    # The §8.1 example.
    policy = parse_policy({"max_attempts": 10, "on_exhaustion": "dead_letter"})
    assert policy == RetryPolicy(max_attempts=10, on_exhaustion="dead_letter")


def test_partial_override_merges_with_given_defaults() -> None:
    base = RetryPolicy(max_attempts=5, jitter=False, non_retryable_errors=("a.b",))
    assert parse_policy({"max_attempts": 2}, base) == RetryPolicy(
        max_attempts=2, jitter=False, non_retryable_errors=("a.b",)
    )


def test_full_policy_as_the_conformance_cases_send_it() -> None:
    policy = parse_policy(
        {
            "max_attempts": 5,
            "initial_interval": "PT1S",
            "backoff_coefficient": 1.0,
            "backoff_strategy": "linear",
            "max_interval": "PT30S",
            "jitter": False,
            "non_retryable_errors": ["FatalError", "Auth.*"],
            "on_exhaustion": "dead_letter",
        }
    )
    assert policy == RetryPolicy(
        max_attempts=5,
        initial_interval=S,
        backoff_coefficient=1.0,
        max_interval=30 * S,
        jitter=False,
        non_retryable_errors=("FatalError", "Auth.*"),
        on_exhaustion="dead_letter",
        backoff_strategy="linear",
    )


def test_unknown_keys_are_ignored() -> None:
    assert parse_policy({"max_attempts": 4, "something_else": [1, 2]}) == RetryPolicy(max_attempts=4)


def test_core_spec_short_durations() -> None:
    policy = parse_policy({"initial_interval": "1s", "max_interval": "300s"})
    assert (policy.initial_interval, policy.max_interval) == (S, 300 * S)


def test_fractional_seconds() -> None:
    assert parse_policy({"initial_interval": "PT0.5S"}).initial_interval == timedelta(milliseconds=500)


def test_integer_coefficient_is_stored_as_float() -> None:
    policy = parse_policy({"backoff_coefficient": 3})
    assert policy.backoff_coefficient == 3.0
    assert isinstance(policy.to_dict()["backoff_coefficient"], float)


def test_integral_float_counts_as_integer() -> None:
    # JSON Schema's "integer" accepts 3.0; some serialisers write whole doubles that way.
    assert parse_policy({"max_attempts": 3.0}).max_attempts == 3


# --- interval merging --------------------------------------------------------


def test_only_initial_above_default_max_raises_the_max() -> None:
    policy = parse_policy({"initial_interval": "PT10M"})
    assert (policy.initial_interval, policy.max_interval) == (600 * S, 600 * S)


def test_only_max_below_default_initial_lowers_the_initial() -> None:
    policy = parse_policy({"max_interval": "PT0.5S"})
    assert policy.initial_interval == policy.max_interval == timedelta(milliseconds=500)


def test_equal_intervals_are_valid() -> None:
    policy = parse_policy({"initial_interval": "PT10S", "max_interval": "PT10S"})
    assert policy.initial_interval == policy.max_interval == 10 * S


def test_both_intervals_given_and_conflicting_is_rejected() -> None:
    with pytest.raises(PolicyInvalid) as info:
        parse_policy({"initial_interval": "PT10S", "max_interval": "PT5S"})
    assert info.value.message.startswith("retry.max_interval must be >= retry.initial_interval")
    assert info.value.field == "retry.max_interval"


# --- aliases ----------------------------------------------------------------


def test_millisecond_aliases() -> None:
    # The HTTP binding's example spelling.
    policy = parse_policy({"initial_interval_ms": 1000, "max_interval_ms": 300000})
    assert (policy.initial_interval, policy.max_interval) == (S, 300 * S)


def test_millisecond_alias_conflict_names_the_alias() -> None:
    with pytest.raises(PolicyInvalid) as info:
        parse_policy({"initial_interval_ms": 5000, "max_interval_ms": 1000})
    assert info.value.message.startswith("retry.max_interval_ms must be >= retry.initial_interval_ms")


def test_both_spellings_may_be_given_when_they_agree() -> None:
    assert parse_policy({"initial_interval": "PT2S", "initial_interval_ms": 2000}).initial_interval == 2 * S
    assert parse_policy({"backoff_strategy": "none", "backoff_type": "constant"}).backoff_strategy == "constant"


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"initial_interval": "PT2S", "initial_interval_ms": 1000}, "retry.initial_interval"),
        ({"max_interval": "PT2M", "max_interval_ms": 1000}, "retry.max_interval"),
        ({"backoff_strategy": "linear", "backoff_type": "exponential"}, "retry.backoff_strategy"),
    ],
)
def test_disagreeing_spellings_are_rejected(raw: dict, path: str) -> None:
    with pytest.raises(PolicyInvalid) as info:
        parse_policy(raw)
    assert info.value.message.startswith(f"{path} and ")
    assert "disagree" in info.value.message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"backoff_strategy": "linear"}, "linear"),
        ({"backoff_strategy": "polynomial"}, "polynomial"),
        ({"backoff_strategy": "exponential"}, "exponential"),
        ({"backoff_strategy": "constant"}, "constant"),
        ({"backoff_strategy": "none"}, "constant"),
        ({"backoff_type": "linear"}, "linear"),
        ({"backoff_type": "none"}, "constant"),
    ],
)
def test_strategy_names_and_aliases(raw: dict, expected: str) -> None:
    assert parse_policy(raw).backoff_strategy == expected


# --- validation -------------------------------------------------------------


def rejected(raw: object, **kwargs: object) -> PolicyInvalid:
    with pytest.raises(PolicyInvalid) as info:
        parse_policy(raw, **kwargs)  # type: ignore[arg-type]
    return info.value


def test_conformance_negative_max_attempts() -> None:
    # L1-RTR-011: the message must contain the field name.
    error = rejected(
        {
            "max_attempts": -1,
            "initial_interval": "PT1S",
            "backoff_coefficient": 2.0,
            "max_interval": "PT5M",
            "jitter": False,
            "non_retryable_errors": [],
            "on_exhaustion": "discard",
        }
    )
    assert error.code == "validation_error"
    assert error.message.startswith("retry.max_attempts ")
    assert "max_attempts" in error.message
    assert error.field == "retry.max_attempts"
    assert error.details["field"] == "retry.max_attempts"


def test_conformance_coefficient_below_one() -> None:
    # L1-RTR-012.
    error = rejected(
        {
            "max_attempts": 3,
            "initial_interval": "PT1S",
            "backoff_coefficient": 0.5,
            "max_interval": "PT5M",
            "jitter": False,
            "non_retryable_errors": [],
            "on_exhaustion": "discard",
        }
    )
    assert error.code == "validation_error"
    assert error.message.startswith("retry.backoff_coefficient must be >= 1.0")
    assert error.field == "retry.backoff_coefficient"


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"max_attempts": -1}, "retry.max_attempts"),
        ({"max_attempts": True}, "retry.max_attempts"),
        ({"max_attempts": 2.5}, "retry.max_attempts"),
        ({"max_attempts": "3"}, "retry.max_attempts"),
        ({"max_attempts": None}, "retry.max_attempts"),
        ({"max_attempts": 1_000_001}, "retry.max_attempts"),
        ({"max_attempts": 10**100}, "retry.max_attempts"),
        ({"initial_interval": "1 second"}, "retry.initial_interval"),
        ({"initial_interval": "P"}, "retry.initial_interval"),
        ({"initial_interval": 1000}, "retry.initial_interval"),
        ({"initial_interval": ""}, "retry.initial_interval"),
        ({"initial_interval": "PT0S"}, "retry.initial_interval"),
        ({"initial_interval": "P366D"}, "retry.initial_interval"),
        ({"initial_interval": "P99999999999999999999Y"}, "retry.initial_interval"),
        ({"max_interval": "five minutes"}, "retry.max_interval"),
        ({"max_interval": "PT0S"}, "retry.max_interval"),
        ({"max_interval": "P2Y"}, "retry.max_interval"),
        ({"initial_interval_ms": 0}, "retry.initial_interval_ms"),
        ({"initial_interval_ms": -5}, "retry.initial_interval_ms"),
        ({"initial_interval_ms": 1.5}, "retry.initial_interval_ms"),
        ({"initial_interval_ms": "1000"}, "retry.initial_interval_ms"),
        ({"initial_interval_ms": False}, "retry.initial_interval_ms"),
        ({"initial_interval_ms": 10**30}, "retry.initial_interval_ms"),
        ({"max_interval_ms": 366 * 86_400_000}, "retry.max_interval_ms"),
        ({"backoff_coefficient": 0.5}, "retry.backoff_coefficient"),
        ({"backoff_coefficient": 0}, "retry.backoff_coefficient"),
        ({"backoff_coefficient": -2.0}, "retry.backoff_coefficient"),
        ({"backoff_coefficient": True}, "retry.backoff_coefficient"),
        ({"backoff_coefficient": "2.0"}, "retry.backoff_coefficient"),
        ({"backoff_coefficient": float("inf")}, "retry.backoff_coefficient"),
        ({"backoff_coefficient": float("nan")}, "retry.backoff_coefficient"),
        ({"backoff_coefficient": 10**400}, "retry.backoff_coefficient"),
        ({"jitter": "true"}, "retry.jitter"),
        ({"jitter": 1}, "retry.jitter"),
        ({"jitter": None}, "retry.jitter"),
        ({"non_retryable_errors": "auth.*"}, "retry.non_retryable_errors"),
        ({"non_retryable_errors": {"auth.*": True}}, "retry.non_retryable_errors"),
        ({"non_retryable_errors": ["ok", 3]}, "retry.non_retryable_errors[1]"),
        ({"non_retryable_errors": [""]}, "retry.non_retryable_errors[0]"),
        ({"non_retryable_errors": [None]}, "retry.non_retryable_errors[0]"),
        ({"on_exhaustion": "dead-letter"}, "retry.on_exhaustion"),
        ({"on_exhaustion": "DISCARD"}, "retry.on_exhaustion"),
        ({"on_exhaustion": ["discard"]}, "retry.on_exhaustion"),
        ({"backoff_strategy": "fibonacci"}, "retry.backoff_strategy"),
        ({"backoff_strategy": "Linear"}, "retry.backoff_strategy"),
        ({"backoff_strategy": {}}, "retry.backoff_strategy"),
        ({"backoff_type": "random"}, "retry.backoff_type"),
    ],
)
def test_invalid_fields_name_their_path(raw: dict, path: str) -> None:
    error = rejected(raw)
    assert error.message.startswith(f"{path} ")
    assert error.field == path
    assert error.details == {"field": path}


@pytest.mark.parametrize("raw", [[], "retry", 3, True])
def test_policy_must_be_an_object(raw: object) -> None:
    error = rejected(raw)
    assert error.message == "retry must be an object"
    assert error.field == "retry"


def test_field_prefix_is_configurable() -> None:
    error = rejected({"jitter": "yes"}, field="options.retry")
    assert error.message.startswith("options.retry.jitter must be a boolean")
    assert error.field == "options.retry.jitter"


@pytest.mark.parametrize("value", [0, 1, 1_000_000])
def test_max_attempts_bounds_accepted(value: int) -> None:
    assert parse_policy({"max_attempts": value}).max_attempts == value


def test_limits_of_durations_accepted() -> None:
    policy = parse_policy({"initial_interval": "PT0.001S", "max_interval": "P365D"})
    assert (policy.initial_interval, policy.max_interval) == (timedelta(milliseconds=1), timedelta(days=365))


def test_coefficient_of_exactly_one_is_valid() -> None:
    assert parse_policy({"backoff_coefficient": 1.0}).backoff_coefficient == 1.0


# --- canonical form ---------------------------------------------------------


def test_round_trip_through_dict() -> None:
    policy = RetryPolicy(
        max_attempts=25,
        initial_interval=timedelta(milliseconds=1500),
        backoff_coefficient=4.0,
        max_interval=timedelta(hours=1),
        jitter=False,
        non_retryable_errors=("payment.card_stolen", "validation.*"),
        on_exhaustion="dead_letter",
        backoff_strategy="polynomial",
    )
    stored = policy.to_dict()
    assert stored["initial_interval"] == "PT1.5S"
    assert stored["max_interval"] == "PT1H"
    assert stored["non_retryable_errors"] == ["payment.card_stolen", "validation.*"]
    assert RetryPolicy.from_dict(stored) == policy
    assert RetryPolicy.from_dict(DEFAULT_POLICY.to_dict()) == DEFAULT_POLICY


def test_canonical_form_is_a_valid_client_policy() -> None:
    # What we echo on the wire can be sent back unchanged.
    policy = parse_policy({"max_attempts": 9, "initial_interval_ms": 250, "backoff_type": "none"})
    assert parse_policy(policy.to_dict()) == policy


def test_from_dict_fills_missing_keys_with_defaults() -> None:
    # A row stored before backoff_strategy existed still loads.
    stored = DEFAULT_POLICY.to_dict()
    del stored["backoff_strategy"]
    stored["max_attempts"] = 4
    assert RetryPolicy.from_dict(stored) == RetryPolicy(max_attempts=4)


# --- backoff strategies -----------------------------------------------------


def test_exponential_default() -> None:
    # The §3.3 table: doubling from 1s, capped at PT5M on retry 10.
    assert delays(no_jitter(), 10) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]


def test_exponential_conformance_case() -> None:
    # L1-RTR-001: PT1S, coefficient 2.0 -> ~1s then ~2s.
    policy = no_jitter(initial_interval="PT1S", backoff_coefficient=2.0, max_interval="PT5M")
    assert delays(policy, 2) == [1, 2]


def test_exponential_with_coefficient_one_is_constant() -> None:
    # L1-RTR-002 / §12.5: coefficient 1.0 means the same delay every time.
    assert delays(no_jitter(backoff_coefficient=1.0), 4) == [1, 1, 1, 1]


def test_linear_conformance_case() -> None:
    # L1-RTR-009: initial PT1S, linear, max PT30S -> 1s, 2s, 3s.
    policy = no_jitter(
        initial_interval="PT1S", backoff_coefficient=1.0, backoff_strategy="linear", max_interval="PT30S"
    )
    assert delays(policy, 3) == [1, 2, 3]


def test_linear_section_3_2_ignores_coefficient() -> None:
    policy = no_jitter(initial_interval="PT5S", backoff_strategy="linear", backoff_coefficient=7)
    assert delays(policy, 4) == [5, 10, 15, 20]


def test_constant_section_3_1_ignores_coefficient() -> None:
    policy = no_jitter(initial_interval="PT5S", backoff_strategy="none", backoff_coefficient=3)
    assert delays(policy, 4) == [5, 5, 5, 5]


def test_polynomial_section_3_4() -> None:
    policy = no_jitter(backoff_strategy="polynomial", backoff_coefficient=4.0)
    assert delays(policy, 5) == [1, 16, 81, 256, 300]


def test_polynomial_section_12_3() -> None:
    policy = no_jitter(
        initial_interval="PT15S", backoff_coefficient=4.0, max_interval="PT1H", backoff_strategy="polynomial"
    )
    assert delays(policy, 5) == [15, 240, 1215, 3600, 3600]


def test_polynomial_with_fractional_exponent() -> None:
    policy = no_jitter(backoff_strategy="polynomial", backoff_coefficient=1.5)
    assert delays(policy, 4) == [1, pytest.approx(2**1.5, abs=1e-6), pytest.approx(3**1.5, abs=1e-6), 8]


def test_max_interval_cap_conformance_case() -> None:
    # L1-RTR-008: initial 1s, coefficient 10, max PT2S.
    policy = no_jitter(initial_interval="PT1S", backoff_coefficient=10.0, max_interval="PT2S")
    assert delays(policy, 3) == [1, 2, 2]


def test_sub_second_delays_keep_microseconds() -> None:
    policy = no_jitter(initial_interval="PT0.25S", backoff_coefficient=1.5)
    assert [backoff_delay(policy, n) for n in (1, 2, 3)] == [
        timedelta(milliseconds=250),
        timedelta(milliseconds=375),
        timedelta(microseconds=562500),
    ]


@pytest.mark.parametrize("strategy", ["exponential", "linear", "polynomial", "constant"])
@pytest.mark.parametrize("retry_number", [5000, 10**6, 10**18, 10**400])
def test_huge_retry_numbers_do_not_overflow(strategy: str, retry_number: int) -> None:
    policy = no_jitter(backoff_strategy=strategy, backoff_coefficient=3.0, max_interval="PT1H")
    expected = S if strategy == "constant" else timedelta(hours=1)
    assert backoff_delay(policy, retry_number) == expected


@pytest.mark.parametrize(
    ("strategy", "coefficient", "at_cap"),
    [("linear", 1.0, 3600), ("exponential", 2.0, 13), ("polynomial", 2.0, 60)],
)
def test_delay_reaches_the_cap_exactly(strategy: str, coefficient: float, at_cap: int) -> None:
    # Around the boundary the cap check and the formula must agree.
    policy = no_jitter(backoff_strategy=strategy, backoff_coefficient=coefficient, max_interval="PT1H")
    assert backoff_delay(policy, at_cap - 1) < timedelta(hours=1)
    assert backoff_delay(policy, at_cap) == timedelta(hours=1)
    assert backoff_delay(policy, at_cap + 1) == timedelta(hours=1)


@pytest.mark.parametrize("strategy", ["exponential", "polynomial"])
def test_huge_coefficients_do_not_overflow(strategy: str) -> None:
    policy = no_jitter(backoff_strategy=strategy, backoff_coefficient=1e300)
    assert backoff_delay(policy, 1) == S
    assert backoff_delay(policy, 2) == timedelta(minutes=5)
    assert backoff_delay(policy, 10**400) == timedelta(minutes=5)


def test_coefficient_barely_above_one_still_grows_to_the_cap() -> None:
    policy = no_jitter(backoff_coefficient=1.000001)
    assert backoff_delay(policy, 2) == timedelta(microseconds=1_000_001)
    assert backoff_delay(policy, 10**9) == timedelta(minutes=5)


@pytest.mark.parametrize("retry_number", [0, -1])
def test_retry_number_starts_at_one(retry_number: int) -> None:
    with pytest.raises(ValueError):
        backoff_delay(DEFAULT_POLICY, retry_number)


# --- jitter -----------------------------------------------------------------


def test_jitter_stays_within_half_to_one_and_a_half() -> None:
    policy = parse_policy({"initial_interval": "PT10S", "max_interval": "PT1H"})
    rng = random.Random(20260219)
    for retry_number, base in [(1, 10), (2, 20), (3, 40), (4, 80)]:
        samples = [backoff_delay(policy, retry_number, rng).total_seconds() for _ in range(2000)]
        assert all(0.5 * base <= value < 1.5 * base for value in samples)
        # Uniform: both halves of the range are reached, and the mean is near the base delay.
        assert min(samples) < 0.55 * base and max(samples) > 1.45 * base
        assert sum(samples) / len(samples) == pytest.approx(base, rel=0.05)


def test_jitter_is_capped_again_at_max_interval() -> None:
    # §5.3: retry 6 is capped at 300s before jitter; jitter may not push it past 300s.
    policy = parse_policy({"initial_interval": "PT10S"})
    rng = random.Random(7)
    samples = [backoff_delay(policy, 6, rng).total_seconds() for _ in range(2000)]
    assert all(150 <= value <= 300 for value in samples)
    assert samples.count(300) > 0 and min(samples) < 160


def test_jitter_conformance_case() -> None:
    # L1-RTR-003: PT2S, coefficient 1.0, jitter -> within [1s, 3s).
    policy = parse_policy({"initial_interval": "PT2S", "backoff_coefficient": 1.0, "jitter": True})
    rng = random.Random(3)
    samples = [backoff_delay(policy, n, rng) for n in (1, 2) for _ in range(1000)]
    assert all(S <= value < 3 * S for value in samples)


def test_constant_strategy_with_jitter() -> None:
    policy = parse_policy({"initial_interval": "PT2S", "backoff_strategy": "constant"})
    rng = random.Random(11)
    assert all(S <= backoff_delay(policy, 5, rng) < 3 * S for _ in range(1000))


def test_seeded_jitter_is_reproducible() -> None:
    first = [backoff_delay(DEFAULT_POLICY, 3, random.Random(42)) for _ in range(3)]
    assert len(set(first)) == 1


def test_jitter_without_rng_uses_the_module_generator() -> None:
    delay = backoff_delay(DEFAULT_POLICY, 1)
    assert timedelta(milliseconds=500) <= delay < timedelta(milliseconds=1500)


def test_jitter_off_ignores_rng() -> None:
    assert backoff_delay(no_jitter(), 3, random.Random(1)) == 4 * S


def test_jitter_with_huge_retry_numbers() -> None:
    delay = backoff_delay(DEFAULT_POLICY, 10**400, random.Random(5))
    assert timedelta(seconds=150) <= delay <= timedelta(minutes=5)


# --- non-retryable matching -------------------------------------------------

SECTION_6_2 = ["validation.payload_invalid", "auth.*"]


@pytest.mark.parametrize(
    ("error_type", "expected"),
    [
        ("validation.payload_invalid", True),  # exact
        ("validation.schema_error", False),
        ("auth.token_expired", True),  # prefix auth.*
        ("auth.forbidden", True),
        ("auth", False),  # does not start with "auth."
        ("external.auth.failure", False),  # prefix is auth, not external.auth
        ("authentication.failed", False),
        ("Auth.token_expired", False),  # case-sensitive
        ("auth.*", True),  # the entry itself, exactly
    ],
)
def test_section_6_2_table(error_type: str, expected: bool) -> None:
    assert matches_non_retryable(SECTION_6_2, [error_type]) is expected


def test_prefix_match_with_capitalised_pattern() -> None:
    # L1-RTR-005 sends "Auth.*" and the class "Auth.TokenExpired".
    assert matches_non_retryable(["Auth.*"], ["Auth.TokenExpired"])
    assert not matches_non_retryable(["Auth.*"], ["AuthenticationError"])


def test_exact_match_of_plain_class_name() -> None:
    # L1-RTR-004.
    assert matches_non_retryable(["FatalError"], ["FatalError"])
    assert not matches_non_retryable(["FatalError"], ["FatalErrorX"])


def test_deep_prefix() -> None:
    assert matches_non_retryable(["external.stripe.*"], ["external.stripe.card.declined"])
    assert not matches_non_retryable(["external.stripe.*"], ["external.stripes.x"])


def test_any_candidate_may_match_and_none_is_skipped() -> None:
    assert matches_non_retryable(["FatalError"], [None, "handler_error", "FatalError"])
    assert not matches_non_retryable(["FatalError"], [None, None])
    assert not matches_non_retryable(["FatalError"], [])
    assert not matches_non_retryable([], ["FatalError"])


def test_star_alone_is_only_an_exact_entry() -> None:
    # Only a ".*" suffix is a wildcard.
    assert not matches_non_retryable(["*"], ["anything"])


def test_one_shot_iterables() -> None:
    patterns = iter(["a.*", "b.c"])
    candidates = (t for t in [None, "x", "b.c"])
    assert matches_non_retryable(patterns, candidates)


# --- decide -----------------------------------------------------------------


def test_handler_codes() -> None:
    assert HANDLER_CODES == {"RETRY", "DISCARD", "DEAD_LETTER", "FAIL"}


def test_retry_with_backoff() -> None:
    policy = no_jitter(max_attempts=4)
    assert decide(policy, 1) == FailureDecision(retry=True, delay=S, dead_letter=False, reason="retry")
    assert decide(policy, 2).delay == 2 * S
    assert decide(policy, 3).delay == 4 * S


def test_retry_passes_rng_to_jitter() -> None:
    decision = decide(DEFAULT_POLICY, 2, rng=random.Random(9))
    assert decision.retry
    assert decision.delay == backoff_delay(DEFAULT_POLICY, 2, random.Random(9))


@pytest.mark.parametrize(("on_exhaustion", "dead_letter"), [("discard", False), ("dead_letter", True)])
def test_exhausted(on_exhaustion: str, dead_letter: bool) -> None:
    # L1-RTR-010: max_attempts 3 -> the third failure is final.
    policy = no_jitter(max_attempts=3, on_exhaustion=on_exhaustion)
    assert decide(policy, 2).retry
    expected = FailureDecision(retry=False, delay=None, dead_letter=dead_letter, reason="exhausted")
    assert decide(policy, 3) == expected
    assert decide(policy, 4) == expected  # never more than max_attempts


@pytest.mark.parametrize("max_attempts", [0, 1])
def test_zero_and_one_attempts_never_retry(max_attempts: int) -> None:
    # L1-RTR-006/007 use max_attempts 1; §2.2 makes 0 immediately terminal too.
    policy = no_jitter(max_attempts=max_attempts, on_exhaustion="dead_letter")
    assert decide(policy, 1) == FailureDecision(retry=False, delay=None, dead_letter=True, reason="exhausted")


@pytest.mark.parametrize(("on_exhaustion", "dead_letter"), [("discard", False), ("dead_letter", True)])
def test_non_retryable_error_follows_on_exhaustion(on_exhaustion: str, dead_letter: bool) -> None:
    policy = no_jitter(max_attempts=5, non_retryable_errors=["auth.*"], on_exhaustion=on_exhaustion)
    decision = decide(policy, 1, error_types=["auth.invalid_credentials"])
    assert decision == FailureDecision(retry=False, delay=None, dead_letter=dead_letter, reason="non_retryable")


def test_non_matching_error_is_retried() -> None:
    policy = no_jitter(max_attempts=5, non_retryable_errors=["auth.*"])
    assert decide(policy, 1, error_types=["external.crm.service_unavailable", None]).retry


@pytest.mark.parametrize(("on_exhaustion", "dead_letter"), [("discard", False), ("dead_letter", True)])
def test_retryable_false_follows_on_exhaustion(on_exhaustion: str, dead_letter: bool) -> None:
    policy = no_jitter(max_attempts=5, on_exhaustion=on_exhaustion)
    decision = decide(policy, 1, retryable=False)
    assert decision == FailureDecision(retry=False, delay=None, dead_letter=dead_letter, reason="not_retryable_flag")


def test_retryable_true_does_not_override_policy() -> None:
    policy = no_jitter(max_attempts=5, non_retryable_errors=["FatalError"])
    assert decide(policy, 1, retryable=True, error_types=["FatalError"]).reason == "non_retryable"
    assert decide(no_jitter(max_attempts=2), 2, retryable=True).reason == "exhausted"


def test_retryable_flag_is_checked_before_error_types() -> None:
    # L1-RTR-004/005 send retryable false together with the class name.
    policy = no_jitter(max_attempts=5, non_retryable_errors=["Auth.*"])
    decision = decide(policy, 1, retryable=False, error_types=["Auth.TokenExpired"])
    assert decision.reason == "not_retryable_flag"


@pytest.mark.parametrize(
    ("code", "dead_letter", "reason"),
    [
        ("DISCARD", False, "handler_discard"),
        ("FAIL", False, "handler_fail"),
        ("DEAD_LETTER", True, "handler_dead_letter"),
    ],
)
def test_handler_codes_override_the_policy(code: str, dead_letter: bool, reason: str) -> None:
    # §7.2: regardless of attempts left, on_exhaustion, retryable or error types.
    for on_exhaustion in ("discard", "dead_letter"):
        policy = no_jitter(max_attempts=10, on_exhaustion=on_exhaustion, non_retryable_errors=["x.*"])
        decision = decide(policy, 1, handler_code=code, retryable=False, error_types=["x.y"])
        assert decision == FailureDecision(retry=False, delay=None, dead_letter=dead_letter, reason=reason)


def test_handler_retry_applies_the_policy() -> None:
    policy = no_jitter(max_attempts=2, non_retryable_errors=["x.*"], on_exhaustion="dead_letter")
    assert decide(policy, 1, handler_code="RETRY").reason == "retry"
    assert decide(policy, 1, handler_code="RETRY", error_types=["x.y"]).reason == "non_retryable"
    assert decide(policy, 2, handler_code="RETRY") == FailureDecision(
        retry=False, delay=None, dead_letter=True, reason="exhausted"
    )


@pytest.mark.parametrize("code", ["discard", "Dead_Letter", "handler_error", ""])
def test_unknown_or_lowercase_codes_mean_no_code(code: str) -> None:
    # Only the exact uppercase §7.1 codes count; the binding's "handler_error" is not one.
    assert decide(no_jitter(max_attempts=3), 1, handler_code=code).reason == "retry"


@pytest.mark.parametrize("attempts_used", [0, -3])
def test_attempts_used_starts_at_one(attempts_used: int) -> None:
    with pytest.raises(ValueError):
        decide(DEFAULT_POLICY, attempts_used)
