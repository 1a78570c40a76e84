"""What plays: the one loader behind every entry script that plays Go (gtp_engine.py,
play_network_gui.py, evaluate.py, the KaTrain analysis engine), with its refusals.

A player is a net or a net-free player:
- a net: a run's checkpoint (`--run NAME [--checkpoint K]`, or `ckpt:latest` / `ckpt:K` in a
  match) or a model file (`--model FILE`, `model:FILE`); `NetSource` names it, and with none
  named the shipped model, models/9x9.npz, plays;
- `mcts:S` (pure Monte Carlo tree search, games.search.pure_mcts), `gnugo:L`, `random`
  (training.options.parse_player reads them all).

The game's config comes from the net (`game_config`): its board size, rules and search,
with the command line's --komi and --rollout-lambda on top. A net plays only its own board
size, so a --board-size naming another is refused; without a net the board is --board-size,
else 9. Every refusal is a `SetupError` with one line for the user.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from games.match_players import NetEntry
from training.config import Config
from training.nets import (SHIPPED_MODEL, NetOpenError, OpenedNet, net_of_weights, open_net,
                            read_net_config)
from training.options import DEFAULT_BOARD_SIZE, PlayerSpec
from training.run_directory import RunDirectory
from training.weight_averaging import average_checkpoints


class SetupError(Exception):
    """What keeps a player from playing, in one line for the user."""


@dataclass(frozen=True)
class NetSource:
    """A net to load: a run directory (with a checkpoint iteration, None for its newest) or a
    model file."""
    path: str | os.PathLike
    checkpoint: int | None = None
    inference: str = "float32"       # Config.inference: the precision it plays in


def net_source(args: argparse.Namespace) -> NetSource | None:
    """The net that --run, --model and --checkpoint name (training.options.check_shared has
    refused conflicts); the shipped model when none is named; None when `args.player` names a
    net-free player."""
    player: PlayerSpec | None = getattr(args, "player", None)
    run, model = getattr(args, "run", None), getattr(args, "model", None)
    checkpoint = getattr(args, "checkpoint", None)
    inference = getattr(args, "inference", "float32")
    if player is not None:     # check_shared refused it beside --run, --model, --checkpoint
        return NetSource(player.value, inference=inference) if player.kind == "model" else None
    if run is not None:
        return NetSource(run, checkpoint, inference)
    if model is not None:
        return NetSource(model, inference=inference)
    if checkpoint is not None:
        raise SetupError("--checkpoint picks a checkpoint of --run: name the run")
    if not SHIPPED_MODEL.is_file():
        raise SetupError(f"no --run or --model given, and the shipped model {SHIPPED_MODEL} is "
                         f"missing (restore it with git, or name a run)")
    return NetSource(SHIPPED_MODEL, inference=inference)


def read_source(source: NetSource) -> tuple[Config, Path]:
    """(the config the net plays with, its run directory or model file), without TensorFlow:
    for a run, that of the checkpoint that will be opened (training.nets.read_net_config)."""
    try:
        return read_net_config(source.path, source.checkpoint)
    except NetOpenError as error:
        raise SetupError(str(error)) from None


def open_source(source: NetSource, *, batch_size: int, log=print) -> OpenedNet:
    try:
        return open_net(source.path, checkpoint=source.checkpoint, batch_size=batch_size,
                        inference=source.inference, log=log)
    except NetOpenError as error:
        raise SetupError(str(error)) from None


def game_config(args: argparse.Namespace, net_config: Config | None) -> Config:
    """The game's config: the net's, or without a net one of --board-size (else 9); then
    --komi, --rollout-lambda, --lcb-move-choice and --score-utility where given. The rules run
    on the CPU: one game's board is read on the host after every move."""
    size = getattr(args, "board_size", None)
    try:
        if net_config is None:
            config = Config(board_size=size or DEFAULT_BOARD_SIZE, backend="cpu").validate()
        else:
            if size is not None and size != net_config.board_size:
                n = net_config.board_size
                raise SetupError(f"--board-size {size}: this net was trained on {n}x{n} and "
                                 f"plays only that size (leave out --board-size, or pick a net "
                                 f"trained on {size}x{size})")
            config = net_config.overridden(backend="cpu")
        changes = {name: getattr(args, name) for name in
                   ("komi", "rollout_lambda", "lcb_move_choice", "score_utility")
                   if getattr(args, name, None) is not None}
        return config.overridden(**changes) if changes else config
    except ValueError as error:
        raise SetupError(str(error)) from None


def play_simulations(args: argparse.Namespace, config: Config) -> int:
    """--sims, else the net's play_simulations, else its self-play simulations."""
    return getattr(args, "sims", None) or config.resolved_play_simulations


def describe(source: NetSource, opened: OpenedNet | None = None) -> str:
    """"PATH" or "PATH iteration K": which net plays."""
    path = opened.path if opened is not None else source.path
    iteration = opened.iteration if opened is not None else source.checkpoint
    return f"{path}" if iteration is None else f"{path} iteration {iteration}"


class Checkpoints:
    """Nets of one run's checkpoints for matches, each opened once."""

    def __init__(self, run_path: Path, batch_size: int, log=print, inference: str = "float32"):
        self.run = RunDirectory(run_path, log=log)
        self.inference = inference
        self.batch_size = batch_size
        self.log = log
        self.loaded: dict[int, object] = {}

    def iteration(self, which: str) -> int:
        iterations = self.run.checkpoint_iterations()
        if not iterations:
            raise SetupError(f"{self.run.path} has no checkpoint")
        return iterations[-1] if which == "latest" else int(which)

    def net(self, iteration: int) -> NetEntry:
        """The checkpoint's net with the config it plays under (its own input planes: a run
        may have grown them); SetupError if it is gone (the loop keeps only the last few)."""
        if iteration not in self.loaded:
            opened = open_source(NetSource(self.run.path, iteration, self.inference),
                                 batch_size=self.batch_size, log=self.log)
            self.loaded[iteration] = NetEntry(opened.net, opened.config)
        return self.loaded[iteration]

    def mean(self, iteration: int, count: int) -> tuple[NetEntry, tuple[int, ...]]:
        """The net of the mean of the weights of the `count` checkpoints up to `iteration`, or
        of as many as the run has in a row there (training/weight_averaging.py: the model
        export_model.py --average-last would write), and the iterations averaged; SetupError
        if `iteration` cannot be opened."""
        try:
            averaged = average_checkpoints(self.run.path, count, checkpoint=iteration,
                                           fewer=True, log=self.log)
            net = net_of_weights(averaged.config, averaged.weights, averaged.label,
                                 batch_size=self.batch_size, inference=self.inference,
                                 log=self.log)
        except NetOpenError as error:
            raise SetupError(str(error)) from None
        return NetEntry(net, averaged.config), averaged.iterations


def match_entry(spec: PlayerSpec, config: Config, checkpoints: Checkpoints | None,
                batch_size: int, log=print, inference: str = "float32") -> tuple[object, str]:
    """(games.match_players.make_player entry, display name) of a match's player."""
    if spec.kind == "ckpt":
        if checkpoints is None:
            raise SetupError(f"{spec} needs --run")
        iteration = checkpoints.iteration(spec.value)
        return checkpoints.net(iteration), f"ckpt:{iteration}"
    if spec.kind == "model":
        opened = open_source(NetSource(spec.value, inference=inference), batch_size=batch_size,
                             log=log)
        if opened.config.board_size != config.board_size:
            raise SetupError(f"{spec} is a {opened.config.board_size}x"
                             f"{opened.config.board_size} model; the game is "
                             f"{config.board_size}x{config.board_size}")
        return NetEntry(opened.net, opened.config), f"model:{Path(spec.value).name}"
    return str(spec), str(spec)
