"""Array literals read back by PostgreSQL as the values they were built from."""

import pytest
from django.db import connection

from apps.core.sql_arrays import array_literal

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("values", "sql_type"),
    [
        ([], "bigint"),
        ([1, -2, 2**63 - 1, -(2**63), None], "bigint"),
        ([True, False, None], "bool"),
        ([0, 7, None, 3], "int"),
    ],
)
def test_an_array_literal_reads_back_as_its_values(values: list, sql_type: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT %s::{sql_type}[]", [array_literal(values)])
        assert cursor.fetchone()[0] == values
