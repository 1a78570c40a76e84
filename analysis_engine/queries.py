"""KataGo's JSON analysis protocol, the query side: one JSON object a line, read into a `Query`
(positions to analyse) or an `Action` (query_version, clear_cache, terminate, terminate_all),
or refused with the error object KataGo writes.

A query (KataGo's docs/Analysis_Engine.md names the fields; the ones this engine reads):
    id               string, required
    moves            [[player, vertex], ...], required ("B"/"W", a GTP vertex or "pass")
    initialStones    [[player, vertex], ...]: stones on the board before the moves
    initialPlayer    "B"/"W": who moves at turn 0 when `moves` is empty
    rules            a rules name or object, required: the net plays area scoring (see RULES)
    komi             number in [-150, 150], integer or half-integer (default: the net's)
    boardXSize, boardYSize   must be the net's board size
    analyzeTurns     turns to analyse, 0..len(moves) (default: the last)
    maxVisits        visits per position (default: the engine's)
    includeOwnership, includePolicy, includeMovesOwnership, includePVVisits   booleans
    priority, priorities    higher first; ties in arrival order
    overrideSettings {name: value}: reportAnalysisWinratesAs, maxVisits and maxTime (seconds)
                     are honoured; other search parameters are ignored
    reportDuringSearchEvery  seconds between partial answers (isDuringSearch true)
Fields this engine cannot honour (avoidMoves, allowMoves, rootPolicyTemperature, ...) are
answered with a `warning` object, as KataGo warns of what it converts, and the query goes on.

Refusals are `{"id": ..., "error": "...", "field": "..."}` (`{"error": ...}` for a line that
is not a JSON object), one line each; the engine goes on reading.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from kernels import coords

# KataGo's rules names. The net plays area scoring, suicide illegal, with its own ko rule; a
# territory-scoring ruleset is analysed under area scoring (on a finished 9x9 game the two
# counts differ by a point at most, seki and the last dame aside), with a warning. Names are
# read as KataGo reads them: any case, "_" or " " for "-" ("new zealand", "stone_scoring").
AREA_RULES = {"tromp-taylor", "chinese", "chinese-ogs", "chinese-kgs", "aga", "bga",
              "new-zealand", "nz", "stone-scoring", "aga-button"}
TERRITORY_RULES = {"japanese", "korean"}
RULES = AREA_RULES | TERRITORY_RULES
PERSPECTIVES = ("BLACK", "WHITE", "SIDETOMOVE")
IGNORED_FIELDS = ("avoidMoves", "allowMoves", "rootPolicyTemperature", "rootFpuReductionMax",
                  "whiteHandicapBonus", "includeOwnershipStdev")
KNOWN_FIELDS = {"id", "moves", "initialStones", "initialPlayer", "rules", "komi", "boardXSize",
                "boardYSize", "analyzeTurns", "maxVisits", "includeOwnership", "includePolicy",
                "includeMovesOwnership", "includePVVisits", "priority", "priorities",
                "overrideSettings", "reportDuringSearchEvery", "analysisPVLen", *IGNORED_FIELDS}
MAX_VISITS_LIMIT = 1_000_000


class QueryError(Exception):
    """A refused query: the message, and the field it is about (None for the line)."""

    def __init__(self, message: str, field: str | None = None, query_id=None):
        super().__init__(message)
        self.field = field
        self.query_id = query_id

    def answer(self) -> dict:
        answer = {"error": str(self)}
        if self.field is not None:
            answer["field"] = self.field
        if self.query_id is not None:
            answer["id"] = self.query_id
        return answer


@dataclass(frozen=True)
class Action:
    """A special query: `action` with its echo (the query as sent)."""
    action: str
    query_id: str
    echo: dict
    terminate_id: str | None = None
    turn_numbers: tuple | None = None       # terminate: only these turns (None: all)


@dataclass
class Query:
    """Positions of one game to analyse. Moves and stones are flat board indices (pass N*N)."""
    query_id: str
    board_size: int
    moves: list                 # [(colour +1/-1, move)]
    initial_stones: np.ndarray  # int8 (N, N)
    initial_player: int
    komi: float
    turns: list                 # turn numbers to analyse
    priorities: list            # one per turn
    max_visits: int
    include_ownership: bool = False
    include_policy: bool = False
    include_moves_ownership: bool = False
    include_pv_visits: bool = False
    perspective: str = "SIDETOMOVE"
    report_every: float = 0.0   # seconds; 0: only the final answer
    max_time: float = 0.0       # seconds a position may search; 0: no limit
    pv_length: int = 15
    warnings: list = field(default_factory=list)   # (field, message)

    def to_play(self, turn: int) -> int:
        """Who moves at `turn`: the player of moves[turn], else the other one after the last
        move, else initialPlayer."""
        if turn < len(self.moves):
            return self.moves[turn][0]
        if self.moves:
            return -self.moves[-1][0]
        return self.initial_player


def parse_line(line: str, *, board_size: int, default_komi: float, default_visits: int,
               perspective: str) -> Query | Action:
    """The query or action of one input line; QueryError when it is refused."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as error:    # JSONDecodeError, or an int too long
        raise QueryError(f"could not parse JSON: {error}") from None
    if not isinstance(data, dict):
        raise QueryError("a query must be a JSON object")
    query_id = data.get("id")
    if not isinstance(query_id, str):
        raise QueryError("'id' must be a string", "id",
                         query_id if isinstance(query_id, (int, float)) else None)
    if "action" in data:
        return _action(data, query_id)
    try:
        return _query(data, query_id, board_size, default_komi, default_visits, perspective)
    except OverflowError:        # a number too large for a float, where one is read
        raise QueryError("a number in the query is too large", None, query_id) from None


def _action(data: dict, query_id: str) -> Action:
    action = data["action"]
    if action in ("query_version", "clear_cache", "terminate_all"):
        return Action(action, query_id, data)
    if action != "terminate":
        raise QueryError(f"unknown action {action!r}: query_version, clear_cache, terminate "
                         f"or terminate_all", "action", query_id)
    terminate_id = data.get("terminateId")
    if not isinstance(terminate_id, str):
        raise QueryError("terminate needs 'terminateId', a string", "terminateId", query_id)
    turns = data.get("turnNumbers")
    if turns is not None and not (isinstance(turns, list) and all(_is_int(t) for t in turns)):
        raise QueryError("'turnNumbers' must be a list of integers", "turnNumbers", query_id)
    return Action("terminate", query_id, data, terminate_id,
                  tuple(turns) if turns is not None else None)


def _query(data, query_id, board_size, default_komi, default_visits, perspective) -> Query:
    def refuse(message, name):
        raise QueryError(message, name, query_id)

    for name in ("boardXSize", "boardYSize"):
        if name not in data:
            refuse(f"'{name}' is required", name)
        if not _is_int(data[name]):
            refuse(f"'{name}' must be an integer", name)
        if data[name] != board_size:
            refuse(f"this net plays only {board_size}x{board_size}; the query asks "
                   f"{data.get('boardXSize')}x{data.get('boardYSize')}", name)
    n = board_size
    if "rules" not in data:
        refuse("'rules' is required", "rules")
    warnings = _rules_warnings(data["rules"], refuse)
    komi = default_komi
    if "komi" in data:
        komi = data["komi"]
        if isinstance(komi, bool) or not isinstance(komi, (int, float)) or not math.isfinite(komi):
            refuse("'komi' must be a number", "komi")
        if not -150 <= komi <= 150 or komi * 2 != int(komi * 2):
            refuse(f"komi {komi}: must be an integer or half-integer in [-150, 150]", "komi")
        komi = float(komi)
    if "moves" not in data:
        refuse("'moves' is required", "moves")
    moves = [(colour, point) for colour, point in _stones(data["moves"], n, "moves", refuse)]
    stones = np.zeros((n, n), np.int8)
    for colour, point in _stones(data.get("initialStones", []), n, "initialStones", refuse):
        if point == n * n:
            refuse("an initial stone cannot be a pass", "initialStones")
        stones[divmod(point, n)] = colour
    initial_player = 1
    if "initialPlayer" in data:
        initial_player = _player(data["initialPlayer"], "initialPlayer", refuse)
    elif moves:
        initial_player = moves[0][0]
    turns = data.get("analyzeTurns", [len(moves)])
    if not isinstance(turns, list) or not all(_is_int(t) for t in turns):
        refuse("'analyzeTurns' must be a list of integers", "analyzeTurns")
    for turn in turns:
        if not 0 <= turn <= len(moves):
            refuse(f"turn {turn} is not in 0..{len(moves)} (the game has {len(moves)} moves)",
                   "analyzeTurns")
    priorities = [_integer(data, "priority", 0, refuse)] * len(turns)
    if "priorities" in data:
        listed = data["priorities"]
        if not isinstance(listed, list) or len(listed) != len(turns) \
                or not all(_is_int(p) for p in listed):
            refuse("'priorities' must be a list of integers, one per analysed turn",
                   "priorities")
        priorities = list(listed)
    settings = data.get("overrideSettings", {})
    if not isinstance(settings, dict):
        refuse("'overrideSettings' must be an object", "overrideSettings")
    visits = settings.get("maxVisits", default_visits)
    visits = _integer(data, "maxVisits", visits, refuse)
    if not 1 <= visits <= MAX_VISITS_LIMIT:
        refuse(f"'maxVisits' must be in 1..{MAX_VISITS_LIMIT}", "maxVisits")
    perspective = settings.get("reportAnalysisWinratesAs", perspective)
    if not isinstance(perspective, str) or perspective.upper() not in PERSPECTIVES:
        refuse(f"reportAnalysisWinratesAs must be one of {', '.join(PERSPECTIVES)}",
               "overrideSettings")
    every = data.get("reportDuringSearchEvery", 0.0)
    if isinstance(every, bool) or not isinstance(every, (int, float)) or not every >= 0:
        refuse("'reportDuringSearchEvery' must be a number of seconds, at least 0",
               "reportDuringSearchEvery")
    max_time = settings.get("maxTime", 0.0)
    if isinstance(max_time, bool) or not isinstance(max_time, (int, float)) \
            or not max_time >= 0:
        refuse("maxTime must be a number of seconds, at least 0", "overrideSettings")
    pv_length = _integer(data, "analysisPVLen", 15, refuse)
    flags = {}
    for name in ("includeOwnership", "includePolicy", "includeMovesOwnership",
                 "includePVVisits"):
        flags[name] = data.get(name, False)
        if not isinstance(flags[name], bool):
            refuse(f"'{name}' must be true or false", name)
    warnings += [(name, f"{name} is not supported by this engine and was ignored")
                 for name in IGNORED_FIELDS if name in data]
    warnings += [(name, f"unknown field {name!r} ignored") for name in data
                 if name not in KNOWN_FIELDS and name != "action"]
    return Query(query_id, n, moves, stones, initial_player, komi, list(turns), priorities,
                 visits, flags["includeOwnership"], flags["includePolicy"],
                 flags["includeMovesOwnership"], flags["includePVVisits"],
                 perspective.upper(), float(every), float(max_time), max(1, pv_length),
                 warnings)


def _rules_warnings(rules, refuse) -> list:
    if isinstance(rules, dict):
        scoring = str(rules.get("scoring", "AREA")).upper()
        if scoring not in ("AREA", "TERRITORY"):
            refuse(f"unknown scoring {rules.get('scoring')!r} in 'rules'", "rules")
        suicide = rules.get("suicide", False)
        warnings = []
        if scoring == "TERRITORY":
            warnings.append(("rules", "territory scoring analysed as area scoring"))
        if suicide:
            warnings.append(("rules", "suicide is analysed as illegal"))
        return warnings
    name = rules.lower().replace("_", "-").replace(" ", "-") if isinstance(rules, str) else None
    if name not in RULES:
        refuse(f"unknown rules {rules!r}: one of {', '.join(sorted(RULES))}", "rules")
    if name in TERRITORY_RULES:
        return [("rules", f"{rules} rules analysed with area scoring")]
    return []


def _stones(items, n: int, name: str, refuse) -> list:
    if not isinstance(items, list):
        refuse(f"'{name}' must be a list of [player, vertex] pairs", name)
    found = []
    for index, item in enumerate(items):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], str)):
            refuse(f"'{name}'[{index}] must be a [player, vertex] pair", name)
        colour = _player(item[0], name, refuse)
        vertex = item[1]
        if vertex.lower() == "pass":
            found.append((colour, n * n))
            continue
        try:
            found.append((colour, coords.from_gtp(vertex, n)))
        except ValueError:
            refuse(f"'{name}'[{index}]: {vertex!r} is not a point of the {n}x{n} board", name)
    return found


def _player(text, name: str, refuse) -> int:
    if isinstance(text, str) and text.upper() in ("B", "BLACK"):
        return 1
    if isinstance(text, str) and text.upper() in ("W", "WHITE"):
        return -1
    refuse(f"player {text!r} in '{name}': expected \"B\" or \"W\"", name)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _integer(data: dict, name: str, default: int, refuse) -> int:
    value = data.get(name, default)
    if not _is_int(value):
        refuse(f"'{name}' must be an integer", name)
    return value
