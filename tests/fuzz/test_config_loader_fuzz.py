"""The configuration loader answers any text with a Document or ConfigInvalid, in bounded time."""

import time
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from apps.pipelines.config_as_code import ConfigInvalid, Document, parse_document
from apps.pipelines.config_as_code.loader import MAX_DEPTH, MAX_NODES
from apps.pipelines.environment import COMMAND_LINE
from tests.fuzz.config_documents import SECRET_ENV, full_documents, pipelines_documents
from tests.fuzz.conftest import FUZZ
from tests.fuzz.mutations import mutated
from tests.fuzz.properties import roughly_linear_check

pytestmark = pytest.mark.fuzz

# Pieces of YAML syntax, tags and values that trip parsers, to be strung together.
YAML_TOKENS = [
    *"abc:-[]{}&*!|>'\"#%@`?,\n \t0123456789.\\",
    "team: a\n",
    "pipelines:\n",
    "  - ",
    "slug: ",
    "budget: {p95: ",
    "!!python/object:os.system ",
    "!!python/name:builtins.eval ",
    "!!binary ",
    "!!timestamp ",
    "!!set ",
    "!!omap ",
    "!!pairs ",
    "!!bool ",
    "!!int ",
    "!!float ",
    "!!null ",
    "!!str ",
    "!!map ",
    "!!seq ",
    "!!merge ",
    "!<tag:yaml.org,2002:int> ",
    "!local ",
    "<<: *a",
    "&a ",
    "*a",
    "? ",
    "%YAML 1.1\n",
    "%TAG ! tag:x,2000:\n",
    "---\n",
    "...\n",
    ".nan",
    ".inf",
    "~",
    "1e400",
    "0o17",
    "0x1F",
    "0b101",
    "190:20:30",
    "2001-13-45",
    "2001-12-14t21:59:43.10-05:00",
    "99999999999999999999999",
    "\ufeff",
    "\x00",
    "\x85",
    "\u2028",
    "\ud800",
    "😀",
]
yaml_texts = st.lists(st.sampled_from(YAML_TOKENS), max_size=60).map("".join)
# Lone surrogates included: what undecodable bytes become on a surrogateescape read.
any_texts = st.one_of(
    st.text(max_size=300),
    st.text(alphabet=st.characters(codec=None, categories=["Cs", "Lu", "Po", "Zs"]), max_size=50),
)


def parsed(text: str) -> Document | None:
    """The document, or None when it was refused as invalid; any other error fails."""
    try:
        # As the command line reads it: the secret_env variables too.
        return parse_document(text, environment=COMMAND_LINE)
    except ConfigInvalid as exc:
        refusal = exc
    assert refusal.errors
    for error in refusal.errors:
        assert error.line >= 1
        assert error.message
    assert len(refusal.format("budgets.yaml")) == len(refusal.errors)
    return None


def _dumped(document: Any, flow: bool | None) -> str:
    return yaml.safe_dump(document, allow_unicode=True, default_flow_style=flow, sort_keys=False)


@pytest.fixture(autouse=True)
def _webhook_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "whsec_" + "QUJD" * 8)


@FUZZ
@given(any_texts)
def test_any_text_is_a_document_or_invalid(text: str) -> None:
    parsed(text)


@FUZZ
@given(yaml_texts)
def test_any_string_of_yaml_syntax_is_a_document_or_invalid(text: str) -> None:
    parsed(text)


@FUZZ
@given(pipelines_documents(), st.sampled_from([None, True, False]))
def test_a_document_drawn_from_the_schema_parses(
    document: dict[str, Any], flow: bool | None
) -> None:
    result = parsed(_dumped(document, flow))

    assert result is not None
    assert result.team == document["team"]
    spec = result.sections["pipelines"]
    assert [p.slug for p in spec.pipelines] == [p["slug"] for p in document["pipelines"]]
    for parsed_pipeline, drawn in zip(spec.pipelines, document["pipelines"], strict=True):
        assert parsed_pipeline.name == drawn["name"]
        assert [s.slug for s in parsed_pipeline.stages] == [
            s["slug"] for s in drawn.get("stages", [])
        ]


@FUZZ
@given(mutated(full_documents()), st.sampled_from([None, True, False]))
def test_a_document_with_wrong_types_anywhere_is_a_document_or_invalid(
    document: Any, flow: bool | None
) -> None:
    parsed(_dumped(document, flow))


def _laughs(levels: int, width: int) -> str:
    lines = ["team: acme", "a0: &a0 [lol]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * width)}]")
    lines.append(f"pipelines: *a{levels - 1}")
    return "\n".join(lines)


@pytest.mark.parametrize(("levels", "width"), [(10, 10), (40, 2), (4, 1000)])
def test_a_billion_laughs_is_refused_as_too_large_in_seconds(levels: int, width: int) -> None:
    started = time.perf_counter()

    with pytest.raises(ConfigInvalid, match="too deeply or too large"):
        parse_document(_laughs(levels, width))

    # MAX_NODES conversions; far more than this means the budget no longer bounds the work.
    assert time.perf_counter() - started < MAX_NODES / 10_000


def test_alias_bombs_cost_the_node_budget_whatever_they_would_expand_to() -> None:
    # Expanded, the first would hold about 2 * 10**5 nodes and the second about 10**11:
    # both stop at the node budget, in about the same time.
    def refused(text: str) -> None:
        with pytest.raises(ConfigInvalid):
            parse_document(text)

    roughly_linear_check(refused, _laughs(6, 10), _laughs(12, 10), factor=1)


def _nested(depth: int) -> str:
    return "team: acme\npipelines:\n" + "".join(f"{'  ' * (i + 1)}k{i}:\n" for i in range(depth))


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 10 * MAX_DEPTH, 5000])
def test_a_document_nested_deeper_than_the_limit_is_refused(depth: int) -> None:
    with pytest.raises(ConfigInvalid):
        parse_document(_nested(depth))


@pytest.mark.parametrize(
    "text",
    ["team: acme\npipelines: " + "[" * 100_000, "team: acme\npipelines: " + "{a: " * 100_000],
)
def test_flow_nesting_far_past_the_limit_is_refused_at_once(text: str) -> None:
    started = time.perf_counter()

    with pytest.raises(ConfigInvalid):
        parse_document(text)

    assert time.perf_counter() - started < 2


def test_validation_time_grows_linearly_with_the_document() -> None:
    def document(pipelines: int) -> str:
        entries = [
            {"slug": f"p{i}", "name": f"Pipeline {i}", "budget": {"p95": 0}, "stages": "x"}
            for i in range(pipelines)
        ]
        return yaml.safe_dump({"team": "acme", "pipelines": entries})

    roughly_linear_check(parsed, document(100), document(800), factor=8)


@pytest.mark.parametrize(
    "text",
    [
        "team: acme\npipelines: !!bool\n",
        "team: acme\npipelines: !!int\n",
        "team: acme\npipelines: !!timestamp x\n",
        "team: acme\npipelines: !<tag:yaml.org,2002:int> \n",
        "team: acme\npipelines: !!float\n",
    ],
)
def test_a_value_that_does_not_fit_its_tag_is_an_error_at_its_line(text: str) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        parse_document(text)

    assert [error.line for error in caught.value.errors] == [2]


def test_text_with_lone_surrogates_is_refused_at_their_line() -> None:
    # What undecodable bytes read from standard input become in the POSIX locale.
    text = b"team: acme\npipelines:\n  - slug: \xff\n".decode("utf-8", "surrogateescape")

    with pytest.raises(ConfigInvalid, match="not valid UTF-8") as caught:
        parse_document(text)

    assert [error.line for error in caught.value.errors] == [3]
