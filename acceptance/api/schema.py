"""The OpenAPI schema says what the API answers: lists that are not paginated documented as
arrays, and the error answers every operation can give (401, 404, 400, 429) documented on each.

``Unpaginated``: a viewset mixin; its ``unpaginated_actions`` answer plain arrays (DRF and
drf-spectacular both read ``pagination_class`` from the view instance, whose ``action`` is set).
``common_errors``: a drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS).
"""

from rest_framework.settings import api_settings

ERROR = {"type": "object", "properties": {"detail": {"type": "string"}},
         "description": "one line saying why; a 400 names each refused field instead: "
                        "{field: [message, …]}"}


class Unpaginated:
    unpaginated_actions: frozenset[str] = frozenset()

    @property
    def pagination_class(self):
        if getattr(self, "action", None) in self.unpaginated_actions:
            return None
        return api_settings.DEFAULT_PAGINATION_CLASS


def _answer(description: str) -> dict:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def common_errors(result, generator, request, public):
    """Add the answers any operation may give where the operation does not say them itself."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    for path, operations in result.get("paths", {}).items():
        if path.endswith("/schema/"):
            continue
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            parameters = operation.get("parameters", [])
            responses.setdefault("401", _answer("not logged in (token or session), or the "
                                                "token is invalid, expired or revoked"))
            if any(p.get("in") == "path" for p in parameters):
                responses.setdefault("404", _answer("no such object, or not one you may see"))
            if "requestBody" in operation or any(p.get("in") == "query" for p in parameters):
                responses.setdefault("400", _answer("a parameter or the body is refused: the "
                                                    "answer names the field"))
            responses.setdefault("429", _answer("too many requests: the Retry-After header says "
                                                "when to try again"))
    return result
