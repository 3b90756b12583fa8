from django.apps import AppConfig


class SchedulesConfig(AppConfig):
    name = "calvin.schedules"
    label = "schedules"
    verbose_name = "Scheduled tasks"

    def ready(self):
        from calvin.schedules import reactions  # noqa: F401  (a run's outcome from its turn)
