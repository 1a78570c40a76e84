"""The GTP (Go Text Protocol, version 2) engine: `protocol` frames commands and responses and
knows nothing of Go; `engine` gives every command its meaning on top of the search driver
(`analysis_commands` the analysis ones, `arguments` the argument parsing; genmove's move is
`games/move_choice.py`'s). The entry point is the top-level `gtp_engine.py`."""
from gtp.engine import EngineOptions, GoEngine
from gtp.protocol import GtpError, GtpServer, Stream

__all__ = ["EngineOptions", "GoEngine", "GtpError", "GtpServer", "Stream"]
