"""A permission prompt's allow form in real Chromium: the command's leading words offered in a
labelled field, a refused edit answered in place, the chosen words approving the prompt and
making the rule, and the card re-rendered live naming it."""

from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from approvals.models import ApprovalRule
from tests.approvals.test_allow_rules import bash
from tests.dashboard.conftest import (  # noqa: F401  (browser, page: fixtures)
    OWNER_PASSWORD,
    browser,
    browser_login,
    off_the_loop,
    page,
)
from tests.tools.test_approval_prompt import answer_of, prompt, provider

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_allow_form_offers_the_leading_words_and_makes_the_rule(agent, page, gateway):  # noqa: F811
    provider(agent, "claude-code")
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{agent.session.thread_id}/")
    page.wait_for_selector("#live-status[data-state=live]")

    future = prompt(agent, "Bash", bash("npm test -- --watch=false"))
    asking = page.locator("#messages .msg[data-kind=card]", has_text="Approval needed: use Bash")
    expect(asking).to_have_count(1)
    card = page.locator(f"#{asking.get_attribute('id')} .card")  # the same message once edited in place
    form = card.locator("form.allow-rule")
    field = form.get_by_label("Commands starting with")
    expect(field).to_have_value("npm test")
    expect(form.get_by_role("button", name="Allow for this session")).to_be_visible()
    expect(form.get_by_role("button", name="Allow always for this agent")).to_be_visible()
    shots = Path(settings.VAR_DIR) / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1100, "height": 900})
    page.screenshot(path=str(shots / "allow-rule-card.png"))  # the card may be re-rendered live under it

    field.fill("bash")
    form.get_by_role("button", name="Allow for this session").click()
    expect(form.locator(".action-result")).to_contain_text("`bash` is a shell")
    assert not ApprovalRule.objects.exists() and not future.done()

    field.fill("npm test")
    form.get_by_role("button", name="Allow for this session").click()
    note = card.locator("p.note", has_text="Approved by owner")
    expect(note).to_contain_text("made the rule 'Bash: npm test' (this session), made by @owner")
    expect(card.locator("form.allow-rule")).to_have_count(0)
    assert answer_of(future)["behavior"] == "allow"
    assert ApprovalRule.objects.get().command_prefix == "npm test"
    page.screenshot(path=str(shots / "allow-rule-decided.png"))

    off_the_loop(agent.call, "approval_prompt", {"tool_name": "Bash", "input": bash("npm test")})
    answered = page.locator("#messages .card", has_text="Allowed by a rule: use Bash")
    expect(answered.locator("p.note")).to_contain_text("Allowed by the rule 'Bash: npm test' (this session)")
    page.screenshot(path=str(shots / "allow-rule-answered.png"))
