from django.apps import AppConfig


class SoakConfig(AppConfig):
    name = "runners.soak"
    label = "soak"
    verbose_name = "G4 soak and fault injection"

    def ready(self) -> None:
        # The Celery app discovers tasks of "runners" and "gates" only; register ours here.
        from runners.soak import tasks  # noqa: F401
