"""Slack commands listeners (being built)."""


def register(app) -> None:
    pass
