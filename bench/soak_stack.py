"""The soak benchmark's stack and data: processes as production runs them, one team.

gunicorn (a master and ``web_workers`` threaded workers, with an access log for the
status counts), one Celery worker on every queue with Celery's prefork pool, and
``celery beat`` as a process of its own, against the benchmark's database and the
broker and cache of ``CELERY_BROKER_URL`` and ``REDIS_URL``. Every setting keeps its
default but two: ``DEBUG`` is off, and webhooks may reach the receiver on loopback.
"""

import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.ingest import _process, _wait_http
from tests.processes import free_port

# Stages as in the demo pipeline (demo/budgets.yaml), which the simulator's traces fit;
# the ttft budget is under the simulated p95 (about 740 ms), so its alert fires and keeps
# firing, and reminders keep the delivery path busy through the run.
STAGES: list[tuple[str, int, list[dict[str, Any]]]] = [
    ("auth", 40, [{"span_name": "auth*"}]),
    ("history", 120, [{"span_name": "history.*"}]),
    ("rewrite", 250, [{"span_name": "rewrite*"}]),
    ("embedding", 120, [{"attributes": {"gen_ai.operation.name": "embeddings"}}]),
    ("retrieval", 350, [{"attributes": {"openinference.span.kind": "RETRIEVER"}}]),
    ("rerank", 200, [{"attributes": {"openinference.span.kind": "RERANKER"}}]),
    ("tools", 600, [{"attributes": {"gen_ai.operation.name": "execute_tool"}}]),
    ("ttft", 400, [{"attributes": {"gen_ai.operation.name": "chat"},
                    "portion": "until_first_token"}]),
    ("generation", 1200, [{"attributes": {"gen_ai.operation.name": "chat"},
                           "portion": "after_first_token"}]),
]  # fmt: skip
ALERT_STAGE = "ttft"
RENOTIFY_MINUTES = 1


@dataclass
class Stack:
    port: int
    logs: Path
    pids: dict[str, int]  # web, worker, beat: the processes started (their children are found)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def access_log(self) -> Path:
        return self.logs / "access.log"


def stack_env() -> dict[str, str]:
    from tests.processes import process_env

    # The receiver listens on loopback, on a port of its own choosing. The daily quota
    # bounds a day's disk, not capacity: half an hour at half capacity, and the runs of one
    # day before it, would pass it on a fast machine.
    return process_env(
        DEBUG="false", WEBHOOK_ALLOW_PRIVATE_IPS="true", INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY="0"
    )


@contextmanager
def running_stack(logs: Path, *, web_workers: int, concurrency: int) -> Iterator[Stack]:
    logs.mkdir(parents=True, exist_ok=True)
    for stale in ("access.log", "web.log", "worker.log", "beat.log"):
        (logs / stale).unlink(missing_ok=True)
    # The scheduler's state (a dbm shelf: several files) would carry the last run's times
    # over, and an hourly task would come due at a moment of the last run's choosing.
    for stale_state in logs.glob("beat-schedule*"):
        stale_state.unlink()
    port = free_port()
    env = stack_env()
    web = [
        sys.executable, "-m", "gunicorn", "budgets_site.wsgi", "--workers", str(web_workers),
        "--worker-class", "gthread", "--threads", "4", "--bind", f"127.0.0.1:{port}",
        "--keep-alive", "30", "--access-logfile", str(logs / "access.log"),
        "--access-logformat", "%(s)s %(M)s %(U)s %(t)s",
        # The control socket's default path is one per user, shared by every gunicorn.
        "--no-control-socket",
    ]  # fmt: skip
    celery = [sys.executable, "-m", "celery", "-A", "budgets_site"]
    worker = [
        *celery, "worker", "-Q", "ingest,rollup,alerts,whatif", "--concurrency", str(concurrency),
        "--loglevel", "WARNING", "--hostname", f"soak-{port}@%h",
    ]  # fmt: skip
    beat = [*celery, "beat", "--loglevel", "WARNING", "--schedule", str(logs / "beat-schedule")]
    with ExitStack() as processes:
        # Left in reverse: the scheduler stops first, the web process last.
        started = {
            name: processes.enter_context(_process(command, logs / f"{name}.log", env)).pid
            for name, command in (("web", web), ("worker", worker), ("beat", beat))
        }
        # Two web workers, the worker and the scheduler import Django at once: slow to boot
        # on two busy cores.
        _wait_http(port, timeout=180)
        yield Stack(port=port, logs=logs, pids=started)


def soak_setup(receiver_url: str) -> str:
    """The team, its pipeline, stages, webhook channel and alert rule; its ingest token."""
    from django.test import override_settings

    from apps.alerts.models import ChannelKind, RuleScope
    from apps.alerts.services.channels import channel_create
    from apps.alerts.services.rules import alert_rule_create
    from apps.demo.traffic.traffic_plan import DEFAULT_ROOT_SPAN, DEFAULT_SERVICE
    from apps.ingest.services.storage import storage_maintain
    from apps.teams.services import ingest_token_create
    from tests.builders.configuration import (
        make_pipeline,
        make_rule,
        make_stage,
        make_team,
        make_user,
    )

    team = make_team("soak", owner=make_user("soak"))
    pipeline = make_pipeline(
        team, "rag-chat", name="RAG chat answer", match_service=DEFAULT_SERVICE,
        match_root_span=DEFAULT_ROOT_SPAN, budget={"p50": 1200, "p95": 2500},
        objective_target=99.0, objective_threshold_ms=4000,
    )  # fmt: skip
    stages = {}
    for slug, budget_ms, rules in STAGES:
        stages[slug] = make_stage(pipeline, slug, budget_ms=budget_ms)
        for rule in rules:
            make_rule(stages[slug], **rule)
    # The receiver listens on loopback: allowed here, where the channel is saved, as in
    # the environment of the processes that send.
    with override_settings(WEBHOOK_ALLOW_PRIVATE_IPS=True):
        channel = channel_create(team=team, slug="hook", kind=ChannelKind.WEBHOOK, url=receiver_url)
    alert_rule_create(
        team=team, pipeline=pipeline, slug=f"{ALERT_STAGE}-over-budget", channels=[channel],
        scope=RuleScope.STAGE, stage=stages[ALERT_STAGE], renotify_minutes=RENOTIFY_MINUTES,
    )  # fmt: skip
    _, raw = ingest_token_create(team=team, name="soak", created_by=None)
    # A running deployment's hourly storage task has made today's and the coming days'
    # span partitions long before; a fresh database has none until the first, an hour
    # after the scheduler starts, and every span would sit in the default partition.
    storage_maintain()
    return raw
