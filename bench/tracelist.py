"""Server time of the trace list at 10 million spans: each filter kind and order, deep pages.

The data is written by PostgreSQL itself (``INSERT … SELECT`` over ``generate_series``),
as analysis would have left it: ``BENCH_SPANS`` spans (default 10,000,000) in traces of
10 spans, so about a million traces, started over the last 7 days across four teams
(55 % of the traces in one, 15 % in each of the others); per team two pipelines (60 % and
30 % of its traces, four stages each, three of them with a budget) and unmatched traffic
(10 %); 2 % of the traces failed, 0.5 % lost their root. Durations and stage times are
lognormal. Each trace carries the attribute set analysis writes (about 20 pairs: service,
route, operation names, model among four at 60/30/9/1 %, ``user.id`` among 20,000,
a tool among five, token counts, and four values of its own such as a session id),
hashed by the same function; the spans carry the matching attributes.

Requests go through the full Django stack in process, signed in as a member of the big
team (550,000 traces) with a session, or with an API token for the API rows: one
warm-up, then ``REQUESTS`` timed ones per URL. Deep pages start from a cursor taken
100,000 traces (or the stated depth) into the list, as following "Next page" that far
would. ``BENCH_KEEPDB=1`` keeps the loaded test database for another run (reusing it
when it is there); otherwise it is dropped at the end.

With ``BENCH_SPAN_STORE_URL`` (a ``SPAN_STORE_URL`` of a ClickHouse store) the list runs
as on a deployment whose spans are there: the store's database is made anew, the trace
rows' sets copied into it (``span_store_migrate --copy-search-sets``) and PostgreSQL's
GIN index on them dropped, so the filters past the list's walk of 5,000 traces ask the
store for candidates. Without it the index is (re)built, as ``span_store_migrate`` does.
"""

import os
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.db import connection
from django.http import QueryDict
from django.test import Client
from django.test.utils import override_settings, setup_test_environment

from apps.analysis.models import StageSample
from apps.core.startup import freeze_startup_objects
from apps.core.time import NS_PER_DAY, NS_PER_MS, NS_PER_S, to_datetime
from apps.ingest.models import Span, Trace
from bench.report import print_rows, print_table, summarise, write

TRACE_TABLE = Trace._meta.db_table
SPAN_TABLE = Span._meta.db_table
SAMPLE_TABLE = StageSample._meta.db_table

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from apps.teams.models import Team

SPANS = int(os.environ.get("BENCH_SPANS", "10000000"))
KEEPDB = os.environ.get("BENCH_KEEPDB", "") == "1"
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "30"))
SPAN_STORE_URL = os.environ.get("BENCH_SPAN_STORE_URL", "")
SPANS_PER_TRACE = 10
TRACES = SPANS // SPANS_PER_TRACE
DAYS = 7
GOAL_MS = 100
DEEP = 100_000

# (slug, share of the traces): the big team takes 11 of every 20, the others 3 each.
TEAMS = [("tl-big", 11), ("tl-two", 3), ("tl-three", 3), ("tl-four", 3)]
PIPELINES = {
    "rag-chat": ("POST /v1/chat", "chat-api", 1400.0),
    "agent": ("POST /v1/agent", "agent-api", 2600.0),
}
# Per pipeline: (stage slug, budget ms or None, median wall ms).
STAGES = {
    "rag-chat": [("retrieval", 300, 180.0), ("rerank", 150, 40.0), ("ttft", 700, 450.0),
                 ("generation", None, 700.0)],
    "agent": [("plan", 400, 250.0), ("tool", 800, 500.0), ("llm", 1500, 900.0),
              ("respond", None, 400.0)],
}  # fmt: skip
MODELS = ["gpt-4o-mini", "gpt-4o", "claude-3-5-sonnet", "o1"]  # 60, 30, 9, 1 %
TOOLS = ["search", "get_weather", "sql", "calculator", "send_email"]
USERS = 20_000
TOKENS_IN = range(200, 4000)
TOKENS_OUT = range(20, 900)
# Pairs every trace of a pipeline carries, beside the service's.
COMMON = [
    ("http.request.method", "POST"), ("http.response.status_code", "200"),
    ("gen_ai.operation.name", "chat"), ("gen_ai.operation.name", "embeddings"),
    ("gen_ai.operation.name", "execute_tool"), ("gen_ai.provider.name", "openai"),
    ("gen_ai.request.model", "text-embedding-3-small"), ("db.system.name", "pgvector"),
    ("openinference.span.kind", "RETRIEVER"), ("openinference.span.kind", "RERANKER"),
    ("db.system.name", "redis"),
]  # fmt: skip


@dataclass
class Loaded:
    user: "User"
    token: str
    teams: dict[str, "Team"]
    traces: int
    spans: int
    samples: int


def _pools(teams: list["Team"], stage_ids: list[int]) -> dict[str, list[int]]:
    """The hashes of every element the traces draw from, per team, in flat arrays: as
    ``trace_search`` makes them, so the list's real filters find them."""
    from apps.analysis.trace_search import (
        MAX_WALL_BUCKET,
        SERVICE_KEY,
        SHARE_STEPS,
        pair_hash,
        ran_mark,
        share_mark,
        wall_mark,
    )

    names = ("common", "model", "user", "tool", "tin", "tout", "wall", "wall4", "wall16",
             "share", "ran")  # fmt: skip
    pools: dict[str, list[int]] = {name: [] for name in names}
    for team in teams:
        for root, service, _ in [*PIPELINES.values(), ("GET /health", "edge", 0.0)]:
            route = root.split(" ", 1)[1]
            pairs = [(SERVICE_KEY, service), ("http.route", route), *COMMON]
            pools["common"] += [pair_hash(team.pk, k, v) for k, v in pairs]
        pools["model"] += [pair_hash(team.pk, "gen_ai.request.model", m) for m in MODELS]
        pools["user"] += [pair_hash(team.pk, "user.id", str(u)) for u in range(1, USERS + 1)]
        pools["tool"] += [pair_hash(team.pk, "gen_ai.tool.name", t) for t in TOOLS]
        pools["tin"] += [pair_hash(team.pk, "gen_ai.usage.input_tokens", str(n)) for n in TOKENS_IN]
        pools["tout"] += [
            pair_hash(team.pk, "gen_ai.usage.output_tokens", str(n)) for n in TOKENS_OUT
        ]
    per_team = len(stage_ids) // len(teams)
    for index, stage_id in enumerate(stage_ids):
        team = teams[index // per_team]
        for name, width in (("wall", 1), ("wall4", 4), ("wall16", 16)):
            pools[name] += [
                wall_mark(team.pk, stage_id, b * width, width)
                for b in range(MAX_WALL_BUCKET // width + 1)
            ]
        pools["share"] += [share_mark(team.pk, stage_id, b) for b in range(SHARE_STEPS + 1)]
        pools["ran"].append(ran_mark(team.pk, stage_id))
    return pools


_DRAW = """
CREATE UNLOGGED TABLE bench_trace AS
SELECT g AS id,
    CASE WHEN g %% 20 < 11 THEN 0 WHEN g %% 20 < 14 THEN 1 WHEN g %% 20 < 17 THEN 2 ELSE 3 END
        AS team_i,
    CASE WHEN r[1] < 0.6 THEN 0 WHEN r[1] < 0.9 THEN 1 ELSE 2 END AS pipe_i,
    %(first)s + (g - 1) * %(step)s + floor(r[2] * %(step)s)::bigint AS start_ns,
    r[3] < 0.02 AS error, r[4] < 0.005 AS incomplete,
    1 + floor(r[5] * %(users)s)::int AS uid,
    CASE WHEN r[6] < 0.6 THEN 0 WHEN r[6] < 0.9 THEN 1 WHEN r[6] < 0.99 THEN 2 ELSE 3 END
        AS model_i,
    floor(r[7] * 5)::int AS tool_i,
    floor(r[8] * %(tin)s)::int AS tin_i, floor(r[9] * %(tout)s)::int AS tout_i,
    (exp(ln((ARRAY[1400.0, 2600.0, 30.0])[
            CASE WHEN r[1] < 0.6 THEN 1 WHEN r[1] < 0.9 THEN 2 ELSE 3 END])
         + 0.5 * sqrt(-2 * ln(1 - r[10])) * cos(2 * pi() * r[11])) * %(ms)s)::bigint AS dur_ns
FROM (
    SELECT g, ARRAY(SELECT random() FROM generate_series(1, 11) WHERE g > 0) AS r
    FROM generate_series(1::bigint, %(traces)s) AS g
) AS drawn
"""

# Four stages per trace of a pipeline; critical-path time is 90 % of the wall time.
_SAMPLE_DRAW = """
CREATE UNLOGGED TABLE bench_sample AS
SELECT b.id, (b.team_i * 2 + b.pipe_i) * 4 + s AS stage_i, w.ns AS wall_ns,
    w.ns * 9 / 10 AS critical_ns,
    least(%(share_steps)s, greatest(0, %(share_steps)s * (w.ns * 9 / 10) / b.dur_ns))
        AS share_bucket,
    least(%(max_bucket)s, floor(4 * log(2, greatest(w.ns, 1)::numeric)))::int AS wall_bucket
FROM bench_trace AS b
CROSS JOIN generate_series(0, 3) AS s
CROSS JOIN LATERAL (
    SELECT (exp(ln((%(medians)s::float8[])[b.pipe_i * 4 + s + 1])
                + 0.45 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))
            * %(ms)s)::bigint AS ns
) AS w
WHERE b.pipe_i < 2 AND NOT b.incomplete
"""

_TRACES = f"""
INSERT INTO {TRACE_TABLE} (id, team_id, trace_id, state, first_seen_at, last_span_at,
    span_count, spans_dropped, bytes_dropped, byte_count, first_span_start_ns,
    last_span_start_ns, root_span_id, root_name, root_service, start_ns, end_ns,
    pipeline_id, incomplete, error, untracked_critical_ns, finalized_at, revision,
    search_hashes)
SELECT b.id, (%(teams)s::bigint[])[b.team_i + 1], decode(md5(b.id::text), 'hex'), 1,
    to_timestamp(b.start_ns / 1e9), to_timestamp((b.start_ns + b.dur_ns) / 1e9), 10, 0, 0,
    4000, b.start_ns, b.start_ns + b.dur_ns / 2,
    CASE WHEN b.incomplete THEN NULL ELSE int8send(b.id * 16) END,
    (ARRAY['POST /v1/chat', 'POST /v1/agent', 'GET /health'])[b.pipe_i + 1],
    (ARRAY['chat-api', 'agent-api', 'edge'])[b.pipe_i + 1],
    b.start_ns, b.start_ns + b.dur_ns,
    (%(pipelines)s::bigint[])[b.team_i * 3 + b.pipe_i + 1],
    b.incomplete, b.error, b.dur_ns / 20, now(), 1,
    coalesce(m.marks, '{{}}')
    || (%(common)s::bigint[])[(b.team_i * 3 + b.pipe_i) * %(common_n)s + 1
                              : (b.team_i * 3 + b.pipe_i + 1) * %(common_n)s]
    || ARRAY[
        (%(model)s::bigint[])[b.team_i * 4 + b.model_i + 1],
        (%(user)s::bigint[])[b.team_i * %(users)s + b.uid],
        (%(tool)s::bigint[])[b.team_i * 5 + b.tool_i + 1],
        (%(tin)s::bigint[])[b.team_i * %(tin_n)s + b.tin_i + 1],
        (%(tout)s::bigint[])[b.team_i * %(tout_n)s + b.tout_i + 1],
        ((random() - 0.5) * 1.8e19)::bigint, ((random() - 0.5) * 1.8e19)::bigint,
        ((random() - 0.5) * 1.8e19)::bigint, ((random() - 0.5) * 1.8e19)::bigint
    ]
FROM bench_trace AS b
LEFT JOIN (
    SELECT id, array_agg(mark) AS marks FROM bench_sample
    CROSS JOIN LATERAL (VALUES
        ((%(ran)s::bigint[])[stage_i + 1]),
        ((%(wall)s::bigint[])[stage_i * (%(max_bucket)s + 1) + wall_bucket + 1]),
        ((%(wall4)s::bigint[])[stage_i * (%(max_bucket)s / 4 + 1) + wall_bucket / 4 + 1]),
        ((%(wall16)s::bigint[])[stage_i * (%(max_bucket)s / 16 + 1) + wall_bucket / 16 + 1]),
        ((%(share)s::bigint[])[stage_i * (%(share_steps)s + 1) + share_bucket + 1])
    ) AS v(mark)
    GROUP BY id
) AS m ON m.id = b.id
"""

_SPANS = f"""
INSERT INTO {SPAN_TABLE} (trace_pk, span_id, start_ns, team_id, trace_id, parent_span_id,
    name, service, kind, end_ns, status, status_message, scope_name, attributes, events,
    received_at)
SELECT t.id, int8send(t.id * 16 + k), t.start_ns + k * (t.end_ns - t.start_ns) / 12,
    t.team_id, t.trace_id, CASE WHEN k = 0 THEN NULL ELSE int8send(t.id * 16) END,
    (ARRAY[t.root_name, 'auth', 'embeddings text-embedding-3-small', 'retrieval',
           'query docs', 'rerank', 'execute_tool ' || (%(tools)s::text[])[b.tool_i + 1],
           'chat ' || (%(models)s::text[])[b.model_i + 1], 'cache set', 'guardrail'])[k + 1],
    t.root_service, CASE WHEN k = 0 THEN 2 ELSE 3 END,
    t.start_ns + (k + 1) * (t.end_ns - t.start_ns) / 12,
    CASE WHEN k = 7 AND t.error THEN 2 ELSE 0 END, '', t.root_service,
    CASE k
        WHEN 0 THEN jsonb_build_object('http.request.method', 'POST', 'user.id', b.uid,
                                       'session.id', md5(t.id::text))
        WHEN 7 THEN jsonb_build_object('gen_ai.operation.name', 'chat',
            'gen_ai.request.model', (%(models)s::text[])[b.model_i + 1],
            'gen_ai.usage.input_tokens', 200 + b.tin_i,
            'gen_ai.usage.output_tokens', 20 + b.tout_i)
        WHEN 6 THEN jsonb_build_object('gen_ai.operation.name', 'execute_tool',
            'gen_ai.tool.name', (%(tools)s::text[])[b.tool_i + 1])
        ELSE jsonb_build_object('db.system.name', 'pgvector')
    END,
    '[]'::jsonb, now()
FROM {TRACE_TABLE} AS t JOIN bench_trace AS b ON b.id = t.id
CROSS JOIN generate_series(0, %(per_trace)s - 1) AS k
"""

_SAMPLES = f"""
INSERT INTO {SAMPLE_TABLE} (trace_pk, stage_id, start_ns, team_id, pipeline_id,
    wall_ns, critical_ns, span_count, error)
SELECT t.id, (%(stages)s::bigint[])[s.stage_i + 1], t.start_ns, t.team_id, t.pipeline_id,
    s.wall_ns, s.critical_ns, 1, false
FROM bench_sample AS s JOIN {TRACE_TABLE} AS t ON t.id = s.id
"""


def _load(now_s: int) -> Loaded:
    from apps.core.partitions import partitions_ensure
    from apps.teams.models import Role
    from apps.teams.services import api_token_create
    from tests.builders.configuration import (
        add_member,
        make_pipeline,
        make_stage,
        make_team,
        make_user,
    )

    user = make_user("tracelist")
    outsider = make_user("tracelist-other")
    teams = {slug: make_team(slug, owner=outsider) for slug, _ in TEAMS}
    add_member(teams["tl-big"], user, Role.VIEWER)
    pipeline_ids: list[int | None] = []
    stage_ids: list[int] = []
    for team in teams.values():
        for slug, (root, service, _) in PIPELINES.items():
            pipeline = make_pipeline(team, slug, match_service=service, match_root_span=root)
            pipeline_ids.append(pipeline.pk)
            for stage_slug, budget, _ in STAGES[slug]:
                stage_ids.append(make_stage(pipeline, stage_slug, budget_ms=budget).pk)
        pipeline_ids.append(None)
    _, token = api_token_create(user=user, name="bench")
    today = to_datetime(now_s).date()
    for table in (SPAN_TABLE, SAMPLE_TABLE):
        partitions_ensure(table, first=today - timedelta(days=DAYS + 1), last=today)
    from apps.analysis.trace_search import MAX_WALL_BUCKET, SHARE_STEPS

    pools = _pools(list(teams.values()), stage_ids)
    first = (now_s - DAYS * 86400) * NS_PER_S
    buckets = {"max_bucket": MAX_WALL_BUCKET, "share_steps": SHARE_STEPS}
    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.2025)")
        started = time.perf_counter()
        cursor.execute(
            _DRAW,
            {"first": first, "step": DAYS * NS_PER_DAY // TRACES, "users": USERS,
             "tin": len(TOKENS_IN), "tout": len(TOKENS_OUT), "traces": TRACES, "ms": NS_PER_MS},
        )  # fmt: skip
        medians = [median for slug in PIPELINES for _, _, median in STAGES[slug]]
        cursor.execute(_SAMPLE_DRAW, {"medians": medians, "ms": NS_PER_MS, **buckets})
        cursor.execute(
            _TRACES,
            {
                "teams": [team.pk for team in teams.values()],
                "pipelines": pipeline_ids,
                "common_n": len(COMMON) + 2,
                "users": USERS,
                "tin_n": len(TOKENS_IN),
                "tout_n": len(TOKENS_OUT),
                **buckets,
                **pools,
            },
        )
        traces = cursor.rowcount
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", [TRACE_TABLE, TRACES + 1]
        )
        print(f"{traces:,} traces written in {time.perf_counter() - started:.0f} s")
        started = time.perf_counter()
        cursor.execute(_SPANS, {"tools": TOOLS, "models": MODELS, "per_trace": SPANS_PER_TRACE})
        spans = cursor.rowcount
        print(f"{spans:,} spans written in {time.perf_counter() - started:.0f} s")
        started = time.perf_counter()
        cursor.execute(_SAMPLES, {"stages": stage_ids})
        samples = cursor.rowcount
        print(f"{samples:,} stage samples written in {time.perf_counter() - started:.0f} s")
        cursor.execute("DROP TABLE bench_trace, bench_sample")
        started = time.perf_counter()
        # What autovacuum does in time: statistics, and the visibility map that lets
        # PostgreSQL answer from an index alone.
        for table in (TRACE_TABLE, SAMPLE_TABLE, SPAN_TABLE):
            cursor.execute(f"VACUUM (ANALYZE) {table}")
        print(f"vacuumed and analyzed in {time.perf_counter() - started:.0f} s")
    return Loaded(user, token, teams, traces, spans, samples)


def _loaded() -> Loaded | None:
    """What an earlier run with BENCH_KEEPDB=1 left in the kept test database."""
    from django.contrib.auth import get_user_model

    from apps.analysis.models import StageSample
    from apps.ingest.models import Span, Trace
    from apps.teams.models import Team
    from apps.teams.services import api_token_create

    user = get_user_model().objects.filter(username="tracelist").first()
    if user is None:
        return None
    _, token = api_token_create(user=user, name=f"bench {time.time_ns()}")
    teams = {t.slug: t for t in Team.objects.filter(slug__in=[slug for slug, _ in TEAMS])}
    return Loaded(
        user, token, teams, Trace.objects.count(), Span.objects.count(),
        StageSample.objects.count(),
    )  # fmt: skip


def _cursor_at(team: "Team", params: dict[str, Any], depth: int) -> str:
    """The cursor "Next page" gives after ``depth`` traces of this list: found once with
    OFFSET, which the page itself never uses."""
    from apps.analysis.selectors.search import traces_with_attributes
    from apps.dashboards.trace_query import trace_query_clean
    from apps.ingest.selectors import TraceCursor, traces_for_team
    from apps.ingest.selectors.traces import _key
    from apps.pipelines.selectors import pipelines_for_team

    assert "stage" not in params  # the stage narrowing is not applied here
    pipelines = list(pipelines_for_team(team=team).prefetch_related("stages"))
    query = trace_query_clean(params=QueryDict(urlencode(params, doseq=True)), pipelines=pipelines)
    traces = traces_with_attributes(
        traces_for_team(team=team, filters=query.filters), team_id=team.pk,
        pairs=query.attributes,
    )  # fmt: skip
    sort_key = "start_ns" if query.sort in ("newest", "oldest") else "elapsed_ns"
    prefix = "-" if query.sort in ("newest", "slowest") else ""
    last = traces.order_by(f"{prefix}{sort_key}", f"{prefix}id")[depth - 1]
    return TraceCursor(_key(last, query.sort), last.pk, query.sort).encode()


def _scenarios(big: "Team", now_s: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """Name -> (path, parameters). Paths are the page, or the API (``api`` prefix)."""
    page = f"/teams/{big.slug}/traces/"
    api = "/api/v1/traces/"
    day = 86400
    custom = {
        "from": to_datetime(now_s - 3 * day).strftime("%Y-%m-%dT%H:%M"),
        "to": to_datetime(now_s - 3 * day + 2 * 3600).strftime("%Y-%m-%dT%H:%M"),
    }
    model = "gen_ai.request.model"
    plain: dict[str, dict[str, Any]] = {
        "newest": {},
        "oldest": {"sort": "oldest"},
        "slowest": {"sort": "slowest"},
        "fastest": {"sort": "fastest"},
        "pipeline": {"pipeline": "rag-chat"},
        "pipeline, slowest": {"pipeline": "agent", "sort": "slowest"},
        "unmatched": {"pipeline": "unmatched"},
        "status error (2 %)": {"status": "error"},
        "status error, slowest": {"status": "error", "sort": "slowest"},
        "status incomplete (0.5 %)": {"status": "incomplete"},
        "status ok, fastest": {"status": "ok", "sort": "fastest"},
        "duration ≥ 5 s (3 %)": {"min_duration_ms": "5000"},
        "duration 1000-1010 ms (0.3 %)": {"min_duration_ms": "1000", "max_duration_ms": "1010"},
        "duration ≥ 5 s, fastest": {"min_duration_ms": "5000", "sort": "fastest"},
        "stage over budget (13 %)": {"pipeline": "rag-chat", "stage": "retrieval",
                                     "stage_over_budget": "on"},
        "stage over budget (0.2 %)": {"pipeline": "rag-chat", "stage": "rerank",
                                      "stage_over_budget": "on"},
        "stage over budget, slowest": {"pipeline": "agent", "stage": "tool",
                                       "stage_over_budget": "on", "sort": "slowest"},
        "stage ≥ 30 % of critical path": {"pipeline": "rag-chat", "stage": "ttft",
                                          "min_critical_share": "30"},
        "attr model (60 %)": {"attr": f"{model}=gpt-4o-mini"},
        "attr model (1 %)": {"attr": f"{model}=o1"},
        "attr user.id (0.005 %)": {"attr": "user.id=42"},
        "attr matching nothing": {"attr": "user.id=no-such-user"},
        "attr model + user.id": {"attr": [f"{model}=gpt-4o", "user.id=4242"]},
        "attr model (60 %), slowest": {"attr": f"{model}=gpt-4o-mini", "sort": "slowest"},
        "attr model (1 %), slowest": {"attr": f"{model}=o1", "sort": "slowest"},
        "attr tool, oldest": {"attr": "gen_ai.tool.name=sql", "sort": "oldest"},
        "last 15 min": {"window": "15m"},
        "last 1 h, slowest": {"window": "1h", "sort": "slowest"},
        "last 24 h, slowest": {"window": "24h", "sort": "slowest"},
        "last 7 d, fastest": {"window": "7d", "sort": "fastest"},
        "custom 2 h, 3 days ago": custom,
        "custom 2 h, slowest": {**custom, "sort": "slowest"},
        "combined: 24 h, pipeline, error, model, slowest": {
            "window": "24h", "pipeline": "rag-chat", "status": "error",
            "attr": f"{model}=gpt-4o", "sort": "slowest",
        },
        "combined: 7 d, stage over, model (1 %)": {
            "window": "7d", "pipeline": "rag-chat", "stage": "retrieval",
            "stage_over_budget": "on", "attr": f"{model}=o1",
        },
    }  # fmt: skip
    scenarios = {name: (page, params) for name, params in plain.items()}
    # 100,000 traces in at 10M spans (page 2,001 of 50), proportionally less for less.
    deep, errors_deep = min(DEEP, TRACES // 10), min(DEEP // 20, TRACES // 200)
    for name, params, depth in [
        ("newest", {}, deep),
        ("oldest", {"sort": "oldest"}, deep),
        ("slowest", {"sort": "slowest"}, deep),
        ("fastest", {"sort": "fastest"}, deep),
        ("attr model (60 %)", {"attr": f"{model}=gpt-4o-mini"}, deep),
        ("pipeline, slowest", {"pipeline": "rag-chat", "sort": "slowest"}, deep),
        ("status error", {"status": "error"}, errors_deep),
    ]:
        cursor = _cursor_at(big, params, depth)
        scenarios[f"{name}, page {depth // 50 + 1:,}"] = (page, {**params, "cursor": cursor})
    scenarios["page as htmx fragment, attr slowest"] = (
        page, {"attr": f"{model}=o1", "sort": "slowest", "_htmx": "1"},
    )  # fmt: skip
    scenarios["API: newest"] = (api, {"team": big.slug})
    scenarios["API: attr model (1 %), slowest"] = (
        api, {"team": big.slug, "attr": f"{model}=o1", "sort": "slowest"},
    )  # fmt: skip
    scenarios["API: 24 h, stage over budget"] = (
        api, {"team": big.slug, "window": "24h", "pipeline": "rag-chat", "stage": "retrieval",
              "stage_over_budget": "true"},
    )  # fmt: skip
    return scenarios


def _store_prepare() -> None:
    """The search sets where the store looks them up: in a ClickHouse store made anew
    (the trace rows' ids start again with each loaded database), or in the GIN index."""
    from apps.ingest.services.search_index import search_sets_copy
    from apps.ingest.span_store import span_store
    from bench.ingest_storage import span_store_prepare

    span_store_prepare(SPAN_STORE_URL)
    store = span_store()
    if store.keeps_search_sets:
        started = time.perf_counter()
        copied = search_sets_copy(store)
        print(f"copied {copied:,} search sets in {time.perf_counter() - started:.0f} s")


def _measure(client: Client, path: str, params: dict[str, Any], token: str) -> dict[str, Any]:
    params = dict(params)
    headers = {}
    if params.pop("_htmx", None):
        headers["HX-Request"] = "true"
    if path.startswith("/api/"):
        headers["Authorization"] = f"Bearer {token}"
    url = f"{path}?{urlencode(params, doseq=True)}" if params else path
    statements: list[str] = []

    def count(execute: Any, sql: str, *args: Any) -> Any:
        statements.append(sql)
        return execute(sql, *args)

    with connection.execute_wrapper(count):
        response = client.get(url, headers=headers)
    assert response.status_code == 200, (url, response.status_code, response.content[:400])
    body = response.content.decode()
    rows = body.count("data-trace=") if not path.startswith("/api/") else body.count("trace_id")
    assert "errorlist" not in body, url
    samples = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        client.get(url, headers=headers)
        samples.append((time.perf_counter() - started) * 1000)
    row: dict[str, Any] = summarise(samples)
    row["rows"] = rows
    row["queries"] = len(statements)
    row["goal"] = "met" if row["p95_ms"] <= GOAL_MS else "missed"
    return row


def run() -> None:
    setup_test_environment()
    # Not serialized: that is for tests that reset the database, and a kept one holds
    # ten million spans.
    old_name = connection.creation.create_test_db(
        verbosity=0, autoclobber=not KEEPDB, keepdb=KEEPDB, serialize=False
    )
    try:
        now_s = int(time.time())
        loaded = _loaded() if KEEPDB else None
        if loaded is None:
            started = time.perf_counter()
            loaded = _load(now_s)
            print(f"loaded in {time.perf_counter() - started:.0f} s")
        else:
            print(f"reusing the kept test database: {loaded.traces:,} traces")
        with override_settings(SPAN_STORE_URL=SPAN_STORE_URL):
            _store_prepare()
            # As a web process does after start-up (budgets_site/wsgi.py): what is alive
            # now is never walked by the collector again.
            freeze_startup_objects()
            client = Client()
            client.force_login(loaded.user)
            big = loaded.teams["tl-big"]
            rows: dict[str, dict[str, Any]] = {}
            for name, (path, params) in _scenarios(big, now_s).items():
                rows[name] = _measure(client, path, params, loaded.token)
        print_table("Trace list, server time in process (ms)", rows)
        print_rows(
            f"Rows listed, SQL statements per request, and the goal (p95 ≤ {GOAL_MS} ms)",
            rows,
            ["rows", "queries", "p95_ms", "goal"],
        )
        written = write(
            "tracelist",
            rows,
            {
                "spans": loaded.spans,
                "traces": loaded.traces,
                "stage_samples": loaded.samples,
                "teams": {slug: share / 20 for slug, share in TEAMS},
                "days": DAYS,
                "requests": REQUESTS,
                "deep_cursor_at": DEEP,
                "span_store_url": SPAN_STORE_URL,
            },
        )
        print(f"\nwritten {written}")
    finally:
        if not KEEPDB:
            connection.creation.destroy_test_db(old_name, verbosity=0)
