"""Bearer tokens: random, shown once, stored as a SHA-256 digest.

High-entropy random tokens need no slow hash: a digest lookup by unique index is
both safe and constant time with respect to other tokens.
"""

import hashlib
import secrets

API_TOKEN_PREFIX = "lbk_"  # noqa: S105 - a public marker, not a secret
# A distinct prefix lets the REST API refuse ingest tokens by name, without a lookup.
INGEST_TOKEN_PREFIX = "lbi_"  # noqa: S105 - a public marker, not a secret
# … and refuse metrics tokens, which only read figures (/metrics, /v1/budgets/…),
# everywhere else.
METRICS_TOKEN_PREFIX = "lbm_"  # noqa: S105 - a public marker, not a secret
# Generated tokens are under 50 characters of URL-safe base64.
TOKEN_MAX_CHARS = 200


def token_generate(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_shaped(raw: str) -> bool:
    """Whether a presented value could be one of our tokens; anything else is refused
    without hashing it or asking the database."""
    return len(raw) <= TOKEN_MAX_CHARS and raw.isascii() and raw.isprintable()
