"""Bearer tokens: random, shown once, stored as a SHA-256 digest.

High-entropy random tokens need no slow hash: a digest lookup by unique index is
both safe and constant time with respect to other tokens.
"""

import hashlib
import secrets

API_TOKEN_PREFIX = "lbk_"  # noqa: S105 - a public marker, not a secret
# A distinct prefix lets the REST API refuse ingest tokens by name, without a lookup.
INGEST_TOKEN_PREFIX = "lbi_"  # noqa: S105 - a public marker, not a secret


def token_generate(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
