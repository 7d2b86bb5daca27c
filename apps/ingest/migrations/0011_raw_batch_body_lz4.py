from django.db import migrations

# Every accepted request's body is written once, read once by the drain and deleted.
# Stored as it is (0003), a 512-span batch of span rows is about 140 kB of TOAST and WAL;
# compressed with lz4 it is about a fifth of that, and the insert costs less than
# writing it whole (docs/performance.md). pglz, the only method of a server built
# without lz4 (the embedded development server), costs twice as much as not compressing:
# there the body stays stored as it is. One statement, so both change or neither.
TO_LZ4 = """
DO $$
BEGIN
    ALTER TABLE ingest_rawbatch
        ALTER COLUMN body SET COMPRESSION lz4,
        ALTER COLUMN body SET STORAGE EXTENDED;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'no lz4 in this server: raw batch bodies stay stored uncompressed';
END $$;
"""
TO_EXTERNAL = """
ALTER TABLE ingest_rawbatch
    ALTER COLUMN body SET COMPRESSION default,
    ALTER COLUMN body SET STORAGE EXTERNAL
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0010_trace_list_search_and_duration_indexes"),
    ]

    operations = [migrations.RunSQL(TO_LZ4, TO_EXTERNAL)]
