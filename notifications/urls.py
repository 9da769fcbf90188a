"""Notification settings and deliveries (project managers), a person's own notifications and
calendar feed, and the feed itself (by its secret token)."""

from django.urls import path

from notifications import views

urlpatterns = [
    path("engagements/<str:name>/notifications/", views.notification_settings,
         name="notification-settings"),
    path("engagements/<str:name>/notifications/deliveries/", views.notification_deliveries,
         name="notification-deliveries"),
    path("engagements/<str:name>/notifications/mute/", views.notification_mute,
         name="notification-mute"),
    path("notifications/", views.my_notifications, name="my-notifications"),
    path("notifications/calendar/", views.calendar_manage, name="calendar-manage"),
    path("calendar/<str:token>.ics", views.calendar_feed, name="calendar-feed"),
    path("calendar/<str:token>/<str:name>.ics", views.calendar_feed,
         name="calendar-feed-engagement"),
]
