"""Operators see what-if runs and saved scenarios in the admin."""

import pytest

from apps.whatif.models import RunKind, SavedScenario, WhatIfRun
from tests.builders.configuration import make_pipeline, make_user
from tests.conftest import TeamWorld, client_for


@pytest.mark.django_db
def test_a_superuser_lists_runs_and_scenarios(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "rag")
    run = WhatIfRun.objects.create(
        team=world.team, pipeline=pipeline, kind=RunKind.REPLAY, key="k" * 64, params={}
    )
    SavedScenario.objects.create(pipeline=pipeline, name="faster", changes=[])
    admin = client_for(make_user("root", is_staff=True, is_superuser=True))

    assert admin.get("/admin/whatif/whatifrun/").status_code == 200
    assert admin.get(f"/admin/whatif/whatifrun/{run.pk}/change/").status_code == 200
    assert b"faster" in admin.get("/admin/whatif/savedscenario/").content
    assert client_for(world.owner).get("/admin/whatif/whatifrun/").status_code == 302
