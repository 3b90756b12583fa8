from datetime import timedelta

from django import forms
from django.utils import timezone

from calvin.previews.models import Preview

KEEP, NONE = "keep", "none"
DURATIONS = {"1h": timedelta(hours=1), "8h": timedelta(hours=8), "1d": timedelta(days=1), "7d": timedelta(days=7)}


class PreviewSettingsForm(forms.Form):
    """The thread page's choice for one preview: who may open it, and until when."""

    access = forms.ChoiceField(choices=Preview.Access.choices)
    expires = forms.ChoiceField(
        choices=[
            (KEEP, "keep as it is"),
            (NONE, "no expiry"),
            ("1h", "1 hour from now"),
            ("8h", "8 hours from now"),
            ("1d", "1 day from now"),
            ("7d", "7 days from now"),
        ],
        initial=KEEP,
    )

    def expires_at(self, current):
        choice = self.cleaned_data["expires"]
        if choice == KEEP:
            return current
        if choice == NONE:
            return None
        return timezone.now() + DURATIONS[choice]
