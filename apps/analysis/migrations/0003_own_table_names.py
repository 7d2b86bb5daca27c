"""Stage samples and dirty buckets take the analysis app's table names.

They were created by the rollups app and kept its names when they moved here. The
tables are renamed in place (rows, indexes and constraints stay), and so are the
stage samples' day partitions and default partition, whose names the partition
maintenance builds from the parent's.
"""

from django.db import migrations

OLD, NEW = "rollups_stagesample", "analysis_stagesample"


def _rename_partitions(apps: object, schema_editor: object, *, old: str, new: str) -> None:
    connection = schema_editor.connection  # type: ignore[attr-defined]
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT child.relname FROM pg_inherits
            JOIN pg_class parent ON pg_inherits.inhparent = parent.oid
            JOIN pg_class child ON pg_inherits.inhrelid = child.oid
            WHERE parent.relname = %s AND child.relname LIKE %s
            ORDER BY child.relname
            """,
            [new if old == OLD else old, old.replace("_", r"\_") + r"\_%"],
        )
        for (name,) in cursor.fetchall():
            renamed = new + name[len(old) :]
            cursor.execute(f'ALTER TABLE "{name}" RENAME TO "{renamed}"')


def forwards(apps: object, schema_editor: object) -> None:
    _rename_partitions(apps, schema_editor, old=OLD, new=NEW)


def backwards(apps: object, schema_editor: object) -> None:
    _rename_partitions(apps, schema_editor, old=NEW, new=OLD)


class Migration(migrations.Migration):
    # After every migration that names the old tables in its SQL.
    dependencies = [
        ("analysis", "0002_recompute"),
        ("rollups", "0006_ten_minute_buckets"),
    ]

    operations = [
        migrations.AlterModelTable(name="stagesample", table=None),
        migrations.AlterModelTable(name="dirtybucket", table=None),
        migrations.RunPython(forwards, backwards),
    ]
