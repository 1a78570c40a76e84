"""The training step: SGD with momentum on policy cross-entropy + value MSE + L2.

    trainer = Trainer(model, batch_size=128, learning_rates=[(0, 0.02), (20000, 0.002)])
    stats = trainer.train_step(planes, policy_targets, value_targets)
    # planes float32 (batch_size, N, N, C), policy_targets float32 (batch_size, N*N+1)
    # (visit distributions, rows summing to 1), value_targets float32 (batch_size,) in [-1, 1]
    # (the game result seen from the side to move in those planes, as the value head predicts)
    # stats: {"loss_policy", "loss_value", "loss_l2", "loss_total", "learning_rate"}: float,
    #        "skipped": bool
    state = trainer.state_dict()          # {name: np.ndarray}; np.savez(path, **state)
    trainer.load_state_dict(np.load(path))

Losses (batch means): loss_policy = -sum(target * log_softmax(logits)) (soft targets; it
includes the targets' own entropy, so it does not fall to 0), loss_value = (value - z)^2,
loss_l2 = sum of the model's kernel regularizers (`l2 * sum(kernel ** 2)`, see resnet.py),
loss_total = loss_policy + value_loss_weight * loss_value + loss_l2.

A model with auxiliary heads (build_model(aux_heads=True)) also takes, per sample, the final
ownership int/float (B, N, N) in {-1, 0, +1} from the side to move's view, the final score
margin (B,) from the same view divided by N*N, and `final` (B,) 1.0 where those targets
exist (0.0: a resigned game, whose end position was never played out):
  loss_ownership = mean over samples with final, and points, of the cross-entropy between
                   (1 + target) / 2 and (1 + tanh(y)) / 2 = sigmoid(2y)
  loss_score     = mean over samples with final of (score - target) ** 2
  loss_total    += ownership_loss_weight * loss_ownership + score_loss_weight * loss_score
Symmetry augmentation applies to the ownership target as to the planes.

A model that also has the opponent's reply head (build_model(reply_head=True)) takes `reply`
float32 (B, N*N+1): the search's policy target at the next position of the game (a row of
zeros where there is none: a game's last position):
  loss_reply     = mean over samples with a reply of -sum(reply * log_softmax(reply_logits))
  loss_total    += reply_loss_weight * loss_reply
It is transformed by the sample's symmetry as the policy target is.

The learning rate is piecewise constant in the trainer's step counter, which counts every
call of `train_step`, skipped or not: with pairs [(0, a), (s, b)] steps 0..s-1 use a and
steps from s on use b. A step whose loss, gradients or new batch-norm statistics are not all
finite changes nothing but the counters (`step`, `skipped_steps`): the update and the
batch-norm moving averages of that step are dropped, so bad data cannot poison the weights.

Symmetry augmentation is the caller's, on NumPy batches before this step: with
`s = rng.integers(0, 8, B)`, pass `symmetries.transform_planes(planes, s)` and
`symmetries.transform_policy(policy_targets, s)` (value targets are unchanged).

`train_step` is one `tf.function` with a fixed input signature (traced once, at
construction). The model is shared, not copied: a `CompiledNet` over the same model sees
each update at once.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from architectures.quiet_tensorflow import load_tensorflow

tf = load_tensorflow()
import keras  # noqa: E402  (after TensorFlow's quiet import)

from architectures.inference import weights_changed  # noqa: E402


MAX_RATES = 16    # (step, rate) pairs a schedule may have


class Trainer:
    """Owns the optimizer, the step counters and the compiled training step of one model."""

    def __init__(
        self,
        model: keras.Model,
        batch_size: int,
        learning_rates: Sequence[tuple[int, float]] = ((0, 0.02),),
        momentum: float = 0.9,
        nesterov: bool = False,
        value_loss_weight: float = 1.0,
        ownership_loss_weight: float = 1.5,
        score_loss_weight: float = 1.0,
        reply_loss_weight: float = 0.15,
    ):
        if int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.learning_rates = _check_schedule(learning_rates)
        self.model = model
        self.batch_size = int(batch_size)
        self.board_size, _, self.input_planes = tuple(model.input_shape[1:])
        self.num_actions = self.board_size * self.board_size + 1
        self.value_loss_weight = float(value_loss_weight)
        # build_model's outputs: policy, value [, ownership, score [, reply]].
        self.aux_heads = len(model.outputs) >= 4
        self.reply_head = len(model.outputs) == 5
        self.ownership_loss_weight = float(ownership_loss_weight)
        self.score_loss_weight = float(score_loss_weight)
        self.reply_loss_weight = float(reply_loss_weight)

        self._step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self._skipped_steps = tf.Variable(0, dtype=tf.int64, trainable=False,
                                          name="skipped_steps")
        # The schedule lives in variables of a fixed length (unused boundaries at the largest
        # step), so set_learning_rates changes it without tracing the step again.
        self._boundaries = tf.Variable(tf.zeros(MAX_RATES, tf.int64), trainable=False,
                                       name="rate_boundaries")
        self._rates = tf.Variable(tf.zeros(MAX_RATES, tf.float32), trainable=False,
                                  name="rates")
        self.set_learning_rates(self.learning_rates)

        def current_learning_rate():
            index = tf.reduce_sum(tf.cast(self._boundaries <= self._step, tf.int32)) - 1
            return tf.gather(self._rates, index)

        self._current_learning_rate = current_learning_rate
        self.optimizer = keras.optimizers.SGD(
            learning_rate=current_learning_rate, momentum=momentum, nesterov=nesterov)
        self.optimizer.build(model.trainable_variables)

        batch = self.batch_size
        # autograph=False: the step's branches are tf.cond and Python-static flags, and
        # autograph's source transformation cost about a second of a process's first trainer.
        self._train_step = tf.function(self._train_step_graph, autograph=False, input_signature=[
            tf.TensorSpec((batch, self.board_size, self.board_size, self.input_planes),
                          tf.float32),
            tf.TensorSpec((batch, self.num_actions), tf.float32),
            tf.TensorSpec((batch,), tf.float32),
            tf.TensorSpec((batch, self.board_size, self.board_size), tf.float32),
            tf.TensorSpec((batch,), tf.float32),
            tf.TensorSpec((batch,), tf.float32),
            tf.TensorSpec((batch, self.num_actions), tf.float32),
        ])
        self._train_step.get_concrete_function()

    @property
    def step(self) -> int:
        """Training steps taken, skipped ones included."""
        return int(self._step.numpy())

    @property
    def skipped_steps(self) -> int:
        """Steps dropped because the loss, a gradient or a batch-norm statistic was not finite."""
        return int(self._skipped_steps.numpy())

    @property
    def tracing_count(self) -> int:
        return self._train_step.experimental_get_tracing_count()

    def set_learning_rates(self, learning_rates: Sequence[tuple[int, float]]) -> None:
        """Follow another (step, rate) schedule from the next step on (a run's own schedule
        drops the rate as it goes); the steps count as before."""
        pairs = _check_schedule(learning_rates)
        if len(pairs) > MAX_RATES:
            raise ValueError(f"at most {MAX_RATES} (step, rate) pairs, got {len(pairs)}")
        padding = MAX_RATES - len(pairs)
        self._boundaries.assign([step for step, _ in pairs] + [np.iinfo(np.int64).max] * padding)
        self._rates.assign([rate for _, rate in pairs] + [pairs[-1][1]] * padding)
        self.learning_rates = pairs

    def continue_from(self, other: "Trainer") -> None:
        """Take `other`'s step counters: a net grown in the loop trains on from where the
        smaller one stopped (the optimizer's momentum starts fresh, as in a warm start)."""
        self._step.assign(other._step)
        self._skipped_steps.assign(other._skipped_steps)

    def learning_rate_at(self, step: int) -> float:
        rate = self.learning_rates[0][1]
        for boundary, value in self.learning_rates:
            if boundary <= step:
                rate = value
        return rate

    def train_step(self, planes, policy_targets, value_targets, ownership=None, score=None,
                   final=None, reply=None) -> dict:
        """One SGD step on exactly `batch_size` samples; returns the losses before the step.
        ownership, score, final: the auxiliary targets (see the module docstring), needed
        exactly when the model has the auxiliary heads; reply exactly when it has the reply
        head."""
        batch = self.batch_size
        n = self.board_size
        if self.aux_heads != (ownership is not None):
            raise ValueError("ownership, score and final targets are needed exactly when the "
                             "model has auxiliary heads")
        if self.reply_head != (reply is not None):
            raise ValueError("reply targets are needed exactly when the model has the "
                             "opponent's reply head")
        reply = np.zeros((batch, self.num_actions), np.float32) if reply is None else (
            np.asarray(reply, dtype=np.float32))
        if reply.shape != (batch, self.num_actions):
            raise ValueError(f"reply must have shape {(batch, self.num_actions)}, "
                             f"got {reply.shape}")
        if ownership is None:
            ownership, score, final = (np.zeros((batch, n, n), np.float32),
                                       np.zeros(batch, np.float32), np.zeros(batch, np.float32))
        ownership = np.asarray(ownership, dtype=np.float32)
        score = np.asarray(score, dtype=np.float32).reshape(-1)
        final = np.asarray(final, dtype=np.float32).reshape(-1)
        if ownership.shape != (batch, n, n) or score.shape != (batch,) or final.shape != (batch,):
            raise ValueError(f"ownership must be ({batch}, {n}, {n}), score and final ({batch},); "
                             f"got {ownership.shape}, {score.shape}, {final.shape}")
        planes = np.asarray(planes, dtype=np.float32)
        policy_targets = np.asarray(policy_targets, dtype=np.float32)
        value_targets = np.asarray(value_targets, dtype=np.float32).reshape(-1)
        expected = (batch, self.board_size, self.board_size, self.input_planes)
        if planes.shape != expected:
            raise ValueError(f"planes must have shape {expected}, got {planes.shape}")
        if policy_targets.shape != (batch, self.num_actions):
            raise ValueError(f"policy_targets must have shape {(batch, self.num_actions)}, "
                             f"got {policy_targets.shape}")
        if value_targets.shape != (batch,):
            raise ValueError(f"value_targets must have {batch} entries, "
                             f"got {value_targets.shape}")
        values = self._train_step(planes, policy_targets, value_targets, ownership, score,
                                  final, reply).numpy()
        weights_changed(self.model)
        names = ("loss_policy", "loss_value", "loss_l2", "loss_total", "learning_rate",
                 "loss_ownership", "loss_score", "loss_reply")
        stats = {name: float(value) for name, value in zip(names, values)}
        if not self.aux_heads:
            del stats["loss_ownership"], stats["loss_score"]
        if not self.reply_head:
            del stats["loss_reply"]
        stats["skipped"] = bool(values[-1] == 0.0)
        return stats

    def _train_step_graph(self, planes, policy_targets, value_targets, ownership_targets,
                          score_targets, final, reply_targets):
        model = self.model
        trainable = model.trainable_variables
        statistics = model.non_trainable_variables
        # Batch norm updates its moving averages during the forward pass; keep the old values
        # so a step with non-finite numbers can be undone. (Reads and writes of one variable
        # run in program order inside a tf.function.)
        saved_statistics = [tf.identity(variable.value) for variable in statistics]
        learning_rate = self._current_learning_rate()
        with tf.GradientTape() as tape:
            outputs = model(planes, training=True)
            logits, value = outputs[0], outputs[1]
            log_policy = tf.nn.log_softmax(logits, axis=-1)
            loss_policy = -tf.reduce_mean(tf.reduce_sum(policy_targets * log_policy, axis=-1))
            loss_value = tf.reduce_mean(tf.square(tf.reshape(value, [-1]) - value_targets))
            regularization = model.losses
            loss_l2 = tf.add_n(regularization) if regularization else tf.constant(0.0)
            loss_total = loss_policy + self.value_loss_weight * loss_value + loss_l2
            loss_ownership = loss_score = tf.constant(0.0)
            if self.aux_heads:
                samples = tf.maximum(tf.reduce_sum(final), 1.0)
                per_point = tf.nn.sigmoid_cross_entropy_with_logits(
                    labels=(1.0 + ownership_targets) / 2.0, logits=2.0 * outputs[2])
                loss_ownership = tf.reduce_sum(
                    tf.reduce_mean(per_point, axis=[1, 2]) * final) / samples
                loss_score = tf.reduce_sum(
                    tf.square(tf.reshape(outputs[3], [-1]) - score_targets) * final) / samples
                loss_total += (self.ownership_loss_weight * loss_ownership
                               + self.score_loss_weight * loss_score)
            loss_reply = tf.constant(0.0)
            if self.reply_head:
                has_reply = tf.cast(tf.reduce_sum(reply_targets, axis=-1) > 0, tf.float32)
                per_sample = -tf.reduce_sum(
                    reply_targets * tf.nn.log_softmax(outputs[4], axis=-1), axis=-1)
                loss_reply = (tf.reduce_sum(per_sample * has_reply)
                              / tf.maximum(tf.reduce_sum(has_reply), 1.0))
                loss_total += self.reply_loss_weight * loss_reply
        gradients = tape.gradient(loss_total, trainable)
        checks = [tf.math.is_finite(loss_total)]
        checks += [tf.reduce_all(tf.math.is_finite(g)) for g in gradients]
        checks += [tf.reduce_all(tf.math.is_finite(v.value)) for v in statistics]
        finite = tf.reduce_all(tf.stack(checks))

        def apply():
            self.optimizer.apply(gradients, trainable)
            return tf.constant(1.0)

        def undo():
            for variable, saved in zip(statistics, saved_statistics):
                variable.assign(saved)
            self._skipped_steps.assign_add(1)
            return tf.constant(0.0)

        applied = tf.cond(finite, apply, undo)
        self._step.assign_add(1)
        return tf.stack([loss_policy, loss_value, loss_l2, loss_total, learning_rate,
                         loss_ownership, loss_score, loss_reply, applied])

    def _state_variables(self) -> dict[str, tf.Variable]:
        named = {}
        for index, variable in enumerate(self.model.weights):
            named[f"model.{index:04d}"] = variable
        for index, variable in enumerate(self.optimizer.variables):
            named[f"optimizer.{index:04d}"] = variable
        named["trainer.step"] = self._step
        named["trainer.skipped_steps"] = self._skipped_steps
        return named

    def state_dict(self) -> dict[str, np.ndarray]:
        """The whole training state as NumPy copies: model weights (batch-norm statistics
        included), optimizer variables (momentum, iteration count) and the step counters.

        Keys are `model.NNNN`, `optimizer.NNNN` (in the model's and the optimizer's variable
        order), `trainer.step`, `trainer.skipped_steps`: safe as `np.savez` names.
        """
        return {name: np.array(variable.numpy())
                for name, variable in self._state_variables().items()}

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        """Restore a `state_dict()` (e.g. an `np.load`ed .npz) exactly; all or nothing."""
        _assign_all(self._state_variables(), state)
        weights_changed(self.model)

    def load_model_weights(self, state: Mapping[str, np.ndarray]) -> None:
        """Restore only the model's weights (`model.NNNN` entries; a model file or a
        checkpoint); the optimizer and the counters stay as they are. All or nothing."""
        _assign_all({name: variable for name, variable in self._state_variables().items()
                     if name.startswith("model.")},
                    {name: array for name, array in state.items() if name.startswith("model.")})
        weights_changed(self.model)


def _assign_all(variables: Mapping[str, tf.Variable], state: Mapping[str, np.ndarray]) -> None:
    """Assign state[name] to every variable, after checking that names and shapes all match."""
    missing = sorted(set(variables) - set(state))
    unexpected = sorted(set(state) - set(variables))
    if missing or unexpected:
        raise ValueError(
            "training state does not match this net and optimizer "
            f"(missing {missing[:4]}{'...' if len(missing) > 4 else ''}, "
            f"unexpected {unexpected[:4]}{'...' if len(unexpected) > 4 else ''})")
    arrays = {}
    for name, variable in variables.items():
        array = np.asarray(state[name])
        if tuple(array.shape) != tuple(variable.shape):
            label = getattr(variable, "path", name)
            raise ValueError(f"training state entry {name} ({label}) has shape "
                             f"{array.shape}, this net needs {tuple(variable.shape)}: "
                             "was it saved with another board size or net shape?")
        arrays[name] = array
    for name, variable in variables.items():
        variable.assign(arrays[name])


def _check_schedule(learning_rates) -> tuple[tuple[int, float], ...]:
    pairs = tuple((int(step), float(rate)) for step, rate in learning_rates)
    if not pairs or pairs[0][0] != 0:
        raise ValueError("learning_rates must be (step, rate) pairs starting at step 0")
    steps = [step for step, _ in pairs]
    if any(later <= earlier for earlier, later in zip(steps, steps[1:])):
        raise ValueError(f"learning-rate steps must increase strictly, got {steps}")
    if any(not rate > 0 for _, rate in pairs):
        raise ValueError("learning rates must be positive")
    return pairs
