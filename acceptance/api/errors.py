"""HTTP answers of the REST API that DRF does not have, shared by every app's API module."""

from django.db import DataError
from django.db import Error as DatabaseError  # any driver fault: also InterfaceError
from django.db import connection as db_connection
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.views import exception_handler as drf_exception_handler

from runners.doorbell import BrokerUnavailable


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


def exception_handler(exc, context):
    """DRF's handler, plus: the task broker or the database not answering is a 503 with one
    line of reason on every endpoint (never a 500 with a traceback)."""
    if isinstance(exc, BrokerUnavailable):
        exc = ServiceUnavailable(f"refused: {exc}")
    elif isinstance(exc, DataError):  # a value of the request the database cannot hold
        text = str(exc).strip().splitlines() or [type(exc).__name__]
        exc = ValidationError({"detail": f"the database refused a value of this request "
                                         f"({text[0]})"})
    elif isinstance(exc, DatabaseError):
        db_connection.close()  # the next request reconnects
        text = str(exc).strip().splitlines() or [type(exc).__name__]
        exc = ServiceUnavailable(f"the database is not answering ({text[0]})")
    return drf_exception_handler(exc, context)
