from django import forms


class ReplyForm(forms.Form):
    text = forms.CharField(max_length=40_000, widget=forms.Textarea(attrs={"rows": 2}))
