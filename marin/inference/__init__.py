"""Marin's documented import path of the log writer: ``marin.inference.client.LogClient``
(a re-export of ``marin.services.log_service.client``)."""
