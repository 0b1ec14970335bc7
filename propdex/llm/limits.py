"""Process-wide limits on LLM requests: how many are in flight, and how many start per minute.

Every document of a run is processed in its own thread, and each thread talks to the server
through its own calls; the limits must hold for the sum of them. So limiters live in a
registry keyed by the server's base URL (plus the limit values, so two different configurations
never silently share one), and every ``LLMClient`` pointed at the same server gets the same
object. Prefect's global concurrency limits need a running API server; this works the same on
the ephemeral API and in plain Python.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from propdex.stopping import check_not_stopped


class TokenBucket:
    """Requests-per-minute pacing: ``rate`` tokens per second, at most ``capacity`` saved up.

    Callers reserve a token under the lock and sleep outside it, so waiting callers queue in
    order and a slow sleeper never blocks the others' bookkeeping. The balance may go negative:
    that is the queue of reservations already handed out.
    """

    def __init__(
        self,
        per_minute: int,
        *,
        capacity: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if per_minute <= 0:
            raise ValueError(f"per_minute must be positive, got {per_minute}")
        self.rate = per_minute / 60.0
        # capacity 1 spaces requests evenly (60/rpm s apart); larger values allow a burst,
        # which hosted gateways usually punish with 429s, hence the default.
        self.capacity = capacity
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = capacity
        self._updated = clock()

    def reserve(self) -> float:
        """Take one token and return how long the caller must wait before using it."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._updated) * self.rate)
            self._updated = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            self._sleep(wait)


class RequestLimiter:
    """A bound on requests in flight plus optional requests-per-minute pacing."""

    def __init__(self, concurrency: int, rpm: int = 0):
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.concurrency = concurrency
        self.rpm = rpm
        self._slots = threading.BoundedSemaphore(concurrency)
        self._bucket = TokenBucket(rpm) if rpm > 0 else None
        self._count_lock = threading.Lock()
        self._in_flight = 0
        self.max_in_flight = 0  # highest concurrency seen; for tests and benchmarks

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one request slot for the duration of the block."""
        # Pace first, then take a slot: a caller sleeping for its RPM turn must not hold a
        # concurrency slot that another, already-paced caller could use.
        if self._bucket is not None:
            self._bucket.acquire()
        with self._slots:
            # After the wait for a slot, which may outlast the run: a request of a run
            # cancelled meanwhile is not sent (propdex.stopping).
            check_not_stopped("LLM request")
            with self._count_lock:
                self._in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self._in_flight)
            try:
                yield
            finally:
                with self._count_lock:
                    self._in_flight -= 1


_registry: dict[tuple[str, int, int], RequestLimiter] = {}
_registry_lock = threading.Lock()


def limiter_for(base_url: str, concurrency: int, rpm: int) -> RequestLimiter:
    """The one limiter of this process for a server and its limits."""
    key = (base_url.rstrip("/"), concurrency, rpm)
    with _registry_lock:
        limiter = _registry.get(key)
        if limiter is None:
            limiter = _registry[key] = RequestLimiter(concurrency, rpm)
        return limiter
