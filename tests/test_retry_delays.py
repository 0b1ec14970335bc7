"""The waits before a failed task runs again: the decorators' delays times retry_delay_scale."""

from __future__ import annotations

from propdex.settings import Settings
from tasks.documents import embed, propose
from tasks.policies import with_scaled_retry_delays


def test_a_list_of_delays_is_scaled_item_by_item():
    scaled = with_scaled_retry_delays(embed, Settings(retry_delay_scale=0.5))

    assert [1.0, 5.0] == scaled.retry_delay_seconds


def test_a_single_delay_is_scaled():
    scaled = with_scaled_retry_delays(propose, Settings(retry_delay_scale=0))

    assert 0 == scaled.retry_delay_seconds


def test_the_default_scale_keeps_the_decorators_delays():
    assert [2, 10] == with_scaled_retry_delays(embed, Settings()).retry_delay_seconds
