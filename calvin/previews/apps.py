from django.apps import AppConfig


class PreviewsConfig(AppConfig):
    name = "calvin.previews"
    label = "previews"
    verbose_name = "Previews"
