"""Fixtures the session tests share with the dashboard's (a second workspace)."""

from tests.dashboard.conftest import other_workspace, stranger_member  # noqa: F401
