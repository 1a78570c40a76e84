"""The arguments of GTP commands as the engine reads them: colours, numbers, seconds and file
names, each refused with GTP's `syntax error` (a `GtpError`) when malformed.

Colours are +1 black and -1 white. Vertices are read with the board size they belong to, by
the engine (kernels/coords.py owns their spelling).
"""
from __future__ import annotations

import math
import re
import shlex

from gtp.protocol import GtpError

COLOURS = {"b": 1, "black": 1, "w": -1, "white": -1}
COLOUR_NAMES = {1: "black", -1: "white"}
VERTEX = re.compile(r"[A-HJ-Z][0-9]{1,2}", re.IGNORECASE)
# Numbers as GTP writes them: ASCII digits only (str.isdigit also takes "²" and "٣", which int()
# refuses), and few enough that int() never meets Python's limit on digits.
NATURAL = re.compile(r"[0-9]{1,18}")
INTEGER = re.compile(r"[+-]?[0-9]{1,18}")


def parse_colour(text: str) -> int:
    try:
        return COLOURS[text.lower()]
    except KeyError:
        raise GtpError("syntax error") from None


def parse_int(args, count: int) -> list[int]:
    if len(args) != count or not all(INTEGER.fullmatch(a) for a in args):
        raise GtpError("syntax error")
    return [int(a) for a in args]


def parse_float(args, count: int) -> list[float]:
    try:
        values = [float(a) for a in args]
    except ValueError:
        raise GtpError("syntax error") from None
    if len(values) != count or not all(math.isfinite(v) for v in values):
        raise GtpError("syntax error")
    return values


def parse_seconds(args) -> list[float]:
    """Times in seconds: integers by the spec, decimals accepted; never negative."""
    values = parse_float(args, len(args))
    if min(values, default=0) < 0:
        raise GtpError("syntax error")
    return values


def split_filename(args) -> tuple[str | None, list[str]]:
    """(file name, remaining arguments); a name with spaces may come in double quotes, as
    GoGui sends it."""
    if not args:
        return None, []
    text = " ".join(args)
    if text.startswith('"'):
        try:
            words = shlex.split(text)
        except ValueError:
            raise GtpError("syntax error") from None
        return words[0], words[1:]
    return args[0], list(args[1:])
