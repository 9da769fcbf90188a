"""Request rates (settings ``API_THROTTLE_RATES``): anonymous, per user, and uploads.

The rates are read from the settings on every check (DRF's classes read them once, at import),
so an operator's environment and a test's ``settings`` both take effect.
"""

import math

from django.conf import settings
from django.http import HttpResponse
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle


class _SettingsRate:
    def get_rate(self):
        return settings.API_THROTTLE_RATES[self.scope]


class AnonThrottle(_SettingsRate, AnonRateThrottle):
    scope = "anon"


class UserThrottle(_SettingsRate, UserRateThrottle):
    scope = "user"


class RefusedTokenThrottle(_SettingsRate, SimpleRateThrottle):
    """Refused tokens per address, at the anonymous rate (counted by the authentication, which
    must not ask who the user is)."""

    scope = "anon"

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": "refused-token", "ident": self.get_ident(request)}


class UploadThrottle(_SettingsRate, SimpleRateThrottle):
    """Uploads (countersigned copies, evidence bundles, files to verify) per user."""

    scope = "upload"

    def get_cache_key(self, request, view):
        ident = request.user.pk if request.user.is_authenticated else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}


API_THROTTLES = [AnonThrottle, UserThrottle]
UPLOAD_THROTTLES = [*API_THROTTLES, UploadThrottle]


def upload_refused(request) -> HttpResponse | None:
    """For a page (not a DRF view): None when this upload may go ahead (and counts it), else
    the 429 answer with one line saying when to try again."""
    throttle = UploadThrottle()
    if throttle.allow_request(request, None):
        return None
    wait = math.ceil(throttle.wait() or 1)
    response = HttpResponse(f"too many uploads: try again in {wait} s\n", status=429,
                            content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(wait)
    return response
