"""Fixtures the approval tests share (defined in tests/approvals/support.py and tests/dashboard/conftest.py)."""

from tests.approvals.support import _fast_password_hashing, _worker_idle_afterwards, plain_member  # noqa: F401
from tests.dashboard.conftest import other_workspace, stranger_member  # noqa: F401
