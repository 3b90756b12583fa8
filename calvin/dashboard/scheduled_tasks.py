"""/w/<slug>/tasks/: the workspace's scheduled tasks, their next and last runs; make one; pause,
resume, run now or cancel (a person's own tasks, or any as an owner or admin)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from pydantic import ValidationError

from calvin.api.problems import validation_detail
from calvin.dashboard.selectors import member_for_slug
from calvin.schedules import services
from calvin.schedules.models import ScheduledTask
from calvin.schedules.selectors import tasks_with_last_runs
from calvin.schedules.specs import TaskCreate
from calvin.workspaces.models import Agent

ACTIONS = {name: services.TASK_VERBS[name] for name in ("pause", "resume", "run", "cancel")}  # not delete
FORM_FIELDS = ("name", "prompt", "recurrence", "process_after", "timezone", "recurrence_policy", "grace_window_seconds")


def _page(request, member, *, problem: str = "", given=None, status: int = 200):
    shown = [
        {"task": task, "last": last, "mine": task.may_be_changed_by(member)}
        for task, last in tasks_with_last_runs(member.workspace_id)
    ]
    context = {
        "workspace": member.workspace,
        "me": member,
        "tasks": shown,
        "agents": Agent.objects.filter(workspace_id=member.workspace_id).order_by("name"),
        "policies": ScheduledTask.Policy.choices,
        "problem": problem,
        "given": given or {},
    }
    return render(request, "dashboard/scheduled_tasks.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def scheduled_tasks_page(request, slug: str):
    member = member_for_slug(request.user, slug)
    if request.method == "GET":
        return _page(request, member)
    given = {name: request.POST.get(name, "").strip() for name in (*FORM_FIELDS, "agent")}
    agent = Agent.objects.filter(workspace_id=member.workspace_id, id=_int(given["agent"])).first()
    if agent is None:
        return _page(request, member, problem="Not made: choose the task's agent.", given=given, status=400)
    try:
        spec = TaskCreate(agent=agent.id, **{name: given[name] for name in FORM_FIELDS if given[name]})
        task = services.task_create(agent=agent, spec=spec, member=member)
    except ValidationError as exc:
        detail, _ = validation_detail(exc.errors())
        return _page(request, member, problem=f"Not made: {detail}.", given=given, status=400)
    except services.TaskRefused as exc:
        return _page(request, member, problem=f"Not made: {exc}.", given=given, status=400)
    messages.success(request, f"Task {task.name} made; its next run is {task.next_run_at:%Y-%m-%d %H:%M} UTC.")
    return redirect("dashboard:scheduled-tasks", slug=slug)


def _int(text: str) -> int:
    return int(text) if text.isdigit() and len(text) < 19 else 0


@login_required
@require_POST
def scheduled_task_action(request, slug: str, task_id: int, action: str):
    member = member_for_slug(request.user, slug)
    task = ScheduledTask.objects.filter(id=task_id, workspace_id=member.workspace_id).first()
    if task is None or action not in ACTIONS:
        raise Http404("no such task in this workspace")
    if not task.may_be_changed_by(member):
        messages.error(request, "Only the person who made this task or a workspace admin can change it.")
        return redirect("dashboard:scheduled-tasks", slug=slug)
    try:
        ACTIONS[action](task_id=task.id, actor=member)
    except services.TaskRefused as exc:
        messages.error(request, f"Nothing done: {exc}.")
    else:
        done = {"pause": "paused", "resume": "resumed", "run": "runs now", "cancel": "cancelled"}[action]
        messages.success(request, f"Task {task.name} {done}.")
    return redirect("dashboard:scheduled-tasks", slug=slug)
