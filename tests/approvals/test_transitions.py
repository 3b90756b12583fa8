"""PendingApproval state changes are compare-and-swap: a second click changes nothing."""

from datetime import timedelta
from threading import Barrier, Thread

import pytest
from django.db import connection
from django.utils import timezone

from approvals.models import PendingApproval
from sessions.services import session_start

S = PendingApproval.Status


@pytest.fixture
def approval(workspace):
    session = session_start(workspace=workspace, title="approve me")
    return PendingApproval.objects.create(
        session=session,
        kind="install_packages",
        summary="apt: jq",
        details={"apt": ["jq"]},
        expires_at=timezone.now() + timedelta(minutes=10),
    )


@pytest.mark.django_db
def test_the_first_decision_wins(approval):
    assert PendingApproval.transition(approval.id, source=S.PENDING, target=S.APPROVED, decided_via="web")
    assert not PendingApproval.transition(approval.id, source=S.PENDING, target=S.DENIED)
    assert not PendingApproval.transition(approval.id, source=S.PENDING, target=S.EXPIRED)
    approval.refresh_from_db()
    assert approval.status == S.APPROVED and approval.decided_at is not None


@pytest.mark.django_db
def test_applied_only_after_approved_and_only_once(approval):
    assert not PendingApproval.transition(approval.id, source=S.APPROVED, target=S.APPLIED)
    PendingApproval.transition(approval.id, source=S.PENDING, target=S.APPROVED)
    assert PendingApproval.transition(approval.id, source=S.APPROVED, target=S.APPLIED)
    assert not PendingApproval.transition(approval.id, source=S.APPROVED, target=S.FAILED)


@pytest.mark.django_db
def test_an_applied_one_fails_once_when_its_delivery_finally_fails(approval):
    PendingApproval.transition(approval.id, source=S.PENDING, target=S.APPROVED)
    PendingApproval.transition(approval.id, source=S.APPROVED, target=S.APPLIED)
    assert PendingApproval.transition(approval.id, source=S.APPLIED, target=S.FAILED)
    assert not PendingApproval.transition(approval.id, source=S.APPLIED, target=S.FAILED)
    with pytest.raises(ValueError):
        PendingApproval.transition(approval.id, source=S.FAILED, target=S.APPLIED)


@pytest.mark.django_db
def test_impossible_transitions_are_programming_errors(approval):
    with pytest.raises(ValueError):
        PendingApproval.transition(approval.id, source=S.DENIED, target=S.APPROVED)
    with pytest.raises(ValueError):
        PendingApproval.transition(approval.id, source=S.PENDING, target=S.APPLIED)


@pytest.mark.django_db(transaction=True)
def test_concurrent_clicks_decide_once(approval):
    barrier, wins = Barrier(8), []

    def click(target):
        barrier.wait()
        wins.append(PendingApproval.transition(approval.id, source=S.PENDING, target=target))
        connection.close()

    threads = [Thread(target=click, args=(S.APPROVED if i % 2 else S.DENIED,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 7 + [True]
