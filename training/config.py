"""The one typed configuration of a training run: a frozen dataclass, named presets, and
command-line flags derived from its fields.

    config = Config.from_args(["--preset", "tiny", "--simulations", "8"])

Every field can be overridden as `--field value` (`--field true/false` for booleans; the
learning-rate schedule as `step:rate,step:rate`). The resolved config is saved as the run's
config.json. Resuming starts from that file (edits by hand included); the fields given on the
command line override it, except those which shape positions and the net.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
from dataclasses import dataclass, fields

from architectures.quantized import INFERENCES
from kernels.go_batch import BACKENDS, feature_planes
from training.options import OneLineParser, add_run, option_name, parse_bool


# Which self-play games keep root noise only in their opening (Config.opening_noise_only).
OPENING_NOISE_GAMES = ("none", "wide_komi", "all")


@dataclass(frozen=True)
class Config:
    # The game.
    board_size: int = 7
    komi: float = 7.5
    superko: bool = False
    max_moves: int = 0                 # 0 means 2 * board_size ** 2
    history: int = 1                   # previous positions in the net's input planes
    # Input planes of each group's liberties (1, 2, 3+, both sides) and the ko point, 7 more
    # (kernels/go_rules.h go_features); off: the stones, the side to move and a ones plane.
    extra_features: bool = False
    # One more input plane, last: the game's komi for the side to move (kernels/go_batch.py
    # KOMI_SCALE), so that the value and score heads can learn what komi is worth.
    komi_input: bool = False
    # Where the rules of batched play (self-play, matches) run: "cpu" (C/OpenMP), "cuda"
    # (the CUDA kernels; refused at start without a device) or "auto" (CUDA when CuPy sees a
    # device, else the CPU). The net runs wherever TensorFlow finds a GPU, whatever this says.
    backend: str = "auto"
    # The precision the search's net plays in on the CPU (training/inference_choice.py):
    # "auto" (int8 where the CPU has VNNI or int8 measured faster here, and int8 passes the
    # gate by agreement; else float32), "float32", "int8" or "bf16" (refused: ONNX Runtime has
    # no bfloat16 CPU kernels). Training stays float32; the loop's self-play and its match
    # against random follow this, its rated evaluations play float32.
    inference: str = "auto"

    # The net (architectures/).
    blocks: int = 3
    filters: int = 32
    value_hidden: int = 64
    l2: float = 1e-4
    # Auxiliary heads (KataGo): each point's final owner and the final score margin, targets
    # from the Tromp-Taylor end position of each self-play game; trained, not used in play.
    aux_heads: bool = False
    global_pooling: bool = False       # a global pooling bias at the end of the trunk (resnet.py)
    ownership_loss_weight: float = 1.5
    score_loss_weight: float = 1.0
    # The opponent's reply head (KataGo's opponent policy; needs aux_heads): trained to predict
    # the search's policy target at the next position; not used in play.
    reply_head: bool = False
    reply_loss_weight: float = 0.15

    # The search (py_util/).
    simulations: int = 48
    # The GTP engine's and the GUI's search per move (export_model.py --play-simulations sets
    # it in a model file); 0 means `simulations`, the self-play budget.
    play_simulations: int = 0
    c_puct: float = 1.5
    fpu_reduction: float = 0.25
    # Play (GTP, the GUI, matches; not self-play): choose the move by lower confidence bound
    # among the well-visited ones instead of the most visited (py_util/mcts.py move_preferences).
    lcb_move_choice: bool = False
    # Play (GTP, the GUI, matches; not self-play): the search's leaf utility mixes in the
    # expected score margin with this weight (games/search.py SearchSettings.score_utility;
    # needs aux_heads and komi_input); 0 is the value alone.
    score_utility: float = 0.0
    dirichlet_alpha: float = 0.3
    noise_fraction: float = 0.25
    temperature_moves: int = 8         # moves per player sampled by visit counts, then greedy
    # Self-play's root noise (Dirichlet, or Gumbel's draw) only in each player's first
    # temperature_moves moves of some games: their later moves are searched without it and
    # played by the search's choice (the most visits; Gumbel: the best of the top
    # `gumbel_considered` by prior), as a match plays. Noisy moves lose games by more than
    # the komi, so results, and the value trained on them, barely follow the komi
    # (docs/RESULTS.md, thirteenth session; the fourteenth found quiet games of the shipped
    # net's size still swing by about 30 points, so it narrows the gap, no more). "none":
    # noise in every move of every game; "all": every game; "wide_komi": the games of the
    # komi_wide_share only, whose komi is there to teach what komi is worth, while the games
    # near `komi` keep exploring.
    opening_noise_only: str = "none"
    leaves_per_game: int = 1           # leaves selected per game per search step (virtual loss)
    # Search only sensible moves: no filling of one's own eyes, pass only when nothing else is
    # left. Games are then played out until Tromp-Taylor scoring counts what a player would,
    # and a young net cannot learn to pass its way through self-play (it did: see the notes).
    sensible_moves_only: bool = True
    # Forced playouts with policy target pruning (KataGo, Wu 2019), in self-play only: a root
    # child below sqrt(k * prior * visits) visits is searched first, and those visits are
    # taken out of its policy target again (py_util/mcts.py pruned_visits). k; 0 is off
    # (KataGo uses 2).
    forced_playouts: float = 0.0
    # Playout cap randomization (KataGo, Wu 2019): each self-play move gets the full search
    # (`simulations`, root noise) with probability full_search_share, else a fast search
    # (`fast_simulations`, no noise); only fully searched positions become training positions.
    # 1.0 (or more): every move is searched fully (off).
    full_search_share: float = 1.0
    fast_simulations: int = 16
    # Gumbel root selection (Danihelka et al. 2022; py_util/gumbel.py), in self-play only: m > 0
    # samples m root actions by Gumbel noise on the priors, shares the simulations among them
    # by sequential halving, plays the best survivor and trains on softmax(logits + sigma(
    # completed Q)), for every move (no Dirichlet noise, no temperature). For few simulations
    # (the paper: 8-32), where PUCT with noise learns poorly. 0: PUCT. Not with forced
    # playouts, playout cap randomization or several leaves per game.
    gumbel_considered: int = 0
    # AlphaGo's leaf evaluation (Silver et al. 2016): a new leaf's value is
    # (1 - rollout_lambda) * v + rollout_lambda * z, v the net's value and z the result of one
    # random sensible playout from the leaf (GoBatch.playouts). 0: the net alone (AlphaZero);
    # 1: the playout alone (with a uniform evaluator, pure Monte Carlo tree search).
    rollout_lambda: float = 0.0

    # Self-play.
    num_games: int = 128               # games played at once; the net's inference batch
    positions_per_iteration: int = 4096
    resign_threshold: float = -1.0     # resign when the root value is below this; -1 disables
    resign_playthrough: float = 0.1    # share of games that never resign, to count false resigns
    # Komi per self-play game (needs komi_input): most games draw it from a normal law around
    # `komi` of standard deviation komi_spread, a share komi_wide_share uniformly within
    # komi +- board_size ** 2 / 4 (giving or taking a big lead); rounded to half points.
    # 0 and 0: every game at `komi`.
    komi_spread: float = 0.0
    komi_wide_share: float = 0.0
    # Share of self-play games that start from 2-4 free handicap stones, White to move, so that
    # the value means something in handicap games.
    handicap_share: float = 0.0
    # Each kept position's value target: (1 - s) * the game's result + s * the search's value
    # of the position (its root's visit-weighted mean Q, the side to move's view), s this
    # share. The result says how the game went after many sampled moves, each of which can
    # lose a group (docs/RESULTS.md, fourteenth session); the search's value is what it
    # thought with the position in front of it. 0: the result alone (AlphaZero); 0.5: the mean
    # of the two, as Oracle's "Lessons from AlphaZero" (2018) trained Connect Four. Positions
    # read from chunks (--selfplay-from) keep the targets they were played with. It helped
    # the 9x9 preset's loop from zero, and hurt the device script's recipe from zero (512
    # games in flight, batches of 512) and a go-on run from the shipped model
    # (docs/RESULTS.md, twenty-seventh to twenty-ninth sessions).
    value_search_share: float = 0.0

    # Training.
    train_batch_size: int = 256
    sample_reuse: float = 4.0          # training samples drawn per new self-play position
    # Policy surprise weighting (KataGo): draw replay positions with probability proportional
    # to (1 - w) + w * surprise / mean surprise, the surprise being how far the search's policy
    # target is from the net's priors (training/replay_buffer.py); 0: uniform.
    policy_surprise_weight: float = 0.0
    replay_window: int = 60000         # most recent positions kept
    min_replay: int = 2048             # positions needed before training starts
    learning_rates: tuple = ((0, 0.02), (30000, 0.005), (80000, 0.001))
    momentum: float = 0.9

    # Evaluation and bookkeeping.
    eval_games_random: int = 64        # games against a uniformly random player, per such match
    random_every: int = 1              # iterations between matches against random; 0: never
    eval_simulations: int = 16
    gnugo_every: int = 5               # iterations between GNU Go and previous-checkpoint matches; 0: never
    gnugo_level: int = 0               # the level of the first GNU Go match; the run climbs from it
    gnugo_promotion: float = 0.8       # win rate at which the next match is a level higher (> 1: never)
    gnugo_games: int = 20
    previous_games: int = 20           # against the checkpoint of the previous such evaluation
    checkpoints_to_keep: int = 3
    sgf_samples: int = 2               # self-play games saved as SGF per iteration
    seed: int = 0
    iterations: int = 0                # 0 means run until stopped
    max_cpu_seconds: float = 0.0       # stop after the iteration that reaches this cpu_seconds; 0: never

    # The recipe: what the run changes in itself as it goes, ((positions, field, value), ...)
    # in order, each applied at the end of the first iteration whose schedule position (the
    # self-play positions behind the net, a warm start's source's included) reaches
    # `positions`. Fields: learning_rate (the rate from then on, in place of learning_rates),
    # simulations, and the net's growth: blocks (residual blocks added as identities),
    # aux_heads and extra_features (added as a warm start adds them), so the grown net first
    # plays as before; a growth never shrinks a net. Keyed by positions rather than CPU-hours:
    # they are the same on every machine (the same net ran 2.3x slower on another box of one
    # kind), exact on resume, and what the net has learnt from; a position costs more CPU as
    # the net and the search grow, as in the lineage the schedule repeats (docs/LINEAGE.md).
    # On the command line: --schedule "POSITIONS:field=value,..." ("" for none).
    schedule: tuple = ()

    # Scaling out (cluster/): self-play actors on Ray; 0 plays in the training process.
    workers: int = 0
    ray_address: str = ""              # "" starts a local Ray; "auto" or HOST:PORT joins a cluster
    worker_gpus: float = 0.0           # GPUs Ray assigns each actor (a fraction shares one)

    @property
    def resolved_play_simulations(self) -> int:
        return self.play_simulations or self.simulations

    @property
    def resolved_max_moves(self) -> int:
        return self.max_moves or 2 * self.board_size ** 2

    @property
    def board_planes(self) -> int:
        """The 0/1 input planes, all but the komi plane: what self-play and the replay keep."""
        return feature_planes(self.history, self.extra_features)

    @property
    def input_planes(self) -> int:
        return feature_planes(self.history, self.extra_features, self.komi_input)

    @property
    def num_actions(self) -> int:
        return self.board_size ** 2 + 1

    def validate(self) -> "Config":
        """Check every field's type and range; the message names the field, the allowed range
        and the value. Ranges are what the code can run with (a replay window must fit in
        memory, a search needs a simulation, a Dirichlet alpha must be positive)."""
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("learning_rates", "schedule"):
                continue
            kind = type(f.default)
            if kind is bool:
                ok = isinstance(value, bool)
            elif kind is str:
                ok = isinstance(value, str)
            elif kind is int:
                ok = isinstance(value, int) and not isinstance(value, bool)
            else:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok:
                raise ValueError(f"config: {f.name} must be a {kind.__name__}, got {value!r}")
            if kind is float and not math.isfinite(value):
                raise ValueError(f"config: {f.name} must be a finite number, got {value!r}")
        for name, low, high in self._ranges():
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(f"config: {name} must be in [{low}, {high}], got {value!r}")
        schedule = self.learning_rates
        if not (isinstance(schedule, tuple) and len(schedule) >= 1
                and all(isinstance(pair, tuple) and len(pair) == 2 for pair in schedule)):
            raise ValueError(f"config: learning_rates must be step:rate pairs, got {schedule!r}")
        if schedule[0][0] != 0:
            raise ValueError("config: learning_rates must start at step 0")
        if not (all(a[0] < b[0] for a, b in zip(schedule, schedule[1:]))
                and all(math.isfinite(rate) and 0 < rate <= 10 for _, rate in schedule)):
            raise ValueError("config: learning_rates steps must increase and rates be in (0, 10]")
        if self.backend not in BACKENDS:
            raise ValueError(f"config: backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.opening_noise_only not in OPENING_NOISE_GAMES:
            raise ValueError(f"config: opening_noise_only must be one of "
                             f"{', '.join(OPENING_NOISE_GAMES)}, got {self.opening_noise_only!r}")
        if self.opening_noise_only == "wide_komi" and not self.komi_wide_share:
            raise ValueError("config: opening_noise_only wide_komi needs komi_wide_share > 0 "
                             "(it names the games of that share)")
        if self.inference not in INFERENCES:
            raise ValueError(f"config: inference must be one of {', '.join(INFERENCES)}, got "
                             f"{self.inference!r}")
        if self.gumbel_considered and (self.forced_playouts or self.full_search_share < 1
                                       or self.leaves_per_game > 1):
            raise ValueError("config: gumbel_considered > 0 needs forced_playouts 0, "
                             "full_search_share >= 1 and leaves_per_game 1, got "
                             f"{self.forced_playouts}, {self.full_search_share} and "
                             f"{self.leaves_per_game}")
        self._check_schedule()
        if (self.komi_spread or self.komi_wide_share) and not self.komi_input:
            raise ValueError("config: komi_spread and komi_wide_share need komi_input true (a "
                             "net that cannot see the komi would learn noise), got "
                             f"{self.komi_spread} and {self.komi_wide_share}")
        if self.score_utility and not (self.aux_heads and self.komi_input):
            raise ValueError(f"config: score_utility needs a net with the score head that reads "
                             f"the komi (aux_heads and komi_input true: finished games count the "
                             f"game's komi, so must the net), got {self.score_utility}")
        if self.reply_head and not self.aux_heads:
            raise ValueError("config: reply_head needs aux_heads true (the reply head is trained "
                             "beside the ownership and score heads)")
        if self.handicap_share and self.board_size < 5:
            raise ValueError(f"config: handicap_share needs a board of 5x5 or more (2-4 stones "
                             f"off the first line), got {self.board_size}x{self.board_size}")
        if self.ray_address and not self.workers:
            raise ValueError(f"config: ray_address needs workers > 0, got ray_address {self.ray_address!r}")
        return self

    # Fields a schedule may change, and the type of their values.
    SCHEDULE_FIELDS = {"learning_rate": float, "simulations": int, "blocks": int,
                       "aux_heads": bool, "extra_features": bool}
    GROWTH_FIELDS = ("blocks", "aux_heads", "extra_features", "komi_input", "reply_head")

    def _check_schedule(self) -> None:
        events = self.schedule
        if not isinstance(events, tuple) or not all(
                isinstance(e, tuple) and len(e) == 3 for e in events):
            raise ValueError(f"config: schedule must be (positions, field, value) triples, "
                             f"got {events!r}")
        for at, name, value in events:
            kind = self.SCHEDULE_FIELDS.get(name)
            if kind is None:
                raise ValueError(f"config: schedule field {name!r} is not one of "
                                 f"{', '.join(self.SCHEDULE_FIELDS)}")
            if not isinstance(at, int) or isinstance(at, bool) or at < 0:
                raise ValueError(f"config: schedule positions must be whole numbers >= 0, "
                                 f"got {at!r}")
            if kind is bool:
                ok = value is True
            elif kind is int:
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
            else:
                ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
                      and math.isfinite(value) and 0 < value <= 10)
            if not ok:
                wanted = {bool: "true (a growth only adds)", int: "a whole number >= 1",
                          float: "a rate in (0, 10]"}[kind]
                raise ValueError(f"config: schedule {at}:{name}={value!r}: expected {wanted}")
            if name in ("simulations", "blocks") and not (
                    1 <= value <= (100_000 if name == "simulations" else 40)):
                raise ValueError(f"config: schedule {at}:{name}={value} is out of range")
        if any(a[0] > b[0] for a, b in zip(events, events[1:])):
            raise ValueError("config: schedule positions must not decrease")
        if self.workers and any(name != "learning_rate" for _, name, _ in events):
            raise ValueError("config: with workers only learning_rate events may be scheduled "
                             "(actors keep the net shape and search they started with); give "
                             "--schedule \"\" or only learning_rate events")

    def scheduled(self, position: int) -> "Config":
        """This config after every schedule event at or before `position`."""
        changes: dict = {}
        for at, name, value in self.schedule:
            if at > position:
                break
            if name == "learning_rate":
                changes["learning_rates"] = ((0, float(value)),)
            elif name == "blocks":
                changes["blocks"] = max(changes.get("blocks", self.blocks), value)
            else:
                changes[name] = value if name not in self.GROWTH_FIELDS else True
        return dataclasses.replace(self, **changes).validate() if changes else self

    def schedule_events(self, after: int, upto: int) -> list[tuple]:
        """The events of positions in (after, upto]."""
        return [event for event in self.schedule if after < event[0] <= upto]

    def schedule_start(self, source: "Config") -> int:
        """Where a warm start from a net of `source`'s shape, with no schedule position of its
        own, enters this schedule: the first position whose scheduled net is at least as
        grown as the source (its last event if none is), so its rate and search are those the
        schedule gives a net of that size; 0 without a schedule."""
        for at, _, _ in self.schedule:
            grown = self.scheduled(at)
            if (grown.blocks >= source.blocks and grown.aux_heads >= source.aux_heads
                    and grown.extra_features >= source.extra_features):
                return at
        return self.schedule[-1][0] if self.schedule else 0

    # The most memory the replay buffer may take: a larger window fails later, in an allocation.
    REPLAY_BYTES_LIMIT = 16 * 2 ** 30

    def _ranges(self) -> list[tuple[str, float, float]]:
        n = self.board_size
        position_bytes = (n * n * self.input_planes + 4 * self.num_actions + 4
                          + (4 * self.num_actions if self.reply_head else 0))
        return [
            ("board_size", 2, 19), ("komi", -2 * n * n, 2 * n * n),
            ("max_moves", 0, 4 * n * n), ("history", 0, 16),
            ("blocks", 0, 40), ("filters", 1, 512), ("value_hidden", 1, 2048), ("l2", 0, 1),
            ("simulations", 1, 100_000), ("c_puct", 1e-3, 100), ("fpu_reduction", -2, 2),
            ("dirichlet_alpha", 1e-3, 100), ("noise_fraction", 0, 1),
            ("temperature_moves", 0, 4 * n * n), ("leaves_per_game", 1, 64),
            ("num_games", 1, 16384), ("positions_per_iteration", 1, 10_000_000),
            ("resign_threshold", -1, 1), ("resign_playthrough", 0, 1),
            ("train_batch_size", 1, 8192), ("sample_reuse", 1e-3, 1000),
            ("replay_window", self.train_batch_size, self.REPLAY_BYTES_LIMIT // position_bytes),
            ("min_replay", 0, self.replay_window), ("momentum", 0, 0.999),
            ("eval_games_random", 1, 100_000), ("eval_simulations", 1, 100_000),
            ("gnugo_every", 0, 1_000_000), ("random_every", 0, 1_000_000), ("gnugo_level", 0, 10), ("gnugo_games", 1, 100_000),
            ("previous_games", 1, 100_000), ("checkpoints_to_keep", 2, 1000),
            ("sgf_samples", 0, 100_000), ("seed", 0, 2 ** 32 - 1), ("iterations", 0, 10 ** 9),
            ("ownership_loss_weight", 0, 100), ("score_loss_weight", 0, 100),
            ("reply_loss_weight", 0, 100),
            ("full_search_share", 1e-3, 1e9), ("fast_simulations", 1, 100_000),
            ("gnugo_promotion", 1e-3, 1e9), ("max_cpu_seconds", 0, 1e12),
            ("play_simulations", 0, 100_000), ("forced_playouts", 0, 100), ("workers", 0, 100_000), ("worker_gpus", 0, 64), ("rollout_lambda", 0, 1),
            ("gumbel_considered", 0, n * n + 1), ("komi_spread", 0, n * n),
            ("komi_wide_share", 0, 1), ("handicap_share", 0, 1), ("score_utility", 0, 1),
            ("value_search_share", 0, 1),
            ("policy_surprise_weight", 0, 1),
        ]

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
        if "schedule" in data:
            data["schedule"] = tuple(tuple(event) for event in data["schedule"])
        if isinstance(data.get("opening_noise_only"), bool):
            # Written before the field named the games (thirteenth session): true was all.
            data["opening_noise_only"] = "all" if data["opening_noise_only"] else "none"
        return cls(**data).validate()

    # Fields that shape stored positions or the net: a run cannot resume with others.
    SHAPE_FIELDS = ("board_size", "history", "extra_features", "komi_input", "blocks", "filters",
                    "value_hidden", "aux_heads", "global_pooling", "reply_head")

    # Fields that shape a net's input planes: a net searches with its own whatever the game's.
    INPUT_FIELDS = ("history", "extra_features", "komi_input")

    def with_inputs_of(self, net: "Config") -> "Config":
        """This config (the game's rules, the search) with `net`'s input-plane fields; a net
        that does not read the komi plays without self-play's komi draws."""
        inputs = {name: getattr(net, name) for name in self.INPUT_FIELDS}
        if not net.komi_input:
            inputs.update(komi_spread=0.0, komi_wide_share=0.0)
            if self.opening_noise_only == "wide_komi":
                inputs.update(opening_noise_only="none")
        return self.overridden(**inputs)

    def shape(self) -> dict:
        """The SHAPE_FIELDS of this config: what a checkpoint records of its net."""
        return {name: getattr(self, name) for name in self.SHAPE_FIELDS}

    def incompatibilities(self, saved: "Config") -> list[str]:
        return [f"{name}: run has {getattr(saved, name)}, command asks {getattr(self, name)}"
                for name in self.SHAPE_FIELDS if getattr(saved, name) != getattr(self, name)]

    def changes_from(self, other: "Config") -> list[str]:
        """"field old -> new" for every field that differs from `other`."""
        return [f"{f.name} {getattr(other, f.name)!r} -> {getattr(self, f.name)!r}"
                for f in fields(self) if getattr(other, f.name) != getattr(self, f.name)]

    @staticmethod
    def explicit_overrides(args: argparse.Namespace) -> dict:
        """The fields the command line set explicitly (by --FIELD VALUE)."""
        return {f.name: getattr(args, f.name) for f in fields(Config)
                if getattr(args, f.name, None) is not None}

    @classmethod
    def from_args(cls, argv=None, *, description: str = "Train a Go net by batched self-play.",
                  add_arguments=None, check=None) -> tuple["Config", argparse.Namespace]:
        """(config, args) from the command line: --run, --preset and a flag per field.
        `add_arguments(parser)` adds a command's own flags; `check(args, parser)` may refuse
        them with parser.error."""
        parser = OneLineParser(description=description)
        if add_arguments is not None:
            add_arguments(parser)
        add_run(parser, default="default")
        parser.add_argument("--preset", default=None, choices=sorted(PRESETS),
                            help="a new run's base settings (default cpu); a resumed run's base "
                                 "is its config.json")
        parser.add_argument("--init-from", default=None, metavar="PATH",
                            help="a new run starts from these weights (a model file .npz, a run "
                                 "directory or one of its checkpoints) and takes their board and "
                                 "net shape; fresh optimizer and replay; --aux-heads true may add "
                                 "fresh ownership and score heads, a larger --blocks residual "
                                 "blocks that start as identities, a larger --filters channels "
                                 "that start as copies of the source's (outgoing weights shared "
                                 "out), --extra-features true input planes and --komi-input true "
                                 "the komi plane with zero weights")
        for f in fields(cls):
            parser.add_argument(option_name(f.name), dest=f.name, default=None,
                                type=_parser_for(f),
                                choices={"backend": BACKENDS, "inference": INFERENCES,
                                         "opening_noise_only": OPENING_NOISE_GAMES}.get(f.name),
                                help=f"(default from the preset: {getattr(PRESETS['cpu'], f.name)!r})")
        args = parser.parse_args(argv)
        if check is not None:
            check(args, parser)
        overrides = cls.explicit_overrides(args)
        try:
            return dataclasses.replace(PRESETS[args.preset or "cpu"], **overrides).validate(), args
        except ValueError as error:
            parser.error(str(error))  # a usage error (exit code 2), not a traceback

    def overridden(self, **changes) -> "Config":
        return dataclasses.replace(self, **changes).validate()

    def holding(self, other: "Config") -> "Config":
        """This config with a net at least as grown as `other`'s: each growth field the
        larger of the two. A net never shrinks: a schedule or a restart that asks for less
        than a checkpoint has keeps the checkpoint's growth. Not validated: the grown net's
        positions may no longer fit this config's replay window, which matters to a run
        (validate() it) but not to a comparison of net shapes."""
        return dataclasses.replace(self, **{name: max(getattr(self, name), getattr(other, name))
                                            for name in self.GROWTH_FIELDS})

    def grows_from(self, other: "Config") -> bool:
        """Whether this config's net differs from `other`'s in a growth field."""
        return any(getattr(self, name) != getattr(other, name) for name in self.GROWTH_FIELDS)


def _parse_schedule(text: str) -> tuple:
    try:
        pairs = tuple((int(step), float(rate)) for step, rate in
                      (item.split(":") for item in text.split(",")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected step:rate,step:rate..., got {text!r}") from None
    return pairs


def _parse_events(text: str) -> tuple:
    """"POSITIONS:field=value,..." as schedule triples (values typed by field)."""
    events = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        where, colon, change = item.partition(":")
        name, equals, value = change.partition("=")
        kind = Config.SCHEDULE_FIELDS.get(name.strip())
        try:
            if not (colon and equals) or kind is None:
                raise ValueError
            typed = parse_bool(value) if kind is bool else kind(value)
            events.append((int(where), name.strip(), typed))
        except (ValueError, argparse.ArgumentTypeError):
            raise argparse.ArgumentTypeError(
                f"expected POSITIONS:field=value,... with a field of "
                f"{', '.join(Config.SCHEDULE_FIELDS)}, got {item!r}") from None
    return tuple(events)


def _parser_for(f: dataclasses.Field):
    if f.name == "learning_rates":
        return _parse_schedule
    if f.name == "schedule":
        return _parse_events
    kind = type(f.default)
    return parse_bool if kind is bool else kind


PRESETS = {
    # The default: learns something visible on a 2-core laptop CPU within an hour.
    "cpu": Config(),
    # For tests: seconds per iteration.
    # (float32 inference: an int8 graph of a 1x8 net gains nothing and costs each start.)
    "tiny": Config(inference="float32", board_size=5, history=1, blocks=1, filters=8, value_hidden=16, simulations=4,
                   num_games=8, positions_per_iteration=64, train_batch_size=32, sample_reuse=1.0,
                   replay_window=1024, min_replay=32, eval_games_random=8, eval_simulations=2,
                   sgf_samples=1, temperature_moves=2, gnugo_every=0, gnugo_level=0,
                   gnugo_games=4, previous_games=4),
    # 9x9, the smallest board people play, and ./run.sh's default (docs/LINEAGE.md). The
    # cpu preset's 3x32 net: at 48 simulations it went from 0% to 20-30% against GNU Go level
    # 0 (20 games at 48 simulations) in its first 0.5-0.8 CPU-hours, while a 4x48 net at 64
    # simulations played 2.5x fewer positions per CPU-hour and won no game against level 0 in
    # 1.2 CPU-hours. Gumbel root selection at 16 simulations (8 considered moves) then beat
    # that 48-simulation PUCT loop at equal trainer CPU time, 34-6 at 0.56 CPU-hours and
    # 29-11 at 0.86 (40 games each, both colours, varied openings), where KataGo's bundle
    # (ownership and score heads, global pooling, liberty planes, forced playouts, playout
    # cap randomization 96/24) lost 7-33 to it at 0.55. Dirichlet alpha ~ 10 / legal moves
    # (used by PUCT runs of this preset); matches at 48 simulations of PUCT, GNU Go every 10
    # iterations climbing from level 0.
    # Its schedule is the first lineage of the shipped net to its ninth version
    # (docs/LINEAGE.md; the tenth added the komi plane by a warm start; the eleventh, shipped
    # now, is this preset from zero, models/README.md), each step where that chain
    # of warm starts took it, at about 4,200 self-play positions per iteration: the rate from
    # 0.02 to 0.005 (iteration 414 of the lineage), 0.0015 (772), 0.0006 with 32 simulations
    # (1118) and 0.0003 (1897); 6 residual blocks (1390) and 8 blocks (2106). A warm start
    # from the shipped model enters it after its last event. The lineage added the ownership
    # and score heads (955) and the liberty and ko planes (1778) late; the preset has them
    # from the start: from zero on the GPU call's recipe, at 1.74M positions, the net with
    # both won 33/40 against GNU Go level 10 at 400 simulations and the planes alone 30/40,
    # where two earlier runs of the same command without either won 18/40 and 20/40; the net
    # with both beat the planes alone 105-55 (docs/RESULTS.md, thirty-fourth session).
    "9x9": Config(board_size=9, gumbel_considered=8, simulations=16, dirichlet_alpha=0.15,
                  aux_heads=True, extra_features=True, temperature_moves=10,
                  eval_games_random=16, random_every=10, eval_simulations=48,
                  gnugo_every=10, gnugo_level=0, gnugo_games=20, previous_games=20,
                  learning_rates=((0, 0.02),),
                  schedule=((1_740_000, "learning_rate", 0.005),
                            (3_240_000, "learning_rate", 0.0015),
                            (4_700_000, "learning_rate", 0.0006),
                            (4_700_000, "simulations", 32),
                            (5_840_000, "blocks", 6),
                            (7_970_000, "learning_rate", 0.0003),
                            (8_850_000, "blocks", 8))),
    # The original system's settings: 7x7, 5 layers of 128 filters, 800 simulations,
    # 32 turns per player (a game is at most 64 moves), 128 games at once.
    "paper": Config(board_size=7, blocks=5, filters=128, value_hidden=128, simulations=800,
                    max_moves=64, num_games=128, history=7),
}
