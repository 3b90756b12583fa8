from django.apps import AppConfig


class AgentSessionsConfig(AppConfig):
    # django.contrib.sessions already owns the label "sessions".
    name = "sessions"
    label = "agent_sessions"
    verbose_name = "Agent sessions"

    def ready(self):
        from sessions import reactions  # noqa: F401  (AGENTS.md pushes, resumed agents' notices)
