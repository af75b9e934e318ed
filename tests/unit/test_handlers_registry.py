"""The handler registry and the @job decorator (no database)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_ojs.handlers.registry import HandlerRegistry
from django_ojs.protocol.errors import PolicyInvalid


def send(ctx, to):
    return f"sent to {to}"


def other(ctx):
    return None


def test_register_and_look_up():
    registry = HandlerRegistry()
    handler = registry.register("email.send", send, {"queue": "mail"})
    assert registry.get("email.send") is handler
    assert registry.get("email.other") is None
    assert registry.types() == ["email.send"]
    assert registry.defaults("email.send") == {"queue": "mail"}
    assert handler(None, "a@example.com") == "sent to a@example.com"  # still callable as the function
    assert handler.name == f"{__name__}.send"


def test_a_type_has_one_handler():
    registry = HandlerRegistry()
    registry.register("email.send", send)
    registry.register("email.send", send)  # the same function again (a re-import) is fine
    with pytest.raises(ImproperlyConfigured, match="already has the handler"):
        registry.register("email.send", other)


@pytest.mark.parametrize("bad", ["Email.Send", "email..send", "", "email send", "email.send\n"])
def test_types_follow_the_envelope_rules(bad):
    with pytest.raises(ImproperlyConfigured, match="dot-separated"):
        HandlerRegistry().register(bad, send)


def test_invalid_default_options_fail_at_registration():
    with pytest.raises(PolicyInvalid, match=r"handler 'email\.send'"):
        HandlerRegistry().register("email.send", send, {"retry": {"backoff_coefficient": 0.5}})


# -- typed enqueue: keywords bound to positions (OJS args are positional) ------


def mail(ctx, to, subject="Hi", urgent=False):
    return to


def keyword_only(ctx, to, *, cc=None):
    return to


def test_keywords_that_name_parameters_become_positional_args():
    from django_ojs.handlers.registry import _positional_args

    assert _positional_args(mail, ["a@x"], {}) == (["a@x"], {})
    assert _positional_args(mail, [], {"to": "a@x", "subject": "S"}) == (["a@x", "S"], {})
    # A skipped position takes its default, so `urgent` lands third.
    assert _positional_args(mail, ["a@x"], {"urgent": True}) == (["a@x", "Hi", True], {})
    # Keywords that name no parameter stay job options (the untyped spelling).
    assert _positional_args(mail, ["a@x"], {"queue": "mail", "subject": "S"}) == (["a@x", "S"], {"queue": "mail"})


def test_a_call_the_handler_could_not_take_fails_at_enqueue():
    from django_ojs.handlers.registry import _positional_args

    with pytest.raises(TypeError):
        _positional_args(mail, ["a@x"], {"to": "b@x"})  # `to` twice
    with pytest.raises(TypeError, match="keyword-only"):
        _positional_args(keyword_only, ["a@x"], {"cc": "c@x"})
