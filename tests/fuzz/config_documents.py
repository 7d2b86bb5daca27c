"""Configuration files drawn from the documented schema (docs/configuration-as-code.md).

``pipelines_documents`` are valid by construction and must parse; ``full_documents``
add channels and alert rules that are only mostly valid, to be mangled further.
"""

from typing import Any

from django.core.exceptions import ValidationError
from hypothesis import strategies as st

from apps.pipelines.validation import validate_glob, validate_regex

SECRET_ENV = "FUZZ_HOOK_SECRET"
EMPTY_ENV = "FUZZ_EMPTY_SECRET"
PERCENTILES = ["p50", "p90", "p95", "p99"]
SPAN_KINDS = ["internal", "server", "client", "producer", "consumer"]
PORTIONS = ["whole", "until_first_token", "after_first_token"]

slugs = st.from_regex(r"\A[a-z0-9](?:[a-z0-9-]{0,10}[a-z0-9])?\Z")
# All of Unicode but NUL, which PostgreSQL cannot store (such a file fails to apply),
# surrogates, which no UTF-8 file holds, and the line breaks that PyYAML's own dumper
# leaves in plain text for its loader to fold (the exporter escapes them).
characters = st.characters(exclude_categories=["Cs"], exclude_characters="\x00\r\x85\u2028\u2029")
# Anything but blank: every text field of the file must say something.
names = st.text(characters, min_size=1, max_size=100).filter(str.strip)
short_texts = st.text(characters, min_size=1, max_size=30).filter(str.strip)
budget_ms = st.integers(1, 3_600_000)


def _valid(check: Any, pattern: str) -> bool:
    try:
        check(pattern)
    except ValidationError:
        return False
    return True


globs = st.text(alphabet="ab.*?[]!/ -", min_size=1, max_size=30).filter(
    lambda p: p.strip() and _valid(validate_glob, p)
)
# Pieces that stay a valid RE2 pattern however they are strung together.
REGEX_PIECES = ["a", "b.", ".*", "\\d", "[ab]", "(a|b)", "x+", "^", "$", "\\.", "{", "é"]
regexes = (
    st.lists(st.sampled_from(REGEX_PIECES), min_size=1, max_size=5)
    .map("".join)
    .filter(lambda p: _valid(validate_regex, p))
)
attribute_values = st.one_of(
    st.text(characters, max_size=20),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
attributes = st.dictionaries(short_texts, attribute_values, max_size=3)


@st.composite
def conditions(draw: st.DrawFn) -> dict[str, Any]:
    """A no-stage rule, and the conditions of a stage's span rule."""
    rule: dict[str, Any] = {}
    name = draw(st.sampled_from(["glob", "regex", None]))
    if name == "glob":
        rule["span_name"] = draw(globs)
    elif name == "regex":
        rule["span_name_regex"] = draw(regexes)
    optional = {
        "attributes": attributes.filter(bool),
        "span_kind": st.sampled_from(SPAN_KINDS),
        "service": short_texts,
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            rule[key] = draw(strategy)
    if not rule:
        rule["service"] = draw(short_texts)
    return rule


@st.composite
def rules(draw: st.DrawFn) -> dict[str, Any]:
    rule = draw(conditions())
    if draw(st.booleans()):
        rule["portion"] = draw(st.sampled_from(PORTIONS))
    if draw(st.booleans()):
        rule["first_token_event"] = draw(short_texts)
    return rule


def _unique(items: list[dict[str, Any]]) -> bool:
    return len({item["slug"] for item in items}) == len(items)


stages = st.fixed_dictionaries(
    {"slug": slugs, "name": names},
    optional={
        "budget": st.dictionaries(st.sampled_from(PERCENTILES), budget_ms, min_size=1, max_size=1),
        "match": st.lists(rules(), max_size=3),
    },
)
targets = st.integers(1000, 99_999).map(lambda milli: milli / 1000)
pipelines = st.fixed_dictionaries(
    {
        "slug": slugs,
        "name": names,
        "budget": st.dictionaries(st.sampled_from(PERCENTILES), budget_ms, min_size=1),
    },
    optional={
        "description": st.text(characters, max_size=100),
        "match": st.fixed_dictionaries(
            {},
            optional={"service": short_texts, "root_span": globs, "attributes": attributes},
        ),
        "objective": st.fixed_dictionaries(
            {"target": targets, "threshold_ms": budget_ms},
        ),
        "evaluation": st.fixed_dictionaries(
            {},
            optional={
                "window_s": st.integers(60, 3600),
                "min_samples": st.integers(1, 100_000),
                "close_after": st.integers(1, 360),
            },
        ),
        "stages": st.lists(stages, max_size=4).filter(_unique),
        "no_stage": st.lists(conditions(), max_size=3),
    },
)


def pipelines_documents(team: str | None = None) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "team": st.just(team) if team else slugs,
            "pipelines": st.lists(pipelines, max_size=3).filter(_unique),
        }
    )


durations = st.one_of(
    st.from_regex(r"\A(?:[1-9]\d{0,2}[smhd]){1,3}\Z"),
    st.sampled_from(["never", 0, "1h30m", "7d", "30s", "1d", "90s", "5 m", "-5m", 15]),
)
channels = st.fixed_dictionaries(
    {"slug": slugs, "kind": st.sampled_from(["email", "webhook"])},
    optional={
        "name": names,
        "to": st.one_of(
            st.lists(st.sampled_from(["oncall@example.com", "sre@example.org"]), max_size=2),
            st.emails(),
        ),
        "url": st.sampled_from(
            ["https://hooks.example.com/x", "http://example.org:8080/a?b=c", "ftp://x", "x"]
        ),
        "format": st.sampled_from(["native", "alertmanager", "slack", "teams"]),
        "secret_env": st.sampled_from([SECRET_ENV, EMPTY_ENV, "FUZZ_UNSET_SECRET", "1BAD"]),
    },
)


@st.composite
def alerts(draw: st.DrawFn, pipeline_slugs: list[str], channel_slugs: list[str]) -> dict[str, Any]:
    known = st.sampled_from(pipeline_slugs) if pipeline_slugs else slugs
    rule: dict[str, Any] = {"slug": draw(slugs), "pipeline": draw(st.one_of(known, slugs))}
    violation = st.fixed_dictionaries(
        {"violation_for_minutes": st.integers(0, 1440)},
        optional={"factor": st.integers(100, 10_000).map(lambda hundredths: hundredths / 100)},
    )
    burn_pairs = st.lists(
        st.fixed_dictionaries(
            {"long": durations, "short": durations, "factor": st.floats(0.1, 100)},
            optional={"severity": st.sampled_from(["info", "warning", "critical"])},
        ),
        min_size=1,
        max_size=7,
    )
    optional = {
        "name": names,
        "scope": st.one_of(
            st.sampled_from(["e2e", "any_stage"]), slugs.map(lambda slug: f"stage:{slug}")
        ),
        "condition": st.one_of(
            violation, st.fixed_dictionaries({"burn_rate": st.just("default") | burn_pairs})
        ),
        "severity": st.sampled_from(["info", "warning", "critical"]),
        "channels": st.lists(
            st.sampled_from(channel_slugs) if channel_slugs else slugs, max_size=3
        ),
        "renotify": durations,
        "notify_on_resolve": st.booleans(),
        "no_data": st.sampled_from(["resolve", "keep", "notify"]),
        "no_data_after": durations,
        "enabled": st.booleans(),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            rule[key] = draw(strategy)
    return rule


@st.composite
def full_documents(draw: st.DrawFn) -> dict[str, Any]:
    document = draw(pipelines_documents())
    drawn_channels: list[dict[str, Any]] = draw(st.lists(channels, max_size=3))
    document["channels"] = drawn_channels
    pipeline_slugs = [pipeline["slug"] for pipeline in document["pipelines"]]
    channel_slugs = [channel["slug"] for channel in drawn_channels]
    document["alerts"] = draw(st.lists(alerts(pipeline_slugs, channel_slugs), max_size=3))
    for section in ("pipelines", "channels", "alerts"):
        if draw(st.integers(0, 3)) == 0:
            del document[section]
    return document
