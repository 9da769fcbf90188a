"""HTTP answers of the REST API that DRF does not have, shared by every app's API module."""

from rest_framework import status
from rest_framework.exceptions import APIException


class Conflict(APIException):
    """409: the request is well formed but may not be honoured now; the detail says why."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "conflict"
    default_code = "conflict"


class ServiceUnavailable(APIException):
    """503: a part the service depends on (the task broker) does not answer now; nothing was
    started. The detail says which and why; try again once it answers."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "service unavailable"
    default_code = "unavailable"
