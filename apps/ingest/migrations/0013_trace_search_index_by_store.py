from django.db import migrations

# The GIN index on the traces' search sets leaves the model: it belongs to the span
# store now (``apps.ingest.services.search_index``). PostgreSQL's store keeps it, as
# migration 0010 made it; a store that keeps the search sets itself drops it
# (``manage.py span_store_migrate``). The database is not touched here.


class Migration(migrations.Migration):
    dependencies = [("ingest", "0012_trace_team_index_dropped")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="trace", name="trace_search_hashes"),
            ],
            database_operations=[],
        ),
    ]
