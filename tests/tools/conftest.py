"""Fixtures the tool tests share with the dashboard's (people who press buttons on cards)."""

from tests.dashboard.conftest import other_workspace, plain_member  # noqa: F401
