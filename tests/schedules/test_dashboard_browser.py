"""Scheduled tasks on the dashboard, in Chromium: made with the form (a refusal said in words,
the form kept), seen with their next run, paused and run now; a member cannot change another's."""

import pytest
from playwright.sync_api import expect

from calvin.schedules.models import ScheduledTask
from calvin.workspaces.models import Agent, Member
from tests.dashboard.conftest import MEMBER_PASSWORD, OWNER_PASSWORD, browser_login
from tests.schedules.conftest import make_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_task_is_made_seen_paused_and_run_from_the_dashboard(gateway, workspace, page, tmp_path):
    Agent.objects.create(workspace=workspace, name="reporter")
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.click("#tasks-link")
    expect(page.locator("#tasks")).to_contain_text("No scheduled tasks yet.")
    page.fill("#task-name", "morning-digest")
    page.fill("#task-prompt", "summarise yesterday's threads")
    page.fill("#task-recurrence", "* * * * *")
    page.click("button:text-is('Make task')")
    expect(page.locator("#problem")).to_contain_text("at most one run every 300 s")
    expect(page.locator("#task-prompt")).to_have_value("summarise yesterday's threads")  # nothing typed is lost
    page.fill("#task-recurrence", "0 9 * * 1-5")
    page.fill("#task-timezone", "Europe/Berlin")
    page.click("button:text-is('Make task')")
    expect(page.locator("body")).to_contain_text("Task morning-digest made; its next run is")
    row = page.locator("#tasks tr[data-task]")
    expect(row).to_contain_text("0 9 * * 1-5 (Europe/Berlin)")
    expect(row.locator(".state")).to_have_text("active")
    task = ScheduledTask.objects.get(name="morning-digest")
    expect(row.locator(".next")).to_have_text(task.next_run_at.strftime("%Y-%m-%d %H:%M"))
    assert "Junk" not in page.locator("body").inner_text()
    page.screenshot(path=str(tmp_path / "tasks.png"), full_page=True)

    row.locator("button:text-is('Pause')").click()
    expect(page.locator("#tasks tr[data-task] .state")).to_contain_text("paused")
    page.locator("#tasks tr[data-task] button:text-is('Run now')").click()
    expect(page.locator("body")).to_contain_text("Task morning-digest runs now.")
    expect(page.locator("#tasks tr[data-task] .last")).to_contain_text("running")
    expect(page.locator("#tasks tr[data-task] .last a")).to_have_text("its thread")


def test_a_member_sees_anothers_task_without_its_buttons_and_cannot_forge_them(
    gateway, workspace, plain_member, other_workspace, page
):
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    ours = make_task(Agent.objects.create(workspace=workspace, name="reporter"), owner)
    theirs = make_task(Agent.objects.create(workspace=other_workspace, name="theirs"), name="globex-task")
    browser_login(page, gateway, "member", MEMBER_PASSWORD)
    page.goto(f"{gateway}/w/{workspace.slug}/tasks/")
    row = page.locator("#tasks tr[data-task]")
    expect(row).to_contain_text("daily-report")
    expect(row.locator("button")).to_have_count(0)
    expect(page.locator("#tasks")).not_to_contain_text("globex-task")
    csrf = page.locator("input[name=csrfmiddlewaretoken]").first.get_attribute("value")
    for task in (ours, theirs):
        page.request.post(f"{gateway}/w/{workspace.slug}/tasks/{task.id}/pause/", form={"csrfmiddlewaretoken": csrf})
    assert ScheduledTask.objects.get(id=ours.id).status == "active"
    assert ScheduledTask.objects.get(id=theirs.id).status == "active"
