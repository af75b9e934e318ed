from django.apps import AppConfig


class ChaosConfig(AppConfig):
    name = "tests.chaos.app"
    label = "ojs_chaos"
    default_auto_field = "django.db.models.BigAutoField"
