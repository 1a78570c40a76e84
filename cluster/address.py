"""A Ray cluster's address, checked without Ray: bp_tree.py refuses an address that does not
answer before it creates or locks the run directory (importing Ray takes seconds)."""
from __future__ import annotations

import socket


class ClusterError(Exception):
    """The cluster cannot be reached or started; the message says why, in a line."""


def check_reachable(address: str, timeout: float = 10.0) -> None:
    """ray.init retries an address that does not answer for minutes; a TCP connect says
    at once whether anything listens there."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"ray_address {address!r} is not HOST:PORT or 'auto'")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        raise ClusterError(f"cannot reach the Ray cluster at {address} ({error}); start it with "
                           f"'ray start --head' there, or check the address") from None
