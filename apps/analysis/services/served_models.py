"""Models named by spans, as ids: found, created where missing, capped per team."""

from collections import defaultdict
from collections.abc import Iterable

from django.db import connection
from django.db.models import Count

from apps.analysis.models import MAX_MODELS_PER_TEAM, OTHER_MODEL, ServedModel

# (team id, provider, model)
ModelKey = tuple[int, str, str]


def _select(keys: Iterable[ModelKey]) -> dict[ModelKey, int]:
    keys = list(keys)
    if not keys:
        return {}
    table = ServedModel._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT m.team_id, m.provider, m.model, m.id FROM {table} AS m "
            "JOIN unnest(%s::bigint[], %s::text[], %s::text[]) AS k(team_id, provider, model) "
            "USING (team_id, provider, model)",
            [[k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]],
        )
        return {(team, provider, model): pk for team, provider, model, pk in cursor.fetchall()}


def _insert(keys: Iterable[ModelKey]) -> None:
    keys = list(keys)
    if not keys:
        return
    table = ServedModel._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (team_id, provider, model, created_at) "
            "SELECT k.team_id, k.provider, k.model, now() "
            "FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS k(team_id, provider, model) "
            "ORDER BY 1, 2, 3 ON CONFLICT (team_id, provider, model) DO NOTHING",
            [[k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]],
        )


def served_model_ids(keys: set[ModelKey]) -> dict[ModelKey, int]:
    """The id of each (team, provider, model); names a team has not sent before are
    created, while it has fewer than ``MAX_MODELS_PER_TEAM``, and count as its
    ``OTHER_MODEL`` row past that. Concurrent passes may take a team a few past the cap."""
    found = _select(keys)
    missing = sorted(keys - found.keys())
    if not missing:
        return found
    teams = {team for team, _, _ in missing}
    counts = dict(
        ServedModel.objects.filter(team_id__in=teams)
        .values_list("team_id")
        .annotate(n=Count("id"))
        .values_list("team_id", "n")
    )
    by_team: dict[int, list[ModelKey]] = defaultdict(list)
    for key in missing:
        by_team[key[0]].append(key)
    created: list[ModelKey] = []
    overflow: dict[ModelKey, ModelKey] = {}
    for team, names in by_team.items():
        room = max(MAX_MODELS_PER_TEAM - counts.get(team, 0), 0)
        created += names[:room]
        other = (team, "", OTHER_MODEL)
        overflow.update((name, other) for name in names[room:])
    _insert([*created, *set(overflow.values())])
    ids = _select([*created, *set(overflow.values())])
    found.update((key, ids[key]) for key in created if key in ids)
    found.update((key, ids[other]) for key, other in overflow.items() if other in ids)
    return found
