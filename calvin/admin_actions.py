"""Operator actions in the admin: a confirmation page listing what will happen to which rows,
then, on its POST (CSRF-checked by Django), one service call per row and one message per row.

The confirmation page posts back to the change list with the same action and the rows' ids,
as Django's own delete_selected does: the action then runs on the queryset the ModelAdmin's
get_queryset scoped again, so a row the person may no longer touch (or another tenant's id
typed into the form) is not in it. Each service decides under its own rules (compare-and-
swap, who may), so a second click or a stale page changes nothing and says why.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.template.response import TemplateResponse

from calvin.operators import OperatorRefused

CONFIRMED = "confirmed"  # the confirmation page's field: its POST performs, anything else asks
MAX_LISTED = 200  # rows named on the confirmation page; the rest are counted


@dataclass(frozen=True)
class OperatorAction:
    """One action. `plan(obj)` says what will happen to the row (or why nothing will);
    `perform(request, obj)` does it through a service and returns what happened, raising one
    of `refusals` (their text is shown) when nothing changed."""

    name: str
    description: str
    verb: str  # the confirmation button: "Approve", "Stop", ...
    plan: Callable
    perform: Callable
    refusals: tuple = (OperatorRefused,)
    warning: str = ""  # said above the rows (what cannot be undone)
    noun: str = ""  # what a row is called in the messages; the model's verbose name by default
    shown_once: bool = False  # outcomes hold a secret shown once (a new token): a page of their own
    do_not_call_in_templates = True  # the confirmation page reads its description and verb

    def __call__(self, modeladmin, request, queryset):
        try:
            rows = list(queryset)
        except (ValueError, ValidationError):  # a selected id that is no id ("abc", a NUL): Django filters by it
            modeladmin.message_user(
                request, "The selection holds an id that is not one; nothing changed.", messages.ERROR
            )
            return None
        if request.POST.get(CONFIRMED) == "yes" or not rows:
            return self._performed(modeladmin, request, rows)  # nothing to ask about: says so
        return self._confirmation(modeladmin, request, rows)

    def _label(self, modeladmin, obj) -> str:
        return f"{self.noun or modeladmin.opts.verbose_name.capitalize()} {obj.pk}"

    def _performed(self, modeladmin, request, rows):
        outcomes = []  # (level, text) per row, then the rows not found
        for obj in rows:
            label = self._label(modeladmin, obj)
            try:
                text = self.perform(request, obj)
            except self.refusals as refused:
                outcomes.append((messages.ERROR, f"{label}: {refused}; nothing changed."))
            else:
                ending = "" if text.endswith(".") else "."
                outcomes.append((messages.SUCCESS, f"{label}: {text}{ending}"))
        missing = len(set(request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)) - {str(obj.pk) for obj in rows})
        if missing:
            outcomes.append(
                (
                    messages.WARNING,
                    f"{missing} selected row(s) no longer exist or are not yours to change; nothing changed for them.",
                )
            )
        if self.shown_once and any(level == messages.SUCCESS for level, _ in outcomes):
            return self._shown_once(modeladmin, request, outcomes)
        for level, text in outcomes:
            modeladmin.message_user(request, text, level)
        return None

    def _shown_once(self, modeladmin, request, outcomes) -> TemplateResponse:
        """Outcomes holding something shown once (a new token): on this page only, never kept in
        the messages' cookie or session, never cached."""
        context = {
            **modeladmin.admin_site.each_context(request),
            "title": f"{self.description}: done",
            "opts": modeladmin.opts,
            "action": self,
            "outcomes": [(text, level == messages.SUCCESS) for level, text in outcomes],
        }
        response = TemplateResponse(request, "admin/action_done.html", context)
        response["Cache-Control"] = "no-store"
        return response

    def _confirmation(self, modeladmin, request, rows) -> TemplateResponse:
        opts = modeladmin.opts
        listed = [(obj, self._label(modeladmin, obj), str(obj), self.plan(obj)) for obj in rows[:MAX_LISTED]]
        context = {
            **modeladmin.admin_site.each_context(request),
            "title": f"{self.description}: are you sure?",
            "opts": opts,
            "action": self,
            "action_name": self.name,
            "rows": listed,
            "unlisted": max(0, len(rows) - MAX_LISTED),
            "selected_ids": [str(obj.pk) for obj in rows],
            "checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "confirmed_name": CONFIRMED,
        }
        return TemplateResponse(request, "admin/confirm_action.html", context)


def operator_action(
    *,
    name: str,
    description: str,
    verb: str,
    plan,
    perform,
    refusals=(OperatorRefused,),
    warning="",
    noun="",
    shown_once=False,
):
    """An OperatorAction as Django's admin takes it (a callable with a name and a description)."""
    action = OperatorAction(
        name=name,
        description=description,
        verb=verb,
        plan=plan,
        perform=perform,
        refusals=refusals,
        warning=warning,
        noun=noun,
        shown_once=shown_once,
    )

    def run(modeladmin, request, queryset):
        return action(modeladmin, request, queryset)

    run.__name__ = name
    return admin.action(description=description)(run)
