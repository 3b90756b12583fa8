"""Runner bearer tokens: random, shown once, stored as a SHA-256 digest.

A token carries 256 bits of randomness, so a fast digest is enough: no one can search
that space, and the lookup stays one indexed equality match per request.
"""

import hashlib
import secrets

PREFIX = "cvn_"


def token_new() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
