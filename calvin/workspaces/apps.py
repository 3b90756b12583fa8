from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "calvin.workspaces"
    label = "workspaces"

    def ready(self):
        from calvin.workspaces import spend_notices  # noqa: F401 - subscribes to UsageRecorded
