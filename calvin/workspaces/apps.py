from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "calvin.workspaces"
    label = "workspaces"
