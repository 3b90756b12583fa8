"""The refusal every card-button handler raises (calvin/dashboard/actions.py dispatches the presses).

A leaf: the handlers live in tools and approvals, below the shell that dispatches to them."""


class ActionRefused(Exception):
    """The press changes nothing; the text says why (not allowed, already decided, expired)."""
