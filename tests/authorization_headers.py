"""Malformed ``Authorization`` headers: every endpoint answers them 401, never 500."""

from typing import Any

import pytest


def malformed_authorization(token_prefix: str) -> list[Any]:
    """Header values as parameters, for tokens that start with ``token_prefix``."""
    return [
        pytest.param(" ", id="one space"),
        pytest.param("\xa0", id="nbsp"),
        pytest.param("Bearer", id="scheme only"),
        pytest.param("Bearer  ", id="scheme and spaces"),
        pytest.param("Token", id="other scheme"),
        pytest.param("Bearer \xa0", id="scheme and nbsp"),
        pytest.param(f"Bearer \xa0{token_prefix}x", id="nbsp before a token"),
        pytest.param(f"Bearer {token_prefix}\xe9\xff\xa0", id="latin-1 bytes"),
        pytest.param("\xe9\xff", id="latin-1 bytes alone"),
        pytest.param(f"Bearer {token_prefix}" + "x" * 10_000, id="10 KB"),
        pytest.param("Bearer " + "x" * 10_000, id="10 KB without prefix"),
    ]
