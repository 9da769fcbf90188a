from django.apps import AppConfig


class SoakConfig(AppConfig):
    name = "runners.soak"
    label = "soak"
    verbose_name = "G4 soak and fault injection"
