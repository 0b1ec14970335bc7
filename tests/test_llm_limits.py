"""The process-wide request limiter: concurrency bound, requests-per-minute pacing, registry."""

from __future__ import annotations

import threading

import pytest

from propdex.llm.limits import RequestLimiter, TokenBucket, limiter_for


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_full_bucket_grants_the_first_request_at_once():
    assert 0.0 == TokenBucket(60, clock=FakeClock()).reserve()


def test_requests_at_the_same_instant_queue_60_over_rpm_apart():
    bucket = TokenBucket(60, clock=FakeClock())  # one per second
    assert [0.0, 1.0, 2.0, 3.0] == [bucket.reserve() for _ in range(4)]


def test_waiting_refills_the_bucket():
    clock = FakeClock()
    bucket = TokenBucket(120, clock=clock)  # one per 0.5 s
    bucket.reserve()
    clock.now += 0.5
    assert 0.0 == bucket.reserve()


def test_the_bucket_saves_up_no_more_than_its_capacity():
    clock = FakeClock()
    bucket = TokenBucket(60, capacity=2, clock=clock)
    clock.now += 3600  # an idle hour saves up two tokens, not 3600
    assert [0.0, 0.0, 1.0] == [bucket.reserve() for _ in range(3)]


def test_acquire_sleeps_for_the_reserved_wait():
    slept: list[float] = []
    bucket = TokenBucket(30, clock=FakeClock(), sleep=slept.append)  # one per 2 s
    for _ in range(3):
        bucket.acquire()
    assert [2.0, 4.0] == slept


@pytest.mark.parametrize("rpm", [0, -5])
def test_a_bucket_needs_a_positive_rate(rpm):
    with pytest.raises(ValueError):
        TokenBucket(rpm)


def test_no_more_than_concurrency_requests_hold_a_slot():
    limiter = RequestLimiter(concurrency=2)
    entered = threading.Semaphore(0)
    gate = threading.Event()

    def request() -> None:
        with limiter.slot():
            entered.release()
            gate.wait()

    threads = [threading.Thread(target=request) for _ in range(6)]
    for thread in threads:
        thread.start()
    entered.acquire()
    entered.acquire()  # two are inside, the other four wait for a slot
    gate.set()
    for thread in threads:
        thread.join()
    assert 2 == limiter.max_in_flight


def test_a_slot_is_released_when_the_request_raises():
    limiter = RequestLimiter(concurrency=1)
    with pytest.raises(RuntimeError):
        with limiter.slot():
            raise RuntimeError("request failed")
    with limiter.slot():  # would block forever if the slot had leaked
        pass
    assert 1 == limiter.max_in_flight


def test_a_limiter_needs_at_least_one_slot():
    with pytest.raises(ValueError):
        RequestLimiter(concurrency=0)


def test_the_registry_shares_one_limiter_per_server_and_limits():
    first = limiter_for("http://limits-test:1/v1", 4, 60)
    second = limiter_for("http://limits-test:1/v1/", 4, 60)
    assert first is second


@pytest.mark.parametrize(
    ("url", "concurrency", "rpm"),
    [("http://limits-test:2/v1", 4, 60), ("http://limits-test:1/v1", 5, 60), ("http://limits-test:1/v1", 4, 0)],
)
def test_the_registry_keeps_other_servers_and_limits_apart(url, concurrency, rpm):
    assert limiter_for("http://limits-test:1/v1", 4, 60) is not limiter_for(url, concurrency, rpm)
