"""A whole game's review through the KataGo JSON analysis engine: batched against one position
after another, measured in one run.

A 60-move 9x9 game is played by the model itself (16 simulations a move, moves sampled by
visits, a fixed seed), then reviewed as KaTrain reviews a game: every turn at `--visits`
visits (ownership, each move's ownership and the policy included, win rates as Black). Both
ways send the same one query (`analyzeTurns` 0..59) to `AnalysisEngine`:
- batched: all 60 positions in one search batch (`--batch-size`, default 64);
- one after another: a batch of one, so the 60 searches run in turn.
Repeats alternate the two; the median of each is reported, and how often both chose the same
best move (they differ only where the net's batched arithmetic rounds differently).

    .venv/bin/python benchmarks/bench_analysis.py [--model models/9x9.npz] [--visits 100]

Last line: `analysis review turns=60 visits=V batched_s=X sequential_s=Y speedup=Y/X`.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from analysis_engine.engine import AnalysisEngine  # noqa: E402
from games import players  # noqa: E402
from games.search import SearchingGames  # noqa: E402
from kernels import coords  # noqa: E402
from training.nets import SHIPPED_MODEL  # noqa: E402
from training.options import OneLineParser  # noqa: E402


def play_game(config, net, moves: int, seed: int) -> list:
    """[[player, vertex]] of a game the net plays against itself."""
    driver = SearchingGames(config, 1, net, simulations=16, seed=seed)
    rng = np.random.default_rng(seed)
    game, colour = [], 1
    for _ in range(moves):
        if driver.go.to_numpy(driver.go.is_over())[0]:
            break
        visits = driver.think(np.ones(1, bool), simulations=16).visits[0].astype(np.float64)
        move = int(rng.choice(len(visits), p=visits / visits.sum()))
        game.append(["B" if colour == 1 else "W", coords.to_gtp(move, config.board_size)])
        driver.play(np.array([move]))
        colour = -colour
    return game


def review(config, net, query: str, batch_size: int, visits: int) -> tuple[float, dict]:
    """Seconds to answer `query`, and the best move of each turn."""
    answers = []
    engine = AnalysisEngine(config, net, batch_size=batch_size, tree_visits=visits,
                            default_visits=visits, write=answers.append, log=lambda m: None)
    started = time.perf_counter()
    engine.submit(query)
    engine.close()
    engine.run()
    seconds = time.perf_counter() - started
    best = {}
    for line in answers:
        answer = json.loads(line)
        if "moveInfos" in answer and not answer["isDuringSearch"]:
            best[answer["turnNumber"]] = answer["moveInfos"][0]["move"]
    return seconds, best


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(SHIPPED_MODEL))
    parser.add_argument("--visits", type=int, default=100)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    opened = players.open_source(players.NetSource(args.model), batch_size=args.batch_size)
    config = opened.config.overridden(backend="cpu")
    game = play_game(config, opened.net, args.turns, args.seed)
    turns = list(range(len(game)))
    query = json.dumps({"id": "review", "moves": game, "rules": "japanese", "komi": 7.0,
                        "boardXSize": config.board_size, "boardYSize": config.board_size,
                        "analyzeTurns": turns, "maxVisits": args.visits,
                        "includeOwnership": True, "includeMovesOwnership": True,
                        "includePolicy": True,
                        "overrideSettings": {"reportAnalysisWinratesAs": "BLACK"}})
    print(f"{args.model}: a {len(game)}-move game, every turn at {args.visits} visits",
          flush=True)
    times = {"batched": [], "sequential": []}
    agree = []
    for repeat in range(args.repeats):
        batched, best_batched = review(config, opened.net, query, args.batch_size, args.visits)
        sequential, best_sequential = review(config, opened.net, query, 1, args.visits)
        times["batched"].append(batched)
        times["sequential"].append(sequential)
        agree.append(np.mean([best_batched[t] == best_sequential[t] for t in turns]))
        print(f"  repeat {repeat + 1}: batched {batched:.2f} s, one after another "
              f"{sequential:.2f} s, same best move on {agree[-1]:.0%} of turns", flush=True)
    batched = statistics.median(times["batched"])
    sequential = statistics.median(times["sequential"])
    print(f"analysis review turns={len(turns)} visits={args.visits} batched_s={batched:.2f} "
          f"sequential_s={sequential:.2f} speedup={sequential / batched:.2f}")


if __name__ == "__main__":
    main()
