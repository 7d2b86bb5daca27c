from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.pipelines.models import Pipeline
from budgets_site.celery import app
from tests.builders.demo_traffic import Sent, rag_pipeline, send_traffic
from tests.conftest import TeamWorld


@pytest.fixture
def eager() -> Iterator[None]:
    """The what-if task runs in this process when its run is committed, as a worker would."""
    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


@dataclass
class Chat:
    world: TeamWorld
    pipeline: Pipeline
    sent: Sent
    theirs: Pipeline
    # Fixed bounds around the traffic: a question asked twice stays the same question
    # across a 10-second boundary, where a window ending "now" would move.
    window: dict[str, str]


@pytest.fixture
def chat(world: TeamWorld) -> Chat:
    """acme's RAG pipeline with 300 simulated requests of the last minutes, and globex's
    pipeline of the same slug with traffic of its own."""
    pipeline = rag_pipeline(world.team)
    sent = send_traffic(world.team, traces=300, seed=5)
    theirs = rag_pipeline(world.other_team)
    send_traffic(world.other_team, traces=50, seed=6)
    now = timezone.now()
    window = {
        "from": (now - timedelta(hours=1)).isoformat(),
        "to": (now + timedelta(minutes=5)).isoformat(),
    }
    return Chat(world, pipeline, sent, theirs, window)
