"""Integer columns of a queryset as one numpy array, without a Python object per value.

A busy 10-second bucket holds hundreds of thousands of stage samples and is
recomputed several times while its traces finalize, so fetching is most of a
rollup's cost. On PostgreSQL the rows come through ``COPY ... (FORMAT BINARY)``
with every column cast to bigint: fixed-size rows that numpy reads in place.
Elsewhere the rows come through ``values_list``.
"""

from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Model, QuerySet
from numpy.typing import NDArray

_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00"
_COPY_HEADER_SIZE = 19
_COPY_TRAILER_SIZE = 2


def int_columns(queryset: QuerySet[Model, Any], *fields: Any) -> NDArray[np.int64]:
    """The ``fields`` (names or expressions with integer values, never NULL; cast
    booleans) of every row, as an array of shape (rows, len(fields))."""
    rows = queryset.values_list(*fields)
    if connection.vendor != "postgresql":
        return np.array(list(rows), dtype=np.int64).reshape(-1, len(fields))
    sql, params = rows.query.sql_with_params()
    names = [f"c{index}" for index in range(len(fields))]
    outer = ", ".join(f"{name}::int8" for name in names)
    statement = (
        f"COPY (SELECT {outer} FROM ({sql}) AS q({', '.join(names)})) TO STDOUT (FORMAT BINARY)"
    )
    with connection.cursor() as cursor, cursor.cursor.copy(statement, params) as copy:
        data = b"".join(bytes(block) for block in copy)
    return _parse_binary_copy(data, len(fields))


def _parse_binary_copy(data: bytes, width: int) -> NDArray[np.int64]:
    if not data.startswith(_COPY_HEADER):
        raise ValueError("unexpected COPY output")
    row = np.dtype([("fields", ">i2"), ("cells", [("size", ">i4"), ("value", ">i8")], (width,))])
    body = len(data) - _COPY_HEADER_SIZE - _COPY_TRAILER_SIZE
    if body % row.itemsize:
        raise ValueError("COPY output is not made of fixed-size bigint rows")
    records = np.frombuffer(data, dtype=row, count=body // row.itemsize, offset=_COPY_HEADER_SIZE)
    if (records["fields"] != width).any() or (records["cells"]["size"] != 8).any():
        raise ValueError("COPY output holds NULLs or unexpected columns")
    return records["cells"]["value"].astype(np.int64)
