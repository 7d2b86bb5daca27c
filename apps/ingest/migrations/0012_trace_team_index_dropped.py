import django.db.models.deletion
from django.db import migrations, models

# The unique (team_id, trace_id) index leads with the team, so the foreign key's own
# index on team_id only cost every trace insert and analysis update an index entry.
# Only the index goes: Django's AlterField would also drop and re-add the foreign key,
# which checks every trace row again under lock. CONCURRENTLY, outside a transaction,
# so that ingestion goes on while it is dropped.


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("ingest", "0011_raw_batch_body_lz4"),
        ("teams", "0006_metrics_tokens"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="trace",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    "DROP INDEX CONCURRENTLY IF EXISTS ingest_trace_team_id_edd15879",
                    reverse_sql=(
                        "CREATE INDEX CONCURRENTLY IF NOT EXISTS ingest_trace_team_id_edd15879"
                        " ON ingest_trace (team_id)"
                    ),
                ),
            ],
        ),
    ]
