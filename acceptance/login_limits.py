"""Login throttling: django-axes' backend, for log-ins that come with a request."""

from axes.backends import AxesStandaloneBackend


class LoginAttemptsBackend(AxesStandaloneBackend):
    """Counts and refuses log-ins per user name and address (settings AXES_*). The login page
    and the admin's always pass the request; an ``authenticate()`` without one (the test
    client's ``login()``, a script) has no address to count against and is left to
    ModelBackend, instead of failing as axes' own backend does."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)
