"""Middleware chains: management operations and composition order (ojs-middleware §5, §6)."""

from __future__ import annotations

import pytest

from django_ojs.handlers.middleware import (
    Chain,
    FrozenChain,
    chain_from_paths,
    compose_enqueue,
    run_execution,
)


class Recorder:
    def __init__(self, name: str, log: list[str]):
        self.name, self.log = name, log

    def __call__(self, job, ctx, call_next):
        self.log.append(f"{self.name}>")
        result = call_next()
        self.log.append(f"<{self.name}")
        return f"{self.name}({result})"


def test_execution_chain_nests_first_outermost():
    log: list[str] = []
    chain = [Recorder("a", log), Recorder("b", log), Recorder("c", log)]
    result = run_execution(chain, "job", "ctx", lambda: log.append("handler") or "r")
    assert result == "a(b(c(r)))"
    assert log == ["a>", "b>", "c>", "handler", "<c", "<b", "<a"]


def test_empty_chains_call_straight_through():
    assert run_execution([], "job", "ctx", lambda: 42) == 42
    assert compose_enqueue([], lambda job: f"stored {job}")("j") == "stored j"


def test_errors_propagate_outward_and_short_circuit_skips_the_handler():
    seen: list[str] = []

    def observe(job, ctx, call_next):
        try:
            return call_next()
        except ValueError as exc:
            seen.append(str(exc))
            raise

    def fail():
        raise ValueError("boom")

    with pytest.raises(ValueError):
        run_execution([observe], "job", "ctx", fail)
    assert seen == ["boom"]
    assert run_execution([lambda job, ctx, call_next: "skipped"], "job", "ctx", fail) == "skipped"


def test_call_next_twice_is_refused():
    def twice(job, ctx, call_next):
        call_next()
        return call_next()

    with pytest.raises(RuntimeError, match="twice"):
        run_execution([twice], "job", "ctx", lambda: None)


def test_enqueue_chain_runs_in_order_and_can_drop():
    order: list[str] = []

    def first(job, call_next):
        order.append("first")
        return call_next(job + "+1")

    def second(job, call_next):
        order.append("second")
        return call_next(job + "+2")

    assert compose_enqueue([first, second], lambda job: f"stored {job}")("j") == "stored j+1+2"
    assert order == ["first", "second"]
    assert compose_enqueue([lambda job, call_next: None, first], lambda job: "stored")("j") is None
    assert order == ["first", "second"]  # dropped before `first` ran


class Logging:
    def __call__(self, job, ctx, call_next):
        return call_next()


class Metrics(Logging):
    pass


class Timeout(Logging):
    pass


def test_chain_management_operations():
    chain = Chain("execution")
    chain.add(Logging)
    chain.add(Timeout)
    chain.insert_before(Timeout, Metrics)
    chain.prepend(Logging())  # an instance, found later by its class
    assert chain.names() == [f"{__name__}.Logging"] * 2 + [f"{__name__}.Metrics", f"{__name__}.Timeout"]
    chain.remove(Logging)  # by class: the first instance of it
    chain.insert_after(Metrics, f"{__name__}.Logging")  # by dotted path
    assert chain.names() == [f"{__name__}.Logging", f"{__name__}.Metrics", f"{__name__}.Logging",
                             f"{__name__}.Timeout"]
    assert all(callable(m) for m in chain)
    with pytest.raises(ValueError, match="not in the execution middleware chain"):
        chain.remove("no.such.Middleware")
    chain.freeze()
    with pytest.raises(FrozenChain):
        chain.add(Logging)


def test_chains_load_from_dotted_paths():
    chain = chain_from_paths("enqueue", [f"{__name__}.Metrics", "django_ojs.handlers.middleware.EnqueueLogging"])
    assert chain.names() == [f"{__name__}.Metrics", "django_ojs.handlers.middleware.EnqueueLogging"]
    assert isinstance(next(iter(chain)), Metrics)  # classes are instantiated
