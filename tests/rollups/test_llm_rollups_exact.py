"""LlmBucket rows at every resolution equal a direct computation from the stage samples:
per model and for every model together, whether a model answered all of its stage's
samples (its rows are the stage's own) or shares the stage with others and with samples
that name no model."""

from collections import defaultdict
from datetime import UTC, datetime

import numpy as np
from django.db.models import F
from django.db.models.functions import Mod

from apps.analysis.models import StageSample
from apps.core.time import RESOLUTIONS
from apps.rollups.models import ALL_MODELS, LlmBucket, Measure
from apps.rollups.services.bucket_compute import stream_values
from apps.rollups.services.bucket_pass import rollups_process_dirty
from apps.rollups.sketches.ddsketch import Sketch
from tests.builders.samples_and_rollups import NEW_YEAR_S, add_random_traces, make_rollup_pipeline
from tests.conftest import TeamWorld
from tests.timing import MS, S

SOON_AFTER = datetime.fromtimestamp(NEW_YEAR_S + 600, tz=UTC)
ONE_MODEL, OTHER_MODEL = 11, 12


def mark_llm_calls(only_model: int, shared: int) -> None:
    """Stage ``only_model``: one model streamed every answer. Stage ``shared``: two models
    and samples without one; answers without tokens, with one token, without a stream,
    without chunks."""
    StageSample.objects.filter(stage_id=only_model).update(
        model_id=ONE_MODEL,
        output_tokens=Mod(F("trace_pk"), 300) + 2,
        generation_ns=F("wall_ns") / 2,
        max_gap_ns=F("wall_ns") / 9,
    )
    rows = StageSample.objects.filter(stage_id=shared)
    traces = list(rows.values_list("trace_pk", flat=True))

    def every(of: int, remainder: int) -> list[int]:
        return [pk for pk in traces if pk % of == remainder]

    rows.update(
        output_tokens=Mod(F("trace_pk"), 200),
        generation_ns=F("wall_ns") / 3,
        max_gap_ns=F("wall_ns") / 11,
    )
    rows.filter(trace_pk__in=every(3, 1)).update(model_id=ONE_MODEL)
    rows.filter(trace_pk__in=every(3, 2)).update(model_id=OTHER_MODEL)
    rows.filter(trace_pk__in=every(5, 0)).update(output_tokens=None)
    rows.filter(trace_pk__in=every(7, 0)).update(generation_ns=None)
    rows.filter(trace_pk__in=every(5, 4)).update(max_gap_ns=None)


Key = tuple[datetime, int, int, int]


def expected_llm_rows(pipeline_id: int, resolution: int) -> dict[Key, tuple[list[int], int]]:
    """(values ns, errors) of every LlmBucket row of ``resolution``, sample by sample."""
    rows = list(
        StageSample.objects.filter(pipeline_id=pipeline_id).values_list(
            "start_ns", "stage_id", "wall_ns", "critical_ns", "error", "model_id",
            "output_tokens", "generation_ns", "max_gap_ns",
        )
    )  # fmt: skip
    columns = np.array(
        [[-1 if value is None else int(value) for value in row] for row in rows], dtype=np.int64
    )
    streams = stream_values(columns)
    out: dict[Key, tuple[list[int], int]] = defaultdict(lambda: ([], 0))
    for index, (start_ns, stage_id, wall, critical, error, model_id, *_) in enumerate(rows):
        seconds = start_ns // S
        bucket = datetime.fromtimestamp(seconds - seconds % resolution, tz=UTC)
        found: list[tuple[int, int, int]] = []
        if model_id is not None:
            found += [(model_id, Measure.WALL, wall), (model_id, Measure.CRITICAL, critical)]
        for measure, (present, values) in streams.items():
            if present[index]:
                found.append((ALL_MODELS, measure, int(values[index])))
                if model_id is not None:
                    found.append((model_id, measure, int(values[index])))
        for model, measure, value in found:
            values_ns, errors = out[(bucket, stage_id, model, measure)]
            values_ns.append(value)
            out[(bucket, stage_id, model, measure)] = (values_ns, errors + error)
    return dict(out)


def test_llm_rows_at_every_resolution_equal_a_direct_computation(world: TeamWorld) -> None:
    pipeline, stages = make_rollup_pipeline(world.team, "llm", stages=3)
    rng = np.random.default_rng(5)
    # Three minutes across midnight: minutes merge several children, hours and days one.
    add_random_traces(pipeline, stages, rng=rng, n=500, from_ns=(NEW_YEAR_S - 90) * S, span_s=180)
    mark_llm_calls(only_model=stages[0], shared=stages[1])
    rollups_process_dirty(now=SOON_AFTER)

    compared = 0
    for resolution in RESOLUTIONS:
        expected = expected_llm_rows(pipeline.pk, resolution)
        stored = {
            (row.bucket_start, row.stage_id, row.model_id, row.measure): row
            for row in LlmBucket.objects.filter(pipeline_id=pipeline.pk, resolution=resolution)
        }
        assert stored.keys() == expected.keys(), f"rows differ at {resolution} s"
        for key, (values_ns, errors) in expected.items():
            row, values = stored[key], np.array(values_ns, dtype=np.int64)
            assert (row.count, row.error_count) == (len(values), errors), key
            assert (row.sum_ns, row.max_ns) == (int(values.sum()), int(values.max())), key
            assert Sketch.from_bytes(bytes(row.sketch)) == Sketch.from_values(values / MS), key
            compared += 1
    models = set(LlmBucket.objects.values_list("stage_id", "model_id"))
    assert {(stages[0], ONE_MODEL), (stages[1], ONE_MODEL), (stages[1], OTHER_MODEL)} <= models
    assert not {stage for stage, _ in models} & {stages[2]}
    assert compared > 5 * 20
