"""Array parameters for PostgreSQL, written as literals in one join.

psycopg dumps a list parameter element by element in Python; services that pass
hundreds or thousands of ids per statement send them as a literal string cast to
the array type instead (``%s::bigint[]``).
"""

from collections.abc import Iterable


def array_literal(values: Iterable[int | bool | None]) -> str:
    """A PostgreSQL array literal of integers, booleans and NULLs."""
    return (
        "{"
        + ",".join(
            "NULL" if v is None else "t" if v is True else "f" if v is False else str(v)
            for v in values
        )
        + "}"
    )
