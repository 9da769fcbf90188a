"""The lab page's URL, included by name from ``acceptance.urls``."""

from django.urls import path

from runners.lab import views

urlpatterns = [
    path("lab/", views.lab, name="lab"),
]
