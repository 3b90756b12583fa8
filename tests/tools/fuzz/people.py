"""The people and the beat of a fuzz run: they answer the questions and decide the approvals
the fuzzed calls open, so no call waits for a person who never comes.

Every third question is closed unanswered and every third approval is left to expire (the
test makes the bounds short); the others are answered, approved or denied. The approvals'
sweep runs as beat would run it, so an approval that does not wait on its call (nanoclaw's
create_agent and friends) ends too.
"""

import threading
import time

from django.db import close_old_connections, connection
from django.utils import timezone

from approvals.models import PendingApproval
from approvals.services import ApprovalRefused, approval_decide, approvals_sweep
from calvin.presses import ActionRefused
from tools.models import Question
from tools.services.questions import question_answer_pressed, question_expire

POLL_SECONDS = 0.02


class People(threading.Thread):
    def __init__(self, *, session, member):
        super().__init__(daemon=True, name="fuzz-people")
        self.session, self.member = session, member
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []
        self.decided = {"answered": 0, "closed": 0, "approved": 0, "denied": 0}

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                close_old_connections()
                try:
                    self._round()
                except Exception as error:  # reported by the test, not lost in a thread
                    self.errors.append(error)
                time.sleep(POLL_SECONDS)
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)

    def _round(self) -> None:
        open_questions = Question.objects.filter(status=Question.Status.OPEN, tool_call__session=self.session)
        for question_id, tool_call_id in open_questions.values_list("id", "tool_call_id"):
            if question_id % 3 == 2:
                question_expire(question_id=question_id, note="Closed by the fuzz's people.")
                self.decided["closed"] += 1
                continue
            try:
                question_answer_pressed(
                    thread=self.session.thread, member=self.member, target_id=tool_call_id, value="0", via="web"
                )
                self.decided["answered"] += 1
            except ActionRefused:
                pass  # timed out first
        pending = PendingApproval.objects.filter(status=PendingApproval.Status.PENDING, session=self.session)
        for approval_id in pending.values_list("id", flat=True):
            if approval_id % 3 == 2:
                continue  # left to expire
            approve = approval_id % 3 == 0
            try:
                approval_decide(approval_id=approval_id, member=self.member, approve=approve, via="web")
                self.decided["approved" if approve else "denied"] += 1
            except ApprovalRefused:
                pass  # expired first
        approvals_sweep(now=timezone.now())
