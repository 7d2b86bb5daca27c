"""The check that keeps SQL on ``_meta.db_table``: it finds a literal table name in a
source file, passes migrations, and passes the project's own code."""

from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from apps.analysis.models import StageSample
from apps.core.table_names import literal_table_names, project_tables


def test_the_project_tables_include_every_app_s() -> None:
    tables = project_tables()
    assert StageSample._meta.db_table in tables
    assert "ingest_span" in tables
    assert "auth_user" not in tables  # Django's own, not the project's


def test_a_literal_name_is_found_with_its_line_and_migrations_are_not_read(
    tmp_path: Path,
) -> None:
    (tmp_path / "writer.py").write_text(
        'SQL = "SELECT 1"\nSQL2 = "DELETE FROM ingest_trace WHERE id = %s"\n'
        'STAGING = "ingest_span_rows"  # another name that only starts like one\n'
    )
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0001_old.py").write_text('SQL = "UPDATE ingest_trace SET x = 1"\n')
    found = literal_table_names([tmp_path], project_tables())
    assert [(f.path.name, f.line, f.table) for f in found] == [("writer.py", 2, "ingest_trace")]


def test_the_command_fails_on_a_literal_name_and_passes_the_project(tmp_path: Path) -> None:
    (tmp_path / "reader.py").write_text('Q = "SELECT * FROM analysis_stagesample"\n')
    with pytest.raises(CommandError, match=r"reader.py:1: analysis_stagesample"):
        call_command("check_table_names", str(tmp_path))
    base = Path(settings.BASE_DIR)
    call_command("check_table_names", str(base / "apps"), str(base / "budgets_site"))
