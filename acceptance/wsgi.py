"""WSGI entry point.

Once the application is loaded, everything alive is long-lived (modules, URL conf, templates,
translations): ``gc.freeze()`` moves it out of the collector's reach, so the full collections
that requests trigger no longer walk ~100 000 start-up objects each time (they cost tens of ms
per dashboard request on these machines; ``benchmarks/dashboard.py``).
"""

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")
application = get_wsgi_application()
gc.collect()
gc.freeze()
