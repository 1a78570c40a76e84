"""Distillation (teacher and student): a student net learns a teacher net's policy, softened
at a temperature T, and its value, over positions from the teacher's own games
(`distill.py`).

    targets = teacher_targets(teacher, planes, temperature)   # training.supervised.Positions
    kl = mean_kl(student, targets)                            # KL(teacher_T || student), nats

Targets: policy = softmax(log p_teacher / T) over all N*N+1 actions (T = 1: the teacher's
policy itself; T > 1 flattens it, so the student also learns how the teacher ranks the moves
it would not play), value = the teacher's value (side to move's view). The student is trained
on these with the ordinary losses (cross-entropy, squared error), so its own policy becomes
the softened one; `move` is the teacher's most likely move and `legal` is all ones, so
`move_accuracy` reads as top-1 agreement with the teacher.
"""
from __future__ import annotations

import time

import numpy as np

from training.supervised import Positions

# Probabilities below this count as this in logarithms: the softmax of a float32 net can
# round to 0, and log(0) would make a KL infinite for a move either net deems impossible.
PROBABILITY_FLOOR = 1e-12


def soften(policy: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(log p / T) row by row, float32."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    logits = np.log(np.maximum(policy.astype(np.float64), PROBABILITY_FLOOR)) / temperature
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    return (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)


def evaluate_in_batches(net, planes: np.ndarray, batch: int = 256):
    policies, values = [], []
    for start in range(0, len(planes), batch):
        policy, value = net(planes[start:start + batch].astype(np.float32))
        policies.append(policy)
        values.append(value)
    return np.concatenate(policies), np.concatenate(values)


def teacher_targets(teacher, planes: np.ndarray, temperature: float) -> Positions:
    policy, value = evaluate_in_batches(teacher, planes)
    soft = soften(policy, temperature)
    return Positions(planes=planes, policy=soft, value=value.astype(np.float32),
                     legal=np.ones(soft.shape, bool), move=soft.argmax(axis=1))


def mean_kl(student, targets: Positions) -> float:
    """Mean over positions of KL(target policy || student policy), in nats."""
    policy, _ = evaluate_in_batches(student, targets.planes)
    p = targets.policy.astype(np.float64)
    q = np.maximum(policy.astype(np.float64), PROBABILITY_FLOOR)
    terms = np.where(p > 0, p * (np.log(np.maximum(p, PROBABILITY_FLOOR)) - np.log(q)), 0.0)
    return float(terms.sum(axis=1).mean())


def positions_per_second(net, planes: np.ndarray, repeats: int = 5) -> float:
    """Positions a net evaluates per second on `planes` (one batch), median of `repeats`
    timed calls after a warm-up call."""
    batch = planes.astype(np.float32)
    net(batch)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        net(batch)
        times.append(time.perf_counter() - started)
    return len(batch) / float(np.median(times))
