"""Rows built once for many tests, as Django's ``setUpTestData`` has them.

A module-scoped fixture builds them inside a transaction that is rolled back after the
module's last test; each test runs in a savepoint of it (the ``db`` fixture), so that
whatever a test changes in the database is undone before the next one, and gets its own
copy of the objects built (``copy.deepcopy``, as ``setUpTestData``'s attributes), so
that an instance a test changes is not what the next one reads. The ids are then the
same in every test: a module whose code under test keeps anything in the cache by id
clears it for each test (``clean_cache``). The names must not clash with what the
module's tests make for themselves (``world``'s: a suffix, ``team_world``). Only for
tests with ``db``: a ``transaction=True`` test would commit, or empty the tables, under
the others.
"""

import sys
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from django.db import connection, transaction
from pytest_django import DjangoDbBlocker

T = TypeVar("T")


class SharedRows(Generic[T]):
    """What ``build`` wrote, in a transaction of its own until ``close``; built again
    (the first rows rolled back) when ``stale`` says that what was built no longer
    serves, for rows written relative to the clock."""

    def __init__(
        self,
        blocker: DjangoDbBlocker,
        build: Callable[[], T],
        *,
        stale: Callable[[T], bool] | None = None,
    ) -> None:
        self.blocker = blocker
        self.build = build
        self.stale = stale
        self.outer: transaction.Atomic | None = None
        self.built: T | None = None

    def get(self) -> T:
        """The rows, built first if need be: from a fixture set up before ``db``, since
        building again ends the transaction that the tests' savepoints are in."""
        if self.built is not None and not (self.stale is not None and self.stale(self.built)):
            return self.built
        self.close()
        with self.blocker.unblock():
            outer = transaction.atomic()
            outer.__enter__()
            try:
                self.built = self.build()
            except BaseException:
                outer.__exit__(*sys.exc_info())
                raise
            self.outer = outer
        return self.built

    def close(self) -> None:
        if self.outer is None:
            return
        with self.blocker.unblock():
            # A test's savepoint still open here would be rolled back with the rows.
            assert not connection.savepoint_ids, "shared rows rebuilt inside a test"
            transaction.set_rollback(True)
            self.outer.__exit__(None, None, None)
        self.outer = self.built = None


def shared_rows(blocker: DjangoDbBlocker, build: Callable[[], T]) -> Iterator[T]:
    """For a module-scoped fixture: ``yield from shared_rows(django_db_blocker, build)``;
    the tests take ``copy.deepcopy`` of what it yields, through a fixture with ``db``."""
    rows = SharedRows(blocker, build)
    try:
        yield rows.get()
    finally:
        rows.close()
