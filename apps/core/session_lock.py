"""One worker at a time on a long job that spans several transactions.

A row lock lasts one transaction; a job that commits step by step (a recompute
committing each batch) needs to hold its job across them, and to let go the
moment its worker dies. A PostgreSQL advisory lock held by the database session
does both: it is released on unlock, or by the server when the session ends, for
whatever reason. Like ``crash_guard``, this needs each worker on a session of its
own (no pooler in transaction mode).
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DatabaseError, connection

logger = logging.getLogger(__name__)

# The first key of the two-key advisory locks, one per kind of job: distinct from any
# single-key lock a tool of the operator's might take.
RECOMPUTE_LOCKS = 0x52454300  # "REC\0"


@contextmanager
def session_lock(namespace: int, key: int) -> Iterator[bool]:
    """Yields True while this session holds the lock (``namespace``, ``key``), False
    when another session holds it; never waits. Use outside a transaction."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [namespace, key])
        row = cursor.fetchone()
    held = bool(row and row[0])
    try:
        yield held
    finally:
        if held:
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [namespace, key])
            except DatabaseError:
                # The session is broken or gone; a gone session holds no lock, and a broken
                # one is closed so that it cannot keep the lock.
                logger.warning("advisory lock %s/%s could not be released", namespace, key)
                connection.close()
