"""Fixtures the approval tests share (defined in tests/approvals/support.py and tests/dashboard/conftest.py)."""

from tests.approvals.support import _worker_idle_afterwards  # noqa: F401
from tests.dashboard.conftest import other_workspace, plain_member, stranger_member  # noqa: F401
