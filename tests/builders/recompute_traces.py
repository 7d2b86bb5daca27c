"""Traces analysed under one set of rules, then the rules changed: known answers for each.

Every trace is a ``POST /chat`` root whose children run one after another, straight
under it: ``auth``, ``retrieve docs``, ``rerank``, ``chat gpt``, with gaps of the root's
own time between them. Each child is then wholly on the critical path, and a stage's
wall and critical-path time are the sums of its spans' durations, whatever else the
attribution does with nested spans.

Rules A: retrieval takes ``retrieve*``, generation ``chat*``, rerank a name no span has.
Rules B: retrieval takes ``auth`` and ``retrieve*`` (a regex), rerank ``rerank*``.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from django.utils import timezone

from apps.analysis.models import StageSample
from apps.analysis.services.finalize import traces_finalize_due
from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline, SpanRule, Stage
from apps.pipelines.services import span_rule_update
from apps.rollups.models import RollupBucket
from apps.rollups.services.bucket_pass import rollups_process_dirty
from apps.teams.models import Team
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.spans import HandSpan, span
from tests.rollups.hostile import go_quiet, ingest
from tests.timing import MS, S

CHILDREN = ("auth", "retrieve docs", "rerank", "chat gpt")
ROOT_ID = 0x10


@dataclass(frozen=True)
class ChatTrace:
    trace_id: int
    t0: int
    durations: tuple[int, int, int, int]  # ns, in CHILDREN order
    gaps: tuple[int, int, int, int, int]  # ns of the root alone: before, between, after
    root: str = "POST /chat"

    @property
    def e2e(self) -> int:
        return sum(self.durations) + sum(self.gaps)

    def spans(self) -> list[HandSpan]:
        root = span(ROOT_ID, None, self.t0, self.t0 + self.e2e, name=self.root,
                    kind="server", trace_id=self.trace_id)  # fmt: skip
        out, at = [root], self.t0
        for index, (name, duration) in enumerate(zip(CHILDREN, self.durations, strict=True)):
            at += self.gaps[index]
            out.append(span(0x20 + index, ROOT_ID, at, at + duration, name=name,
                            trace_id=self.trace_id))  # fmt: skip
            at += duration
        return out


def chat_traces(
    rng: np.random.Generator,
    *,
    count: int,
    first_id: int,
    minutes_ago: tuple[int, int],
    root: str = "POST /chat",
) -> list[ChatTrace]:
    """``count`` traces starting between ``minutes_ago`` (older, newer) before now."""
    now_ns = int(timezone.now().timestamp()) * S
    older, newer = minutes_ago
    starts = rng.integers(now_ns - older * 60 * S, now_ns - newer * 60 * S, count)
    traces = []
    for index, t0 in enumerate(sorted(int(s) for s in starts)):
        durations = rng.lognormal(np.log([30, 180, 90, 700]), 0.5) * MS
        gaps = rng.integers(0, 20 * MS, 5)
        traces.append(
            ChatTrace(
                trace_id=first_id + index,
                t0=t0,
                durations=tuple(int(d) for d in durations),  # type: ignore[arg-type]
                gaps=tuple(int(g) for g in gaps),  # type: ignore[arg-type]
                root=root,
            )
        )
    return traces


@dataclass(frozen=True)
class ChatPipeline:
    pipeline: Pipeline
    retrieval: Stage
    rerank: Stage
    generation: Stage

    def rule(self, stage: Stage) -> SpanRule:
        return stage.rules.get()


def chat_pipeline(team: Team, slug: str = "rag-chat", root: str = "POST /chat") -> ChatPipeline:
    """The pipeline under rules A."""
    name = slug.replace("-", " ").capitalize()
    pipeline = make_pipeline(team, slug, name=name, match_root_span=root)
    retrieval = make_stage(pipeline, "retrieval", budget_ms=300)
    make_rule(retrieval, span_name="retrieve*")
    rerank = make_stage(pipeline, "rerank", budget_ms=150)
    make_rule(rerank, span_name="reranker-v9")
    generation = make_stage(pipeline, "generation", budget_ms=1500)
    make_rule(generation, span_name="chat*")
    return ChatPipeline(pipeline, retrieval, rerank, generation)


def rules_b(chat: ChatPipeline) -> None:
    """Change the rules the ways users do: through the services."""
    span_rule_update(
        rule=chat.rule(chat.retrieval), span_name="^(auth|retrieve)", name_match="regex"
    )
    span_rule_update(rule=chat.rule(chat.rerank), span_name="rerank*")


# (stage id) -> (wall ns, critical ns, span count) for one trace
Expected = dict[int, tuple[int, int, int]]
Rules = Callable[["ChatPipeline", ChatTrace], tuple[Expected, int]]


def expected_a(chat: ChatPipeline, trace: ChatTrace) -> tuple[Expected, int]:
    """Stage values and untracked critical time of a trace under rules A."""
    _, retrieve, _, llm = trace.durations  # auth and rerank are nobody's
    stages = {chat.retrieval.pk: (retrieve, retrieve, 1), chat.generation.pk: (llm, llm, 1)}
    return stages, trace.e2e - retrieve - llm


def expected_b(chat: ChatPipeline, trace: ChatTrace) -> tuple[Expected, int]:
    """Stage values and untracked critical time of a trace under rules B."""
    auth, retrieve, rerank, llm = trace.durations
    stages = {
        chat.retrieval.pk: (auth + retrieve, auth + retrieve, 2),
        chat.rerank.pk: (rerank, rerank, 1),
        chat.generation.pk: (llm, llm, 1),
    }
    return stages, trace.e2e - auth - retrieve - rerank - llm


def send(team: Team, traces: list[ChatTrace]) -> None:
    """Through ingestion, then analysed and rolled up as the workers would."""
    for start in range(0, len(traces), 100):
        ingest(team, [s for trace in traces[start : start + 100] for s in trace.spans()])
    go_quiet()
    while traces_finalize_due().traces:
        pass
    rollups_settle()


def rollups_settle() -> None:
    while rollups_process_dirty().buckets:
        pass


def stored_samples(pipeline: Pipeline) -> dict[tuple[int, int], tuple[int, int, int]]:
    """(trace id, stage id) -> (wall, critical, span count) as stored."""
    rows_ = Trace.objects.filter(team_id=pipeline.team_id).values_list("pk", "trace_id")
    trace_ids = {pk: int.from_bytes(bytes(tid), "big") for pk, tid in rows_}
    rows = StageSample.objects.filter(pipeline_id=pipeline.pk).values_list(
        "trace_pk", "stage_id", "wall_ns", "critical_ns", "span_count"
    )
    return {(trace_ids[pk], stage): (wall, crit, n) for pk, stage, wall, crit, n in rows}


def wanted_samples(
    chat: ChatPipeline, traces: list[ChatTrace], rules: Rules
) -> dict[tuple[int, int], tuple[int, int, int]]:
    out: dict[tuple[int, int], tuple[int, int, int]] = {}
    for trace in traces:
        stages, _ = rules(chat, trace)
        out |= {(trace.trace_id, stage): values for stage, values in stages.items()}
    return out


def wanted_untracked(chat: ChatPipeline, traces: list[ChatTrace], rules: Rules) -> dict[int, int]:
    return {trace.trace_id: rules(chat, trace)[1] for trace in traces}


def stored_untracked(pipeline: Pipeline) -> dict[int, int]:
    """Trace id -> untracked critical-path ns, as stored."""
    rows = Trace.objects.filter(pipeline=pipeline).values_list("trace_id", "untracked_critical_ns")
    return {int.from_bytes(bytes(tid), "big"): ns for tid, ns in rows}


def everything_of(pipeline: Pipeline) -> tuple[object, ...]:
    """A pipeline's samples, trace summaries and rollup rows, comparable before and after
    (a trace's revision aside: analysing again counts one more)."""
    samples = set(
        StageSample.objects.filter(pipeline_id=pipeline.pk).values_list(
            "trace_pk", "stage_id", "start_ns", "wall_ns", "critical_ns", "span_count", "error"
        )
    )
    traces = set(
        Trace.objects.filter(pipeline=pipeline).values_list(
            "pk", "start_ns", "end_ns", "untracked_critical_ns", "error", "state"
        )
    )
    rollups = {
        (*row[:-1], bytes(row[-1]))
        for row in RollupBucket.objects.filter(pipeline_id=pipeline.pk).values_list(
            "stage_id", "measure", "resolution", "bucket_start", "count", "error_count",
            "sum_ns", "max_ns", "sketch",
        )
    }  # fmt: skip
    return samples, traces, rollups
