"""Settings of one dashboard server.

    config = DashboardConfig(prefix="gs://bucket/experiments", port=8050)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DashboardConfig:
    """Attributes:
        prefix: the executor prefix to show (a folder, or a gs:// or s3:// URL).
        host: the interface to bind; anything but loopback requires ``token``.
        port: the TCP port (0: any free port).
        token: the secret every request must carry (None: none, on loopback only).
        read_timeout: seconds a page waits for storage before saying it cannot reach it.
        poll_seconds: how often open pages ask for fresh states and metrics.
    """

    prefix: str
    host: str = "127.0.0.1"
    port: int = 8050
    token: str | None = None
    read_timeout: float = 20.0
    poll_seconds: float = 3.0
