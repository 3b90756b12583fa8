"""What an approved agent write applies (run by the worker, as every tool's effect)."""

from approvals.services import approved_arguments
from sessions.turns import session_stop
from tools.models import ToolCall
from tools.services.agents import EffectRefused


def session_stop_effect(call: ToolCall) -> dict:
    arguments = approved_arguments(call)
    outcome = session_stop(session_id=arguments["session"], member=call.approval.decided_by, via="api")
    return {"outcome": outcome}


def task_write_effect(call: ToolCall) -> dict:
    """An agent's `ncl tasks ...`, approved: exactly the change its card showed."""
    from calvin.schedules import services
    from calvin.schedules.specs import TaskChange, TaskCreate
    from calvin.workspaces.models import Agent

    arguments = dict(approved_arguments(call))
    person = call.approval.decided_by
    verb = call.tool.removeprefix("tasks.")
    try:
        if verb == "create":
            spec = TaskCreate(**arguments)
            agent = Agent.objects.select_related("workspace").get(id=spec.agent, workspace_id=call.session.workspace_id)
            task = services.task_create(agent=agent, spec=spec, member=person, session=call.session)
            return {"outcome": f"task {task.name} made", "task": task.id}
        task_id = arguments.pop("task")
        if verb == "update":
            services.task_update(task_id=task_id, change=TaskChange(**arguments), actor=person)
            return {"outcome": f"task {task_id} changed", "task": task_id}
        action = services.TASK_VERBS[verb]
        action(task_id=task_id, actor=person)
        return {"outcome": f"task {task_id}: {verb} done", "task": task_id}
    except services.TaskRefused as exc:
        raise EffectRefused(str(exc)) from None
