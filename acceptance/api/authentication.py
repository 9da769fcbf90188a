"""``Authorization: Token KEY`` against ``acceptance.tokens.ApiToken`` (sha256 only stored)."""

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed, Throttled

from acceptance.api.throttles import RefusedTokenThrottle
from acceptance.tokens import ApiToken, api_token_find


class ApiTokenAuthentication(TokenAuthentication):
    """DRF's header parsing and ``WWW-Authenticate: Token``; the lookup is by digest, and an
    expired or revoked token is refused with that word. Refused tokens count against the
    anonymous rate of the address (DRF checks throttles only after authentication, so guessing
    would otherwise be unlimited): past it, 429."""

    keyword = "Token"
    model = ApiToken

    def authenticate(self, request):
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            throttle = RefusedTokenThrottle()
            if not throttle.allow_request(request, None):
                raise Throttled(throttle.wait()) from None
            raise

    def authenticate_credentials(self, key):
        token = api_token_find(key)
        if token is None:
            raise AuthenticationFailed("invalid token")
        if token.state != "active":
            raise AuthenticationFailed(f"token {token.state}")
        if not token.user.is_active:
            raise AuthenticationFailed("user inactive or deleted")
        token.used_now()
        return (token.user, token)
