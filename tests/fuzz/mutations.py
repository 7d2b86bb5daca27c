"""Wrong types everywhere: a valid document with some of its parts replaced or removed."""

from typing import Any

from hypothesis import strategies as st

# Every JSON type, and the edges of each.
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["", "0", "NaN", "null", "true", "1e400", "\uff10", "\u202e", "😀" * 3]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON-like value, the value itself first."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*path, index))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any, *, delete: bool) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    if rest:
        copy[head] = _replaced(value[head], rest, new, delete=delete)
    elif delete:
        del copy[head]
    else:
        copy[head] = new
    return copy


@st.composite
def mutated(draw: st.DrawFn, documents: st.SearchStrategy[Any], most: int = 3) -> Any:
    """A document from ``documents`` with up to ``most`` parts swapped for junk or removed."""
    document = draw(documents)
    for _ in range(draw(st.integers(0, most))):
        places = paths(document)
        path = draw(st.sampled_from(places))
        delete = bool(path) and draw(st.booleans())
        document = _replaced(document, path, None if delete else draw(junk), delete=delete)
    return document
