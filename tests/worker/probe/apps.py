from django.apps import AppConfig


class ProbeConfig(AppConfig):
    name = "tests.worker.probe"
    label = "ojs_probe"
    default_auto_field = "django.db.models.BigAutoField"
