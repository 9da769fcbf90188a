"""The REST API (token authentication, same permissions as the pages)."""
