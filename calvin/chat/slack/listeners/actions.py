"""Slack actions listeners (being built)."""


def register(app) -> None:
    pass
