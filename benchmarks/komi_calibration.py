"""What a net believes komi is worth: Black's win probability on the empty board, komi by
komi, from the net's value alone and after a search, and the komi where it crosses 50%.

Each komi is one game of one batch (GoBatch keeps a komi per game), so a net that reads the
komi (Config.komi_input) answers each at its own; an older net answers every komi alike. On
9x9 under area scoring the fair komi is about 7: a calibrated net crosses 50% between 5 and 9.

    .venv/bin/python benchmarks/komi_calibration.py [--model F | --run R] [--sims 200]
                                                     [--komis=-4:20:1]

(`--komis=...` with the equals sign: a value that starts with a minus sign would be read as
an option otherwise.)

With `--selfplay-games G`, the net's own self-play at each komi too: G games at once with the
net's self-play settings (simulations, Gumbel or PUCT, root noise, temperature_moves,
opening_noise_only; `--temperature-moves` and `--opening-noise-only` change the last two), no
handicap, and Black's mean result (a draw counts half) with its standard error over the
distinct games (without noise after the opening, games repeat one another). A net whose
wide-komi games were the quiet ones (opening_noise_only wide_komi) plays every komi's games
quiet here: the komis far from the standard are what the table is for. Each game in
flight counts its first game only, so long games weigh as much as short ones. A value
trained on such games can read the komi no better than their results follow it.

Last line: `komi calibration model=... crossing_net=K crossing_search=K` (none: no crossing).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from games import players  # noqa: E402
from games.search import SearchingGames  # noqa: E402
from games.selfplay import SelfPlay  # noqa: E402
from training import options  # noqa: E402
from training.options import OneLineParser  # noqa: E402


def komi_range(text: str) -> np.ndarray:
    """"LOW:HIGH:STEP" -> the komis LOW, LOW + STEP, ... up to HIGH included."""
    try:
        low, high, step = (float(part) for part in text.split(":"))
    except ValueError:
        raise ValueError(f"--komis must be LOW:HIGH:STEP, got {text!r}") from None
    if step <= 0 or high < low:
        raise ValueError(f"--komis needs LOW <= HIGH and STEP > 0, got {text!r}")
    return np.arange(low, high + step / 2, step)


def crossing(komis: np.ndarray, black: np.ndarray) -> float | None:
    """The komi where Black's win probability first falls through 50% (linear between the
    two komis around it), None if it never does."""
    for i in range(len(komis) - 1):
        a, b = black[i] - 0.5, black[i + 1] - 0.5
        if a >= 0 > b:
            return float(komis[i] + (komis[i + 1] - komis[i]) * a / (a - b))
    return None


def black_win_probabilities(config, net, komis: np.ndarray, sims: int, seed: int):
    """(net, search): Black's win probability on the empty board at each komi."""
    driver = SearchingGames(config, len(komis), net, simulations=max(sims, 1), seed=seed,
                            num_threads=1)
    driver.go.set_komi(komis, np.arange(len(komis)))
    _, values = net(driver.go.features(config.history))
    by_net = (1 + np.asarray(values, np.float64).reshape(-1)) / 2
    if sims == 0:
        return by_net, None
    driver.think()
    return by_net, (1 + driver.root_values()) / 2     # Black is to move: its view


def selfplay_black_result(config, net, komi: float, games: int, seed: int) -> tuple[float, int]:
    """(Black's mean result (1 a win, 1/2 a draw), the number of distinct games) over the
    first game of each of `games` self-play games played at once at `komi` (no handicap, no
    komi draws). Games whose noise ends early can repeat one another move for move."""
    quiet = "all" if config.opening_noise_only == "wide_komi" else config.opening_noise_only
    config = config.overridden(num_games=games, komi=float(komi), komi_spread=0.0,
                               komi_wide_share=0.0, handicap_share=0.0,
                               opening_noise_only=quiet)
    selfplay = SelfPlay(config, net, seed=seed)
    first: dict = {}
    while len(first) < games:
        for game in selfplay.play(1).games:
            first.setdefault(game.slot, game)
    results = [(1 + game.result) / 2 for game in first.values()]
    return float(np.mean(results)), len({tuple(game.moves) for game in first.values()})


def main(argv=None) -> int:
    parser = OneLineParser(description="Black's win probability on the empty board by komi.")
    options.add_net_source(parser)
    parser.add_argument("--sims", type=int, default=200,
                        help="simulations of the search per komi (0: the net's value alone)")
    parser.add_argument("--komis", default="-4:20:1", help="LOW:HIGH:STEP (default -4:20:1; --komis=-4:20:1 when LOW is negative)")
    parser.add_argument("--selfplay-games", type=int, default=0, metavar="G",
                        help="also G games of the net's self-play at each komi, Black's mean "
                             "result (default 0: none)")
    parser.add_argument("--temperature-moves", type=int, default=None, metavar="M",
                        help="self-play: each player's moves with root noise and sampling "
                             "(default: the net's config)")
    parser.add_argument("--opening-noise-only", default=None, choices=("none", "all"),
                        help="self-play: all: root noise only in those moves, then the "
                             "search's own choice; none: noise in every move (default: the "
                             "net's config)")
    options.add_seed(parser)
    args = parser.parse_args(argv)
    if args.selfplay_games < 0:
        parser.error(f"--selfplay-games must be at least 0, got {args.selfplay_games}")
    try:
        komis = komi_range(args.komis)
    except ValueError as error:
        parser.error(str(error))
    try:
        source = players.net_source(args)
        opened = players.open_source(source, batch_size=len(komis), log=lambda m: None)
    except players.SetupError as error:
        print(f"komi_calibration: {error}", file=sys.stderr)
        return 2
    config = opened.config.overridden(backend="cpu")
    changes = {name: getattr(args, name) for name in ("temperature_moves", "opening_noise_only")
               if getattr(args, name) is not None}
    try:
        selfplay_config = config.overridden(**changes)
    except ValueError as error:
        parser.error(str(error))
    by_net, by_search = black_win_probabilities(config, opened.net, komis, args.sims, args.seed)
    print(f"{opened.label}: komi input {'yes' if config.komi_input else 'no'}; Black's win "
          f"probability on the empty {config.board_size}x{config.board_size} board")
    for i, komi in enumerate(komis):
        searched = "" if by_search is None else f"   search {by_search[i]:.3f}"
        played = ""
        if args.selfplay_games:
            black, distinct = selfplay_black_result(selfplay_config, opened.net, komi,
                                                    args.selfplay_games, args.seed + i)
            # Repeated games add no information: the standard error counts distinct ones.
            error = np.sqrt(black * (1 - black) / distinct)
            played = f"   self-play {black:.3f} +- {error:.3f} ({distinct} distinct games)"
        print(f"komi {komi:6.1f}   net {by_net[i]:.3f}{searched}{played}", flush=True)
    found = [crossing(komis, by_net), None if by_search is None else crossing(komis, by_search)]
    text = ["none" if value is None else f"{value:.2f}" for value in found]
    print(f"komi calibration model={opened.label} sims={args.sims} crossing_net={text[0]} "
          f"crossing_search={text[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
