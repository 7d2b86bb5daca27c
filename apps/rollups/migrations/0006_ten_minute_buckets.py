from django.db import migrations

# Ten-minute buckets are new: every ten minutes that has minute buckets is marked
# dirty, so the rollup passes build them from those minutes (and rebuild the hours
# above from them, which gives the same hours). Until a slot is built, reads tile it
# with minutes, as the resolution's availability starts at its first bucket.
MARK = """
INSERT INTO rollups_dirtybucket (pipeline_id, resolution, bucket_start, marked_at)
SELECT DISTINCT pipeline_id, 600, date_bin('10 minutes', bucket_start, TIMESTAMPTZ 'epoch'), now()
FROM rollups_rollupbucket
WHERE resolution = 60
ON CONFLICT (pipeline_id, resolution, bucket_start) DO NOTHING
"""
FORGET = "DELETE FROM rollups_rollupbucket WHERE resolution = 600"


class Migration(migrations.Migration):
    dependencies = [
        ("rollups", "0005_samples_and_dirty_buckets_to_analysis"),
        ("analysis", "0001_initial"),
    ]

    operations = [migrations.RunSQL(MARK, reverse_sql=FORGET)]
