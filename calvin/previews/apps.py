from django.apps import AppConfig


class PreviewsConfig(AppConfig):
    name = "calvin.previews"
    label = "previews"
    verbose_name = "Previews"

    def ready(self):
        from django.core import checks

        from calvin.previews import lifecycle  # noqa: F401  (previews end with their session or host)
        from calvin.previews.checks import preview_domain_check

        checks.register(preview_domain_check)
