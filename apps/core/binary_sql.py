"""Statements that move large binary values, bypassing Django's client-side binding.

Django binds query parameters on the client: a ``bytes`` value is written into
the SQL text as a hex literal, twice its size, which PostgreSQL then parses back.
For request bodies of hundreds of kilobytes that costs more than the rest of the
insert. A plain psycopg cursor on the same connection (so in the same
transaction) binds on the server and can send and receive values in binary.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from django.db import connection


@contextmanager
def server_bound_cursor() -> Iterator[psycopg.Cursor]:
    """A server-side binding cursor on Django's PostgreSQL connection.

    Its errors come out as Django's, as from any other cursor, so that callers telling
    a database that is away or refusing writes from an item's own failure see the same
    classes either way (and Django marks a broken connection for closing).
    """
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        yield cursor
