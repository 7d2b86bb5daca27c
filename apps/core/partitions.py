"""Daily range partitions of the large tables on PostgreSQL.

A table partitioned by a bigint nanosecond column gets one partition per UTC day
(``<table>_pYYYYMMDD``) and a default partition for anything outside them, so no
row is ever refused. Retention drops whole day partitions instead of deleting
rows. Each app registers its partitioned tables with the setting that holds their
retention (``partitioned_table_register`` in its ``ready``); the storage task keeps
all of them without knowing whose they are.
"""

import re
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import connection

from apps.core.time import day_start_ns

PARTITION_SUFFIX = re.compile(r"_p(\d{8})$")
# Partitions are prepared this many days ahead, so a clock a little fast finds its day.
DAYS_AHEAD = 2

# table -> name of the setting with its retention in days
PARTITIONED_TABLES: dict[str, str] = {}


def partitioned_table_register(table: str, retention_setting: str) -> None:
    PARTITIONED_TABLES[table] = retention_setting


def partitions_maintain(today: date) -> tuple[list[str], list[str]]:
    """Create the coming days' partitions of every registered table and drop expired ones."""
    created: list[str] = []
    dropped: list[str] = []
    for table, setting in sorted(PARTITIONED_TABLES.items()):
        cutoff = today - timedelta(days=getattr(settings, setting))
        created += partitions_ensure(
            table, first=today - timedelta(days=1), last=today + timedelta(days=DAYS_AHEAD)
        )
        dropped += partitions_drop_before(table, cutoff=cutoff)
    return created, dropped


def create_partitioned_table_sql(table: str, columns_sql: str, key: str) -> list[str]:
    return [
        f'CREATE TABLE "{table}" ({columns_sql}) PARTITION BY RANGE ("{key}")',
        f'CREATE TABLE "{table}_default" PARTITION OF "{table}" DEFAULT',
    ]


def partitions_of(table: str) -> dict[date, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT child.relname FROM pg_inherits
            JOIN pg_class parent ON pg_inherits.inhparent = parent.oid
            JOIN pg_class child ON pg_inherits.inhrelid = child.oid
            WHERE parent.relname = %s
            """,
            [table],
        )
        names = [row[0] for row in cursor.fetchall()]
    days = {}
    for name in names:
        match = PARTITION_SUFFIX.search(name)
        if match:
            days[datetime.strptime(match.group(1), "%Y%m%d").replace(tzinfo=UTC).date()] = name
    return days


def partitions_ensure(table: str, *, first: date, last: date) -> list[str]:
    """Create the day partitions from ``first`` to ``last`` that do not exist yet.

    Rows already sitting in the default partition for such a day are moved into
    the new partition (PostgreSQL refuses to attach over matching default rows).
    """
    existing = partitions_of(table)
    created = []
    day = first
    while day <= last:
        if day not in existing:
            name = f"{table}_p{day:%Y%m%d}"
            low, high = day_start_ns(day), day_start_ns(day + timedelta(days=1))
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE TABLE "{name}" (LIKE "{table}" INCLUDING ALL)')
                cursor.execute(
                    f'WITH moved AS (DELETE FROM "{table}_default" '
                    f"WHERE start_ns >= %s AND start_ns < %s RETURNING *) "
                    f'INSERT INTO "{name}" SELECT * FROM moved',
                    [low, high],
                )
                cursor.execute(
                    f'ALTER TABLE "{table}" ATTACH PARTITION "{name}" '
                    f"FOR VALUES FROM ({low}) TO ({high})"
                )
            created.append(name)
        day += timedelta(days=1)
    return created


def partitions_drop_before(table: str, *, cutoff: date, model_delete: object = None) -> list[str]:
    """Drop day partitions that end on or before ``cutoff`` and purge old default rows."""
    dropped = []
    for day, name in sorted(partitions_of(table).items()):
        if day + timedelta(days=1) <= cutoff:
            with connection.cursor() as cursor:
                cursor.execute(f'DROP TABLE "{name}"')
            dropped.append(name)
    with connection.cursor() as cursor:
        cursor.execute(f'DELETE FROM "{table}_default" WHERE start_ns < %s', [day_start_ns(cutoff)])
    return dropped


def create_model_table(schema_editor: object, model: type, *, key: str = "start_ns") -> None:
    """Create a model's table; on PostgreSQL as a table partitioned by range of ``key``.

    Used from migrations through ``SeparateDatabaseAndState``: Django's own
    ``CreateModel`` cannot declare partitioning.
    """
    editor = schema_editor  # BaseDatabaseSchemaEditor; typed loosely for migrations
    conn = editor.connection  # type: ignore[attr-defined]
    meta = model._meta  # type: ignore[attr-defined]
    columns = []
    for field in meta.local_fields:
        db_type = field.db_type(conn)
        if db_type is None:
            continue
        check = field.db_check(conn)
        columns.append(
            f'"{field.column}" {db_type}'
            + ("" if field.null else " NOT NULL")
            + (f" CHECK ({check})" if check else "")
        )
    pk_columns = ", ".join(f'"{field.column}"' for field in meta.pk_fields)
    columns.append(f"PRIMARY KEY ({pk_columns})")
    table = meta.db_table
    for statement in create_partitioned_table_sql(table, ", ".join(columns), key):
        editor.execute(statement)  # type: ignore[attr-defined]
    for index in meta.indexes:
        editor.execute(index.create_sql(model, editor))  # type: ignore[attr-defined]


def drop_model_table(schema_editor: object, model: type) -> None:
    schema_editor.execute(f'DROP TABLE IF EXISTS "{model._meta.db_table}" CASCADE')  # type: ignore[attr-defined]
