"""ncl: Calvin's admin CLI for agents and people (seed 002's `ncl`), over the REST API at /api/v1/.

Standard library only, so it runs with any Python 3.11 inside a sandbox as well as on a laptop.
An agent's runner gives it CALVIN_URL and CALVIN_TOKEN; a person sets them (or passes --url).
"""

# What the process exits with: scripts and agents branch on these, so they never change.
OK = 0
FAILED = 1  # the gateway answered with an error of its own (a 500)
USAGE = 2
APPROVAL_PENDING = 3
NOT_FOUND = 4
REFUSED = 5
UNREACHABLE = 6
