"""The log service's writer under its documented name; it lives in
``marin.services.log_service.client``.

    from marin.inference.client import LogClient
    log = LogClient.connect("iris://marin?endpoint=/system/logger")
"""

from marin.services.log_service.client import *  # noqa: F403
from marin.services.log_service.client import __all__  # noqa: F401
