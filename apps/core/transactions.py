"""Transactions of background work that can be redone, committed without waiting on disk."""

from django.db import connection


def commit_without_waiting() -> None:
    """Let the enclosing transaction commit without waiting for its WAL to reach disk.

    Only for work that is redone when lost: a drain that deletes its raw batches in
    the same transaction, a finalization that leaves its traces open otherwise. If
    PostgreSQL crashes within a fraction of a second after such a commit, the
    transaction is lost as a whole, never in part, and the next run does it again.
    Call it inside ``transaction.atomic()``.
    """
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit TO OFF")
