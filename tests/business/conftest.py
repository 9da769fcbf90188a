from tests.web.conftest import (  # noqa: F401  (the web pages' people and engagements)
    customer_a,
    customer_b,
    engagement_a,
    engagement_b,
    engineer,
    fast_passwords,
    nobody,
    pm,
)
