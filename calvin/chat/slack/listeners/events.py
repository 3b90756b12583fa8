"""Slack events listeners (being built)."""


def register(app) -> None:
    pass
