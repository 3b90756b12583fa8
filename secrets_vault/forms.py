"""The forms a person sets a secret with, in the admin and on the dashboard.

The value is write-only: a password input that never renders a value, not even the one
just typed when the form comes back with an error.
"""

from django import forms
from django.core.exceptions import ValidationError

from calvin.workspaces.models import Agent
from secrets_vault.management_services import secret_place_problem, vault_problem
from secrets_vault.models import MAX_NAME, MAX_VALUE_BYTES, Secret, validate_secret_name
from secrets_vault.services import secret_value_problem

VALUE_HELP = f"At most {MAX_VALUE_BYTES // 1024} KiB. Stored encrypted and never shown again."


def uploaded_value(upload) -> str:
    """An uploaded file's text as a secret's value (a key file); ValidationError with code
    "too_large" or "not_text" otherwise (Django counts an upload's size from the bytes received)."""
    if upload.size > MAX_VALUE_BYTES:
        raise ValidationError(f"the file is larger than {MAX_VALUE_BYTES // 1024} KiB", code="too_large")
    try:
        return upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError("the file is not text (UTF-8)", code="not_text") from None


class SecretValueForm(forms.Form):
    """A new value, typed or uploaded (with value_required=False, neither keeps the current
    one), and whether it is a file. A password input drops line breaks, so a key file is
    uploaded instead."""

    value = forms.CharField(
        required=False,  # required unless a file is uploaded: decided in clean()
        strip=False,  # stored exactly as typed
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text=VALUE_HELP,
    )
    file = forms.FileField(
        required=False,
        label="Or a file",
        help_text=f"For a key file or anything with line breaks: UTF-8 text, at most {MAX_VALUE_BYTES // 1024} KiB.",
    )
    as_file = forms.BooleanField(
        required=False, label="As a file", help_text=Secret._meta.get_field("as_file").help_text
    )

    def __init__(self, *args, value_required: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.value_required = value_required
        if not value_required:
            self.fields["value"].help_text = "Leave empty to keep the current value. " + VALUE_HELP

    def clean_value(self) -> str:
        value = self.cleaned_data.get("value", "")
        if value and (problem := secret_value_problem(value)):
            raise ValidationError(problem)
        return value

    def clean_file(self):
        upload = self.cleaned_data.get("file")
        if not upload:
            return None
        text = uploaded_value(upload)
        if problem := secret_value_problem(text):
            raise ValidationError(problem)
        return text

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("file"):
            if cleaned.get("value"):
                self.add_error(None, "type the value or upload a file, not both")
            cleaned["value"] = cleaned["file"]
        elif (
            not cleaned.get("value")
            and self.value_required
            and "value" not in self.errors
            and "file" not in self.errors
        ):
            self.add_error("value", "type the value (or upload a file)")
        if cleaned.get("value") and (problem := vault_problem()):
            self.add_error(None, problem)
        return cleaned


class SecretNewForm(SecretValueForm):
    """A new workspace-level or agent-level secret of one workspace, on the dashboard."""

    field_order = ["name", "agent", "value", "as_file"]

    name = forms.CharField(
        max_length=MAX_NAME,
        validators=[validate_secret_name],
        help_text="An environment variable name, e.g. GITHUB_TOKEN.",
    )
    agent = forms.ModelChoiceField(
        queryset=Agent.objects.none(),
        required=False,
        label="For",
        empty_label="the whole workspace (every agent)",
    )

    def __init__(self, *args, workspace_id: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.workspace_id = workspace_id
        # Only this workspace's agents: another workspace's id is "not one of the available choices".
        self.fields["agent"].queryset = Agent.objects.filter(workspace_id=workspace_id).order_by("name")
        self.fields["agent"].label_from_instance = lambda agent: f"agent {agent.name}"

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("name") and "agent" in cleaned:
            problem = secret_place_problem(workspace_id=self.workspace_id, agent=cleaned["agent"], name=cleaned["name"])
            if problem:
                self.add_error(None, problem)
        return cleaned


class SecretAdminForm(SecretValueForm, forms.ModelForm):
    """The admin's add form (workspace, agent or none, name, value) and change form (a new value, or
    empty to keep it). The admin saves through the vault's services, never this form's save()."""

    class Meta:
        model = Secret
        fields = ["workspace", "agent", "name", "as_file"]

    def __init__(self, *args, **kwargs):
        instance = kwargs.get("instance")
        super().__init__(*args, value_required=instance is None or instance.pk is None, **kwargs)

    def clean(self):
        cleaned = super().clean()
        workspace, name = cleaned.get("workspace"), cleaned.get("name")
        if self.instance.pk is None and workspace is not None and name and "agent" in cleaned:
            problem = secret_place_problem(workspace_id=workspace.id, agent=cleaned["agent"], name=name)
            if problem:
                self.add_error(None, problem)
        return cleaned

    def validate_constraints(self):
        # The place check in clean() says it in words; the model's conditional unique constraints would
        # only add "Constraint … is violated." The database keeps them either way.
        pass
