"""Scheduled tasks through the API (`ncl tasks`): reads for everyone in scope; a person's write
applies at once (their own tasks, or any as an owner or admin), an agent's becomes an approval
whose card shows the whole change, checked first so an approval never waits on a refusal."""

from django.db import transaction
from ninja import Query, Router
from pydantic import Field

from calvin.api import scope
from calvin.api.agent_writes import agent_write_request, approval_pending
from calvin.api.idempotency import idempotent
from calvin.api.pagination import PageQuery, page, page_of
from calvin.api.problems import Problem
from calvin.api.schemas import Problem as ProblemOut
from calvin.api.schemas import TaskOut, TaskRunOut, TaskWriteOut
from calvin.schedules import services
from calvin.schedules.models import ScheduledTask
from calvin.schedules.specs import TaskChange, TaskCreate
from calvin.workspaces.models import Member

router = Router(tags=["tasks"])
WRITES = {200: TaskWriteOut, 201: TaskWriteOut, 202: TaskWriteOut, 403: ProblemOut, 404: ProblemOut, 409: ProblemOut,
          422: ProblemOut}  # fmt: skip


class TaskQuery(PageQuery):
    status: ScheduledTask.Status | None = Field(None, description="Only tasks in this status.")
    agent: int | None = Field(None, ge=1, le=2**63 - 1, description="Only this agent's tasks.")


def task_shown(task: ScheduledTask) -> dict:
    return {
        "id": task.id,
        "agent_id": task.agent_id,
        "name": task.name,
        "prompt": task.prompt,
        "process_after": task.process_after,
        "recurrence": task.recurrence,
        "timezone": task.time_zone,
        "recurrence_policy": task.recurrence_policy,
        "grace_window_seconds": task.grace_window_seconds,
        "script": task.script,
        "status": task.status,
        "next_run_at": task.next_run_at,
        "consecutive_failures": task.consecutive_failures,
        "paused_reason": task.paused_reason,
        "session_id": task.session_id,
        "created_at": task.created_at,
        "updated_at": task.updated_at,
    }


def run_shown(run) -> dict:
    fields = ("id", "task_id", "scheduled_for", "trigger", "status", "turn_id", "error", "created_at", "finished_at")
    return {name: getattr(run, name) for name in fields}


def tasks_visible(principal):
    return ScheduledTask.objects.filter(agent__in=scope.agents_visible(principal))


def _done(detail: str, task=None, status: int = 200) -> tuple[int, dict]:
    return status, {"status": "done", "detail": detail, "task": task_shown(task) if task else None}


def _person(principal) -> Member:
    return Member.objects.select_related("user").get(id=principal.member_id)


def _may_change(member: Member, task: ScheduledTask) -> None:
    if not task.may_be_changed_by(member):
        raise Problem(403, "only the person who made this task or a workspace admin can change it")


def _checked(change) -> None:
    """Runs the change and rolls it back: an agent's request is refused now, not after approval."""

    class _Rollback(Exception):
        pass

    try:
        with transaction.atomic():
            change()
            raise _Rollback
    except _Rollback:
        pass
    except services.TaskRefused as exc:
        raise Problem(422, str(exc), code="refused") from None


def _ask(principal, action: str, arguments: dict, summary: str) -> tuple[int, dict]:
    return approval_pending(
        agent_write_request(principal=principal, action=action, arguments=arguments, summary=summary)
    )


@router.get("/tasks", response=page_of(TaskOut), summary="List scheduled tasks")
def tasks_list(request, query: Query[TaskQuery]):
    tasks = tasks_visible(request.auth)
    if query.status:
        tasks = tasks.filter(status=query.status)
    if query.agent:
        tasks = tasks.filter(agent_id=query.agent)
    return page(tasks, query, task_shown)


@router.get("/tasks/{task_id}", response=TaskOut, summary="Get a scheduled task")
def tasks_get(request, task_id: int):
    return task_shown(scope.one(tasks_visible(request.auth), task_id, "task"))


@router.get("/tasks/{task_id}/runs", response=page_of(TaskRunOut), summary="List a task's runs, newest first")
def tasks_runs(request, task_id: int, query: Query[PageQuery]):
    task = scope.one(tasks_visible(request.auth), task_id, "task")
    return page(task.runs.all(), query, run_shown)


@router.post("/tasks", response=WRITES, summary="Make a scheduled task (an agent's waits for approval)")
def tasks_create(request, body: TaskCreate):
    principal = request.auth

    def change():
        agent_id = body.agent or principal.agent_id
        if agent_id is None:
            raise Problem(422, "agent: whose task (a person names the agent)", code="invalid")
        agent = scope.one(scope.agents_visible(principal).select_related("workspace"), agent_id, "agent")
        spec = body.model_copy(update={"agent": agent.id})
        if principal.is_agent:
            _checked(lambda: services.task_create(agent=agent, spec=spec))
            arguments = spec.model_dump(mode="json", exclude_none=True)
            return _ask(principal, "tasks.create", arguments, f"make scheduled task {spec.name} for agent {agent.name}")
        task = services.task_create(agent=agent, spec=spec, member=_person(principal))
        return _done(f"task {task.name} made; next run {task.next_run_at:%Y-%m-%d %H:%M} UTC", task, 201)

    return _guarded(request, principal, change)


@router.patch("/tasks/{task_id}", response=WRITES, summary="Change a scheduled task")
def tasks_update(request, task_id: int, body: TaskChange):
    principal = request.auth

    def change():
        task = scope.one(tasks_visible(principal), task_id, "task")
        if principal.is_agent:
            _checked(lambda: services.task_update(task_id=task.id, change=body))
            arguments = {"task": task.id, **body.model_dump(mode="json", exclude_unset=True)}
            return _ask(principal, "tasks.update", arguments, f"change scheduled task {task.name}")
        member = _person(principal)
        _may_change(member, task)
        return _done(f"task {task.name} changed", services.task_update(task_id=task.id, change=body, actor=member))

    return _guarded(request, principal, change)


def _verb(request, task_id: int, verb: str):
    principal = request.auth

    def change():
        task = scope.one(tasks_visible(principal), task_id, "task")
        if principal.is_agent:
            if verb != "delete":
                _checked(lambda: services.TASK_VERBS[verb](task_id=task.id))
            return _ask(principal, f"tasks.{verb}", {"task": task.id}, f"{verb} scheduled task {task.name}")
        member = _person(principal)
        _may_change(member, task)
        outcome = services.TASK_VERBS[verb](task_id=task.id, actor=member)
        if verb == "delete":
            return _done(f"task {outcome} deleted")
        if verb == "run":
            return _done(f"task {task.name} runs now (run {outcome.id})", ScheduledTask.objects.get(id=task.id))
        return _done(f"task {task.name} is {outcome.status}", outcome)

    return _guarded(request, principal, change)


def _guarded(request, principal, change):
    def refusals_said():
        try:
            return change()
        except services.TaskRefused as exc:
            raise Problem(409, str(exc), code="refused") from None

    return idempotent(request, principal, refusals_said)


@router.post("/tasks/{task_id}/pause", response=WRITES, summary="Pause a task")
def tasks_pause(request, task_id: int):
    return _verb(request, task_id, "pause")


@router.post("/tasks/{task_id}/resume", response=WRITES, summary="Resume a paused task (missed runs are not made up)")
def tasks_resume(request, task_id: int):
    return _verb(request, task_id, "resume")


@router.post("/tasks/{task_id}/cancel", response=WRITES, summary="Cancel a task (it never runs again)")
def tasks_cancel(request, task_id: int):
    return _verb(request, task_id, "cancel")


@router.post("/tasks/{task_id}/run", response=WRITES, summary="Run a task now, once")
def tasks_run(request, task_id: int):
    return _verb(request, task_id, "run")


@router.delete("/tasks/{task_id}", response=WRITES, summary="Delete a task and its runs")
def tasks_delete(request, task_id: int):
    return _verb(request, task_id, "delete")
