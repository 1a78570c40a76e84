"""What each iteration of the training loop (bp_tree.py) reports: the start of its
metrics.jsonl line (counters, replay, self-play; docs/ARCHITECTURE.md lists every field), the
same numbers as TensorBoard scalars, the one summary line printed on stdout, and its first
sgf_samples self-play games as SGF files.
"""
from __future__ import annotations

import numpy as np
from colorama import Fore, Style

from games.sgf_records import game_to_sgf, result_text
from training.config import Config
from training.run_directory import RunDirectory, atomic_write_bytes


def iteration_record(iteration: int, counters: dict, batch, replay_size: int,
                     tree_overflows: int, stored=None) -> dict:
    """The record's counters and self-play fields; `stored` is the StoredSelfPlay that
    played `batch` (None for the loop's own self-play)."""
    record = {
        "iteration": iteration,
        "wall_time_s": round(counters["wall_time_s"], 3),
        "train_steps": counters["train_steps"],
        "games": counters["games"],
        "positions": counters["positions"],
        "policy_surprise": (round(float(np.nanmean(batch.surprise)), 4)
                            if np.isfinite(batch.surprise).any() else 0.0),
        "replay_size": replay_size,
        "tree_overflows": tree_overflows,
        # In iterations of training behind the weights this iteration trained from.
        "weights_age_mean": round(float(np.mean(iteration - 1 - batch.weights_version)), 3),
        "weights_age_max": int(np.max(iteration - 1 - batch.weights_version)),
    }
    if stored is not None:
        # Positions played elsewhere: no games of this loop to describe.
        record.update(selfplay_source="stored", stored_positions=stored.taken,
                      stored_remaining=stored.remaining)
    else:
        record.update(selfplay_metrics(batch))
    return record


def selfplay_metrics(batch) -> dict:
    """The metrics of the loop's own self-play batch (stored positions have none of these)."""
    lengths = [len(game.moves) for game in batch.games]
    return {
        "selfplay_positions_per_s": round(batch.positions_played / batch.seconds, 2),
        "nn_evals_per_s": round(batch.nn_evaluations / batch.seconds, 2),
        "selfplay_games": len(batch.games),
        "selfplay_moves": sum(lengths),   # fast searches included
        "mean_game_length": round(float(np.mean(lengths)), 2),
        "black_win_rate_selfplay": round(float(np.mean([g.result > 0 for g in batch.games])), 4),
    }


def summary_line(record: dict) -> str:
    losses = (f"policy {record['loss_policy']:.3f} value {record['loss_value']:.3f}"
              if "loss_policy" in record else "training waits for the replay buffer")
    rate = record.get("win_rate_random")
    if rate is not None:
        colour = Fore.GREEN if rate >= 0.9 else Fore.YELLOW if rate >= 0.6 else Fore.RED
    return (f"{Style.BRIGHT}iter {record['iteration']:4d}{Style.RESET_ALL} "
            f"{record['wall_time_s'] / 60:6.1f} min | {losses} | "
            + (f"{record['selfplay_positions_per_s']:7.0f} pos/s {record['nn_evals_per_s']:7.0f} "
               f"evals/s | games {record['games']:6d} len {record['mean_game_length']:5.1f}"
               if "nn_evals_per_s" in record else
               f"stored self-play, {record['stored_remaining']:,} positions left | "
               f"games {record['games']:6d}")
            + (f" | vs random {colour}{rate:5.1%}{Style.RESET_ALL}" if rate is not None else "")
            + (f" | GNU Go L{record['gnugo_level']} {record['win_rate_gnugo']:5.1%}"
               if "win_rate_gnugo" in record else "")
            + (f" | elo {record['elo']:.0f}" if "elo" in record else ""))


def write_sgf_samples(run: RunDirectory, config: Config, iteration: int, games) -> None:
    for index, game in enumerate(games[:config.sgf_samples]):
        data = game_to_sgf(config.board_size, game.komi, game.moves,
                           result_text(game.result, game.score, game.resigned),
                           black="self-play", white="self-play",
                           comment=f"iteration {iteration}, self-play game {index}",
                           handicap=game.handicap)
        atomic_write_bytes(run.sgf / f"iter_{iteration:06d}_game_{index}.sgf", data)


class TensorBoard:
    """The run's TensorBoard log: each record's numbers as scalars at its train step. It is
    written with TensorFlow's summary writer; where TensorFlow is not installed (a GPU machine
    that trains with JAX) there is none, said once, and metrics.jsonl holds every figure."""

    def __init__(self, run: RunDirectory, log=print):
        from architectures.quiet_tensorflow import load_tensorflow  # once the run is prepared
        try:
            self.tf = tf = load_tensorflow()
        except ImportError:
            log("no TensorBoard log: TensorFlow is not installed (metrics.jsonl has every "
                "figure)")
            self.writer = None
            return
        self.writer = tf.summary.create_file_writer(str(run.tensorboard))

    def write(self, record: dict) -> None:
        if self.writer is None:
            return
        with self.writer.as_default(step=record["train_steps"]):
            for key, value in record.items():
                if isinstance(value, (int, float)) and key != "iteration":
                    self.tf.summary.scalar(key, value)
        self.writer.flush()
