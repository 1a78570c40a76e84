"""The command line of every entry script: one parser class, and one definition of each option
the scripts share.

Spelling: every option is written with hyphens (`--board-size`, `--init-from`), and that is
what `--help` shows and the docs use. The same name with underscores (`--board_size`, the
spelling of the config fields) is accepted everywhere too: `OneLineParser` rewrites an
option's name before it parses, so no script lists both.

Shared options (`add_*` below), each defined once here with its help and checked by
`check_shared`:
    --run NAME|PATH      a run directory (a bare name means runs/NAME)
    --model FILE         a model file (.npz)
    --checkpoint K       a checkpoint of --run
    --sims S             simulations of tree search per move
    --no-search          the net's policy alone
    --board-size N       the board, where no net sets it (a net knows one size)
    --komi K             the game's komi (default: the net's config, else 7.5)
    --rollout-lambda L   leaf value (1 - L) * net + L * random playout
    --lcb-move-choice B  play by lower confidence bound instead of most visits
    --score-utility W    leaf utility mixes in the expected score (a net reading the komi)
    --seed S
    player specs         `parse_player`: ckpt:latest, ckpt:I, model:PATH, gnugo:L, mcts:S, random
The trainers' flags (bp_tree.py, train_sgf.py, distill.py) are the config's fields
(training/config.py), spelled the same way.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass

from architectures.quantized import INFERENCES

DEFAULT_BOARD_SIZE = 9     # where neither a net nor --board-size sets the board
GNUGO_LEVELS = range(0, 11)
RUN_HELP = "run directory: a bare name means runs/NAME, a path is used as given"
# The trainers' descriptions end with it (bp_tree.py, train_sgf.py, distill.py).
BACKEND_HELP = ("The net trains on Keras' backend: TensorFlow by default, JAX with the "
                "environment variable KERAS_BACKEND=jax (what a GPU machine without "
                "TensorFlow trains with).")


def option_name(field: str) -> str:
    """`--board-size` for the field or option `board_size`: the one spelling."""
    return "--" + field.replace("_", "-")


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose refusals are one line naming the flag and what was wrong (the
    usage text of some eighty flags in front of it hid the reason), and which takes every
    option's name with underscores for hyphens."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (--help lists every flag)\n")

    def parse_known_args(self, args=None, namespace=None):
        words = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(_hyphenated(words), namespace)


def _hyphenated(words: list[str]) -> list[str]:
    """Option names with underscores written with hyphens; values and everything after a bare
    `--` untouched."""
    out = []
    for index, word in enumerate(words):
        if word == "--":
            return out + words[index:]
        if word.startswith("--") and len(word) > 2:
            name, equals, value = word.partition("=")
            word = name.replace("_", "-") + equals + value
        out.append(word)
    return out


# ---------------------------------------------------------------- player specs

@dataclass(frozen=True)
class PlayerSpec:
    """A player named on the command line: `kind` is one of KINDS, `value` its argument
    (ckpt: "latest" or an iteration; model: a path; gnugo: a level; mcts: simulations)."""
    kind: str
    value: str = ""

    def __str__(self) -> str:
        return f"{self.kind}:{self.value}" if self.value else self.kind

    @property
    def is_net(self) -> bool:
        return self.kind in ("ckpt", "model")


PLAYER_KINDS = "ckpt:latest, ckpt:I, model:PATH, gnugo:L, mcts:SIMS or random"


def parse_player(text: str) -> PlayerSpec:
    """The player `text` names; ValueError with a one-line reason otherwise."""
    kind, colon, value = text.partition(":")
    if kind == "random" and not colon:
        return PlayerSpec("random")
    if kind == "mcts" and value.isascii() and value.isdigit() and int(value) >= 1:
        return PlayerSpec("mcts", str(int(value)))
    if kind == "gnugo" and value.isascii() and value.isdigit() and int(value) in GNUGO_LEVELS:
        return PlayerSpec("gnugo", str(int(value)))
    if kind == "ckpt" and (value in ("", "latest") or (value.isascii() and value.isdigit())):
        return PlayerSpec("ckpt", value or "latest")
    if kind == "model" and value:
        return PlayerSpec("model", value)
    if kind == "mcts":
        raise ValueError(f"{text}: expected mcts:SIMS with SIMS at least 1")
    if kind == "gnugo":
        raise ValueError(f"{text}: GNU Go level {value!r}: expected an integer in "
                         f"{GNUGO_LEVELS.start}..{GNUGO_LEVELS.stop - 1}")
    raise ValueError(f"unknown player {text!r}: {PLAYER_KINDS}")


def parse_bool(text: str) -> bool:
    """A flag's true/false (also 1/0, yes/no, on/off); argparse's type error otherwise."""
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _player_type(text: str) -> PlayerSpec:
    try:
        return parse_player(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# ---------------------------------------------------------------- the shared options

def add_run(parser, *, default=None, extra_help: str = "") -> None:
    parser.add_argument("--run", default=default, help=RUN_HELP + extra_help)


def add_net_source(parser) -> None:
    """--run, --model and --checkpoint: which net plays (games/players.py resolves them);
    --inference: in which precision."""
    add_run(parser)
    parser.add_argument("--model", default=None, metavar="FILE",
                        help="a model file (.npz), e.g. the shipped models/9x9.npz or a run's "
                             "model.npz")
    add_checkpoint(parser)
    add_inference(parser)


def add_inference(parser) -> None:
    parser.add_argument("--inference", default="auto", choices=INFERENCES,
                        help="the precision the net plays in on the CPU: auto (int8 where the "
                             "CPU has VNNI, or where int8 measures faster here, if it answers "
                             "as float32 does; else float32), float32, int8 or bf16 "
                             "(default auto; the first line says what was chosen and why)")


def add_checkpoint(parser) -> None:
    parser.add_argument("--checkpoint", type=int, default=None, metavar="K",
                        help="the checkpoint of --run's iteration K (default: the newest "
                             "readable one)")


def add_player(parser, *names: str, dest: str, help: str) -> None:
    parser.add_argument(*names, dest=dest, type=_player_type, default=None, metavar="SPEC",
                        help=f"{help}: {PLAYER_KINDS}")


def add_search(parser, *, no_search: bool = True) -> None:
    parser.add_argument("--sims", type=int, default=None, metavar="S",
                        help="simulations of tree search per net move (default: the net's "
                             "play_simulations, else its simulations)")
    if no_search:
        parser.add_argument("--no-search", action="store_true",
                            help="the net plays its policy's most likely move, without search")
    parser.add_argument("--rollout-lambda", type=float, default=None, metavar="L",
                        help="leaf value (1 - L) * net + L * random playout (default: the "
                             "net's config)")
    parser.add_argument("--lcb-move-choice", type=parse_bool, default=None, metavar="true|false",
                        help="play the move with the best lower confidence bound among the "
                             "well-searched ones instead of the most visited (default: the "
                             "net's config)")
    parser.add_argument("--score-utility", type=float, default=None, metavar="W",
                        help="leaf utility (1 - W) * value + W * (2/pi) atan(score / board "
                             "size), for a net with the score head that reads the komi "
                             "(default: the net's config)")


def add_game(parser) -> None:
    parser.add_argument("--board-size", type=int, default=None, metavar="N",
                        help=f"board size: a net plays only its own (default: the net's, "
                             f"else {DEFAULT_BOARD_SIZE})")
    parser.add_argument("--komi", type=float, default=None, metavar="K",
                        help="komi (default: the net's config, else 7.5)")


def add_seed(parser) -> None:
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def check_shared(args: argparse.Namespace, parser, *, min_sims: int = 1) -> None:
    """Refuse, through parser.error, a shared option out of its range or in conflict."""
    sims = getattr(args, "sims", None)
    if sims is not None and sims < min_sims:
        parser.error(f"--sims must be at least {min_sims}"
                     + (" (--no-search plays without search)" if min_sims else ""))
    lam = getattr(args, "rollout_lambda", None)
    if lam is not None and not 0 <= lam <= 1:
        parser.error("--rollout-lambda must be in 0..1")
    size = getattr(args, "board_size", None)
    if size is not None and not 2 <= size <= 19:
        parser.error(f"--board-size must be in 2..19, got {size}")
    komi = getattr(args, "komi", None)
    if komi is not None and not math.isfinite(komi):
        parser.error(f"--komi must be a finite number, got {komi}")
    checkpoint = getattr(args, "checkpoint", None)
    if checkpoint is not None and checkpoint < 0:
        parser.error("--checkpoint must be an iteration, at least 0")
    player = getattr(args, "player", None)
    if player is not None and player.kind != "model" and any(
            getattr(args, name, None) is not None for name in ("run", "model", "checkpoint")):
        parser.error(f"--player {player} plays without a net: leave out --run, --model and "
                     f"--checkpoint")
    if getattr(args, "model", None) is not None:
        if getattr(args, "run", None) is not None:
            parser.error("name one of --run (a trained run) or --model FILE (a model file)")
        if not str(args.model).endswith(".npz"):
            parser.error(f"--model {args.model}: a model file ends in .npz (export_model.py "
                         f"writes one); a run directory goes with --run")
        if checkpoint is not None:
            parser.error("--checkpoint picks a checkpoint of --run; a model file has one net")
