"""Planner switches hold for the block's statements only."""

import pytest
from django.db import connection

from apps.core.planner import planner_settings


def setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return str(cursor.fetchone()[0])


@pytest.mark.django_db
def test_switches_hold_inside_the_block_and_not_after() -> None:
    assert setting("enable_seqscan") == "on"
    with planner_settings(enable_seqscan=False, enable_bitmapscan=False):
        assert setting("enable_seqscan") == "off"
        assert setting("enable_bitmapscan") == "off"
        assert setting("jit") == "off"
    assert setting("enable_seqscan") == "on"
    assert setting("enable_bitmapscan") == "on"


@pytest.mark.django_db
def test_a_failing_block_leaves_nothing_behind() -> None:
    with pytest.raises(ZeroDivisionError), planner_settings(enable_indexscan=False):
        raise ZeroDivisionError
    assert setting("enable_indexscan") == "on"


def test_only_plan_switches_are_accepted() -> None:
    with pytest.raises(ValueError, match="work_mem"), planner_settings(work_mem=False):
        pass
