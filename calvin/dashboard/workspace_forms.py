"""Forms of the workspace pages; the rules are calvin.workspaces.slug_rules (the services check them again)."""

from django import forms

from calvin.workspaces.models import Workspace
from calvin.workspaces.slug_rules import MAX_NAME, MAX_SLUG, SLUG_RULE, name_problem, slug_normalise, slug_problem


class WorkspaceNameField(forms.CharField):
    def __init__(self, **kwargs):
        super().__init__(max_length=MAX_NAME, **kwargs)

    def validate(self, value):
        super().validate(value)
        if problem := name_problem(value):
            raise forms.ValidationError(problem)


class WorkspaceCreateForm(forms.Form):
    name = WorkspaceNameField(help_text="What people see, e.g. Acme Platform.")
    slug = forms.CharField(
        max_length=MAX_SLUG,
        help_text=f"In every address: /w/<slug>/. {SLUG_RULE[0].upper()}{SLUG_RULE[1:]}; it cannot change later.",
        widget=forms.TextInput(attrs={"autocapitalize": "none", "spellcheck": "false"}),
    )

    def clean_slug(self):
        slug = slug_normalise(self.cleaned_data["slug"])
        if problem := slug_problem(slug):
            raise forms.ValidationError(problem)
        return slug


class WorkspaceRenameForm(forms.Form):
    name = WorkspaceNameField()


class WorkspaceDecidersForm(forms.Form):
    self_modification_deciders = forms.ChoiceField(
        choices=Workspace.SelfModificationDeciders.choices,
        widget=forms.RadioSelect,
        label="Who approves an agent's changes to itself (install_packages, add_mcp_server, create_agent)",
    )


class SessionStartForm(forms.Form):
    prompt = forms.CharField(max_length=40_000, widget=forms.Textarea(attrs={"rows": 3}))
    # Offered when the workspace has web spaces (code channels): a thread started in one has the
    # space's repository checked out before its first turn. Only this workspace's spaces are choices.
    space = forms.ChoiceField(required=False, label="Where")

    def __init__(self, *args, spaces=(), **kwargs):
        super().__init__(*args, **kwargs)
        if not spaces:
            del self.fields["space"]
            return
        choices = [("", "in the web channel")]
        choices += [(s.channel, f"in code channel {s.label} ({s.repository.full_name})") for s in spaces]
        self.fields["space"].choices = choices
