"""The one typed configuration of a training run: a frozen dataclass, named presets, and
command-line flags derived from its fields.

    config = Config.from_args(["--preset", "tiny", "--simulations", "8"])

Every field can be overridden as `--field value` (`--field true/false` for booleans; the
learning-rate schedule as `step:rate,step:rate`). The resolved config is saved as the run's
config.json; resuming checks that the fields which shape positions and the net still match.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass, field, fields

from kernels.go_batch import BACKENDS


@dataclass(frozen=True)
class Config:
    # The game.
    board_size: int = 7
    komi: float = 7.5
    superko: bool = False
    max_moves: int = 0                 # 0 means 2 * board_size ** 2
    history: int = 1                   # previous positions in the net's input planes
    # Where the rules of batched play (self-play, matches) run: "cpu" (C/OpenMP), "cuda"
    # (the CUDA kernels; refused at start without a device) or "auto" (CUDA when CuPy sees a
    # device, else the CPU). The net runs wherever TensorFlow finds a GPU, whatever this says.
    backend: str = "auto"

    # The net (architectures/).
    blocks: int = 3
    filters: int = 32
    value_hidden: int = 64
    l2: float = 1e-4

    # The search (py_util/).
    simulations: int = 48
    c_puct: float = 1.5
    fpu_reduction: float = 0.25
    dirichlet_alpha: float = 0.3
    noise_fraction: float = 0.25
    temperature_moves: int = 8         # moves per player sampled by visit counts, then greedy
    leaves_per_game: int = 1           # leaves selected per game per search step (virtual loss)
    # Search only sensible moves: no filling of one's own eyes, pass only when nothing else is
    # left. Games are then played out until Tromp-Taylor scoring counts what a player would,
    # and a young net cannot learn to pass its way through self-play (it did: see the notes).
    sensible_moves_only: bool = True

    # Self-play.
    num_games: int = 128               # games played at once; the net's inference batch
    positions_per_iteration: int = 4096
    resign_threshold: float = -1.0     # resign when the root value is below this; -1 disables
    resign_playthrough: float = 0.1    # share of games that never resign, to count false resigns

    # Training.
    train_batch_size: int = 256
    sample_reuse: float = 4.0          # training samples drawn per new self-play position
    replay_window: int = 60000         # most recent positions kept
    min_replay: int = 2048             # positions needed before training starts
    learning_rates: tuple = ((0, 0.02), (30000, 0.005), (80000, 0.001))
    momentum: float = 0.9

    # Evaluation and bookkeeping.
    eval_games_random: int = 64        # games against a uniformly random player, per iteration
    eval_simulations: int = 16
    gnugo_every: int = 5               # iterations between GNU Go and previous-checkpoint matches; 0: never
    gnugo_level: int = 1
    gnugo_games: int = 20
    previous_games: int = 20           # against the checkpoint of the previous such evaluation
    checkpoints_to_keep: int = 3
    sgf_samples: int = 2               # self-play games saved as SGF per iteration
    seed: int = 0
    iterations: int = 0                # 0 means run until stopped

    @property
    def resolved_max_moves(self) -> int:
        return self.max_moves or 2 * self.board_size ** 2

    @property
    def input_planes(self) -> int:
        return 2 * (self.history + 1) + 2

    @property
    def num_actions(self) -> int:
        return self.board_size ** 2 + 1

    def validate(self) -> "Config":
        checks = [
            (2 <= self.board_size <= 19, "board_size must be in 2..19"),
            (self.history >= 0, "history must be >= 0"),
            (self.backend in BACKENDS, f"backend must be one of {', '.join(BACKENDS)}"),
            (self.blocks >= 0 and self.filters >= 1, "blocks >= 0 and filters >= 1"),
            (self.simulations >= 1, "simulations must be >= 1"),
            (self.leaves_per_game >= 1, "leaves_per_game must be >= 1"),
            (self.num_games >= 1, "num_games must be >= 1"),
            (self.train_batch_size >= 1, "train_batch_size must be >= 1"),
            (self.replay_window >= self.train_batch_size, "replay_window must hold a batch"),
            (0 <= self.noise_fraction <= 1, "noise_fraction must be in [0, 1]"),
            (0 <= self.resign_playthrough <= 1, "resign_playthrough must be in [0, 1]"),
            (self.gnugo_every >= 0 and self.gnugo_games >= 1 and self.previous_games >= 1,
             "gnugo_every >= 0, gnugo_games >= 1, previous_games >= 1"),
            (0 <= self.gnugo_level <= 10, "gnugo_level must be in 0..10"),
            (self.checkpoints_to_keep >= 2, "keep at least 2 checkpoints (fallback on corruption)"),
            (len(self.learning_rates) >= 1 and self.learning_rates[0][0] == 0,
             "learning_rates must start at step 0"),
            (all(a[0] < b[0] for a, b in zip(self.learning_rates, self.learning_rates[1:]))
             and all(rate > 0 for _, rate in self.learning_rates),
             "learning_rates steps must increase and rates be positive"),
            (self.positions_per_iteration >= 1, "positions_per_iteration must be >= 1"),
            (self.eval_games_random >= 1, "eval_games_random must be >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"config: {message}")
        return self

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Config":
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"config.json has unknown fields {unknown}")
        if "learning_rates" in data:
            data["learning_rates"] = tuple((int(s), float(r)) for s, r in data["learning_rates"])
        return cls(**data).validate()

    # Fields that shape stored positions or the net: a run cannot resume with others.
    SHAPE_FIELDS = ("board_size", "history", "blocks", "filters", "value_hidden")

    def incompatibilities(self, saved: "Config") -> list[str]:
        return [f"{name}: run has {getattr(saved, name)}, command asks {getattr(self, name)}"
                for name in self.SHAPE_FIELDS if getattr(saved, name) != getattr(self, name)]

    @classmethod
    def from_args(cls, argv=None) -> tuple["Config", argparse.Namespace]:
        parser = argparse.ArgumentParser(description="Train a Go net by batched self-play.")
        parser.add_argument("--run", default="default",
                            help="run directory: a bare name means runs/NAME, a path is used as given")
        parser.add_argument("--preset", default="cpu", choices=sorted(PRESETS))
        for f in fields(cls):
            parser.add_argument(f"--{f.name}", dest=f.name, default=None, type=_parser_for(f),
                                choices=BACKENDS if f.name == "backend" else None,
                                help=f"(default from the preset: {getattr(PRESETS['cpu'], f.name)!r})")
        args = parser.parse_args(argv)
        overrides = {f.name: getattr(args, f.name) for f in fields(cls)
                     if getattr(args, f.name) is not None}
        try:
            return dataclasses.replace(PRESETS[args.preset], **overrides).validate(), args
        except ValueError as error:
            parser.error(str(error))  # a usage error (exit code 2), not a traceback

    def overridden(self, **changes) -> "Config":
        return dataclasses.replace(self, **changes).validate()


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _parse_schedule(text: str) -> tuple:
    try:
        pairs = tuple((int(step), float(rate)) for step, rate in
                      (item.split(":") for item in text.split(",")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected step:rate,step:rate..., got {text!r}") from None
    return pairs


def _parser_for(f: dataclasses.Field):
    if f.name == "learning_rates":
        return _parse_schedule
    kind = type(f.default)
    return _parse_bool if kind is bool else kind


PRESETS = {
    # The default: learns something visible on a 2-core laptop CPU within an hour.
    "cpu": Config(),
    # For tests: seconds per iteration.
    "tiny": Config(board_size=5, history=1, blocks=1, filters=8, value_hidden=16, simulations=4,
                   num_games=8, positions_per_iteration=64, train_batch_size=32, sample_reuse=1.0,
                   replay_window=1024, min_replay=32, eval_games_random=8, eval_simulations=2,
                   sgf_samples=1, temperature_moves=2, gnugo_every=0, gnugo_level=0,
                   gnugo_games=4, previous_games=4),
    # The original system's settings: 7x7, 5 layers of 128 filters, 800 simulations,
    # 32 turns per player (a game is at most 64 moves), 128 games at once.
    "paper": Config(board_size=7, blocks=5, filters=128, value_hidden=128, simulations=800,
                    max_moves=64, num_games=128, history=7),
}
