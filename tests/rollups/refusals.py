"""Real refusals by PostgreSQL: a trigger that raises for one pipeline's rows of a table."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


@contextmanager
def refused_rows(table: str, *, pipeline_id: int, message: str) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            CREATE FUNCTION refuse_{table}() RETURNS trigger AS $$
            BEGIN
                IF NEW.pipeline_id = {int(pipeline_id)} THEN
                    RAISE EXCEPTION '{message}';
                END IF;
                RETURN NEW;
            END $$ LANGUAGE plpgsql;
            CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON {table}
                FOR EACH ROW EXECUTE FUNCTION refuse_{table}();
            """
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TRIGGER refuse ON {table}; DROP FUNCTION refuse_{table}();")
