from django import forms


class StartThreadForm(forms.Form):
    workspace = forms.TypedChoiceField(coerce=int)
    prompt = forms.CharField(max_length=40_000, widget=forms.Textarea(attrs={"rows": 3}))

    def __init__(self, *args, memberships, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["workspace"].choices = [(m.workspace_id, m.workspace.name) for m in memberships]


class ReplyForm(forms.Form):
    text = forms.CharField(max_length=40_000, widget=forms.Textarea(attrs={"rows": 2}))
