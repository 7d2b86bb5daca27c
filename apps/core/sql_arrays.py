"""Array parameters for PostgreSQL, written as literals in one join.

psycopg dumps a list parameter element by element in Python; services that pass
hundreds or thousands of ids per statement send them as a literal string cast to
the array type instead (``%s::bigint[]``).
"""

from collections.abc import Iterable

from django.db import connection
from django.db.models import BooleanField, Model
from django.db.models.expressions import RawSQL


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


def column_in(model: type[Model], column: str, values: Iterable[int]) -> RawSQL:
    """A filter ``column = ANY(<array literal>)``: one parameter for thousands of ids,
    where ``column__in`` would prepare and send each id as a parameter of its own."""
    table = connection.ops.quote_name(model._meta.db_table)
    name = connection.ops.quote_name(column)
    # Quoted names of our own model; the values go as one parameter.
    return RawSQL(  # noqa: S611
        f"{table}.{name} = ANY(%s::bigint[])",
        [array_literal(values)],
        output_field=BooleanField(),
    )
