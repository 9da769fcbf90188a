"""Browser pages of engagements (project managers, customers)."""

from django.urls import path

from acceptance import views

urlpatterns = [
    path("", views.home, name="home"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("portal/", views.portal, name="portal"),
]
