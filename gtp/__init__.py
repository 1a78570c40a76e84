"""The GTP (Go Text Protocol, version 2) engine: `protocol` frames commands and responses and
knows nothing of Go; `game` keeps the game record and rebuilds positions on a GoBatch;
`engine` gives every command its meaning on top of the search driver. The entry point is the
top-level `gtp_engine.py`."""
from gtp.engine import EngineOptions, GoEngine
from gtp.protocol import GtpError, GtpServer, Stream

__all__ = ["EngineOptions", "GoEngine", "GtpError", "GtpServer", "Stream"]
