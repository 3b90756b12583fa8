"""Runner bearer tokens: random, shown once, stored as a SHA-256 digest.

A token carries 256 bits of randomness, so a fast digest is enough: no one can search
that space, and the lookup stays one indexed equality match per request.
"""

import hashlib
import secrets

PREFIX = "cvn_"  # a runner's token (the agent presents it to /mcp)
HOST_PREFIX = "cvh_"  # a host daemon's token (it presents it to /ws/host/)


def token_new(prefix: str = PREFIX) -> str:
    return prefix + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
