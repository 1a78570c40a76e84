"""The training step, written once for every Keras backend: SGD with momentum on policy
cross-entropy + value MSE + L2 (+ the auxiliary and reply heads' losses).

    trainer = Trainer(model, batch_size=128, learning_rates=[(0, 0.02), (20000, 0.002)])
    stats = trainer.train_step(planes, policy_targets, value_targets)
    # planes float32 (batch_size, N, N, C), policy_targets float32 (batch_size, N*N+1)
    # (visit distributions, rows summing to 1), value_targets float32 (batch_size,) in [-1, 1]
    # (the game result seen from the side to move in those planes, as the value head predicts)
    # stats: {"loss_policy", "loss_value", "loss_l2", "loss_total", "learning_rate"}: float,
    #        "skipped": bool
    stats = trainer.train_steps(batches)  # many steps, figures read after the last (a pass);
                                          # each batch train_step's arguments, in order
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
steps from s on use b. It is an input of the step (the host reads it off the schedule), so a
new schedule never retraces the step. A step whose loss, gradients or new batch-norm
statistics are not all finite changes nothing but the counters (`step`, `skipped_steps`):
the update, the optimizer's state and the batch-norm moving averages of that step are
dropped, so bad data cannot poison the weights.

Symmetry augmentation is the caller's, on NumPy batches before this step: with
`s = rng.integers(0, 8, B)`, pass `symmetries.transform_planes(planes, s)` and
`symmetries.transform_policy(policy_targets, s)` (value targets are unchanged).

One step for every backend (Keras' own trainers are built the same way): the forward pass and
the losses are one function of the variables' values, written in `keras.ops` with the
model's `stateless_call` (whose new non-trainable values carry batch norm's moving
statistics, and whose losses the L2 terms); the finite check, the update (`sgd_update`:
Keras' SGD written out on values, since Keras' TensorFlow optimizer has no stateless form)
and the figures are shared too (`Trainer.finish`). Only the gradient is the backend's, in a
wrapper each: TensorFlow takes it on a tape inside one `tf.function` that is given the
variables themselves and assigns their new values; JAX takes `jax.value_and_grad` inside one
`jax.jit` of the values, and the new values are written back into the Keras variables after
a call's last step (`train_steps` takes many in one call). The backend is Keras'
(`KERAS_BACKEND`, TensorFlow by default; architectures/quiet_tensorflow.py `load_keras`). The step is compiled at the first step, and
once per process for every trainer of the same net and settings (`step_key`): a compiled
step touches only the variables or values it is given, so a second trainer of that net
runs the first one's (`tracing_count`).

Checkpoints (`state_dict`): `model.NNNN` (the model's weights in its variable order, batch-norm
statistics included), `optimizer.NNNN` (the optimizer's variables in its order, without its
learning rate: that is the schedule's at the step, so the list is the same as before the rate
became an input, and checkpoints of either backend and of earlier versions load alike),
`trainer.step`, `trainer.skipped_steps`: safe as `np.savez` names.

The model is shared, not copied: a `CompiledNet` over the same model sees each update.
"""
from __future__ import annotations

import json
from typing import Iterable, Mapping, Sequence

import numpy as np

from architectures.quiet_tensorflow import load_keras
from architectures.weights_version import weights_changed

keras = load_keras()
ops = keras.ops

STATS = ("loss_policy", "loss_value", "loss_l2", "loss_total", "learning_rate",
         "loss_ownership", "loss_score", "loss_reply")


class Trainer:
    """Owns the optimizer, the step counters and the compiled training step of one model."""

    def __init__(
        self,
        model,
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
        self._step = 0
        self._skipped_steps = 0

        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        # The optimizer holds the state (its variables, in its order, are the checkpoint's
        # `optimizer.NNNN`); the update is `sgd_update`'s, on their values.
        self.optimizer = keras.optimizers.SGD(learning_rate=self.learning_rates[0][1],
                                              momentum=self.momentum, nesterov=self.nesterov)
        self.optimizer.build(model.trainable_variables)
        index_of = {id(variable): index for index, variable in enumerate(self.optimizer.variables)}
        paths = [variable.path.split("/")[-1] for variable in self.optimizer.variables]
        self._rate_index = paths.index("learning_rate")
        self._iterations_index = paths.index("iteration")
        # The momentum of trainable variable i is optimizer variable _momentum_indices[i]
        # (none with momentum 0).
        self._momentum_indices = [index_of[id(m)] for m in self.optimizer.momentums]
        self.backend = keras.backend.backend()
        # Compiled at the first step: a trainer built only to hold weights (a warm start's
        # source, a net read for its weights) never pays for the trace.
        self._compiled = None
        self._shared = None

    @property
    def step(self) -> int:
        """Training steps taken, skipped ones included."""
        return self._step

    @property
    def skipped_steps(self) -> int:
        """Steps dropped because the loss, a gradient or a batch-norm statistic was not finite."""
        return self._skipped_steps

    @property
    def device(self) -> str:
        """Where the step runs, for start-up lines: "TensorFlow on the CPU", "JAX on H100"..."""
        if self.backend == "jax":
            import jax
            device = jax.devices()[0]
            where = "the CPU" if device.platform == "cpu" else device.device_kind
        else:
            from architectures.quiet_tensorflow import load_tensorflow
            gpus = load_tensorflow().config.list_physical_devices("GPU")
            where = "the GPU" if gpus else "the CPU"
        return f"{'JAX' if self.backend == 'jax' else 'TensorFlow'} on {where}"

    @property
    def tracing_count(self) -> int:
        """How often the step this trainer runs was traced (compiled), by it or by an earlier
        trainer of the same net and settings in this process: 0 before its first step, then 1
        for the process's life."""
        return 0 if self._shared is None else self._shared.traces

    def set_learning_rates(self, learning_rates: Sequence[tuple[int, float]]) -> None:
        """Follow another (step, rate) schedule from the next step on (a run's own schedule
        drops the rate as it goes); the steps count as before."""
        self.learning_rates = _check_schedule(learning_rates)

    def continue_from(self, other: "Trainer") -> None:
        """Take `other`'s step counters: a net grown in the loop trains on from where the
        smaller one stopped (the optimizer's momentum starts fresh, as in a warm start)."""
        self._step, self._skipped_steps = other._step, other._skipped_steps

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
        return self.train_steps([(planes, policy_targets, value_targets, ownership, score,
                                  final, reply)])[0]

    def train_steps(self, batches: Iterable[Sequence]) -> list[dict]:
        """One step on each batch in turn, the same steps as as many `train_step` calls, whose
        figures (a list of train_step's dicts) are read only after the last step is given.
        A batch is train_step's arguments in order (those of heads the model lacks may be
        None or left out), and `batches` may draw each one lazily.

        Why not step by step: a step that hands back its figures makes the host wait for the
        device at every step, and on JAX the new weights were also written into the Keras
        variables each time. On a GPU that bound the step at batch 256 to about 130 steps a
        second whatever the net's size. Here the host draws the next batch while the device
        still computes the last step, and on JAX the weights stay the device's arrays from
        step to step, written back once at the end (or when a batch raises: the steps taken
        stay taken)."""
        if self._compiled is None:
            self._shared = _shared_step(self)
            self._compiled = self._shared.bind(self)
        taken: list = []      # each step's figures, as the backend gives them

        def inputs():
            for batch in batches:
                checked = self._batch(*batch)
                yield checked, np.float32(self.learning_rate_at(self._step + len(taken)))

        try:
            self._compiled(inputs(), taken)
        finally:     # the steps given before a batch raised stay taken, and are counted
            results = [self._figures(values) for values in taken]
            self._step += len(taken)
            if taken:
                weights_changed(self.model)
        return results

    def _figures(self, values) -> dict:
        """A step's figures as the backend gave them, as train_step's dict; counts a skipped
        step."""
        values = np.asarray(values, dtype=np.float64)
        applied = bool(values[-1] != 0.0)
        self._skipped_steps += int(not applied)
        stats = {name: float(value) for name, value in zip(STATS, values)}
        if not self.aux_heads:
            del stats["loss_ownership"], stats["loss_score"]
        if not self.reply_head:
            del stats["loss_reply"]
        stats["skipped"] = not applied
        return stats

    def _batch(self, planes, policy_targets, value_targets, ownership=None, score=None,
               final=None, reply=None) -> tuple[np.ndarray, ...]:
        """The step's seven inputs, float32 and checked: planes, policy, value, ownership,
        score, final, reply (zeros for heads the model does not have)."""
        batch, n = self.batch_size, self.board_size
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
        return planes, policy_targets, value_targets, ownership, score, final, reply

    # The step itself: pure, in keras.ops, the same on every backend.

    def losses(self, outputs, batch, l2_terms) -> dict:
        """The loss terms (module docstring) of the model's training-mode `outputs` on
        `batch`, as backend scalars."""
        _, policy_targets, value_targets, ownership, score, final, reply = batch
        zero = ops.zeros((), "float32")
        logits, value = outputs[0], outputs[1]
        loss_policy = -ops.mean(ops.sum(policy_targets * ops.log_softmax(logits, axis=-1),
                                        axis=-1))
        loss_value = ops.mean(ops.square(ops.reshape(value, (-1,)) - value_targets))
        loss_l2 = ops.sum(ops.stack(l2_terms)) if l2_terms else zero
        total = loss_policy + self.value_loss_weight * loss_value + loss_l2
        loss_ownership = loss_score = loss_reply = zero
        if self.aux_heads:
            samples = ops.maximum(ops.sum(final), 1.0)
            labels, scaled = (1.0 + ownership) / 2.0, 2.0 * outputs[2]
            # The cross-entropy of sigmoid(scaled) against labels, in its stable form.
            per_point = (ops.maximum(scaled, 0.0) - scaled * labels
                         + ops.log1p(ops.exp(-ops.abs(scaled))))
            loss_ownership = ops.sum(ops.mean(per_point, axis=(1, 2)) * final) / samples
            loss_score = ops.sum(ops.square(ops.reshape(outputs[3], (-1,)) - score)
                                 * final) / samples
            total = total + (self.ownership_loss_weight * loss_ownership
                             + self.score_loss_weight * loss_score)
        if self.reply_head:
            has_reply = ops.cast(ops.sum(reply, axis=-1) > 0, "float32")
            per_sample = -ops.sum(reply * ops.log_softmax(outputs[4], axis=-1), axis=-1)
            loss_reply = ops.sum(per_sample * has_reply) / ops.maximum(ops.sum(has_reply), 1.0)
            total = total + self.reply_loss_weight * loss_reply
        return {"loss_policy": loss_policy, "loss_value": loss_value, "loss_l2": loss_l2,
                "loss_total": total, "loss_ownership": loss_ownership,
                "loss_score": loss_score, "loss_reply": loss_reply}

    def forward(self, trainable, non_trainable, batch):
        """(loss_total, (loss terms, new non-trainable values)) of the model in training mode
        at the given variable values: a function of values, so every backend can take its
        gradient in `trainable`."""
        outputs, new_statistics, l2_terms = self.model.stateless_call(
            list(trainable), list(non_trainable), batch[0], training=True, return_losses=True)
        terms = self.losses(outputs, batch, l2_terms)
        return terms["loss_total"], (terms, new_statistics)

    def finish(self, values, total, terms, new_statistics, gradients, learning_rate):
        """The step after its gradient, the same on every backend: where the loss, the
        gradients and the new statistics are all finite, the SGD update of the weights and the
        momenta and the new batch-norm statistics; elsewhere the old values. `values` is
        [trainable, non-trainable, optimizer] values; returns (their new values, the stats)."""
        trainable, non_trainable, optimizer = (list(group) for group in values)
        finite = self.all_finite(total, gradients, new_statistics)
        new_optimizer = list(optimizer)
        new_trainable, new_momenta = sgd_update(
            trainable, gradients, [optimizer[index] for index in self._momentum_indices],
            learning_rate, self.momentum, self.nesterov)
        for index, momentum in zip(self._momentum_indices, new_momenta):
            new_optimizer[index] = momentum
        new_optimizer[self._iterations_index] = optimizer[self._iterations_index] + 1
        new_optimizer[self._rate_index] = ops.cast(learning_rate,
                                                   optimizer[self._rate_index].dtype)

        def kept(new, old):
            return [ops.where(finite, fresh, stale) for fresh, stale in zip(new, old)]

        # A list, as `values` comes: JAX's next step takes these back, and a tuple in place of
        # the list is another input structure to it, traced and compiled a second time.
        return ([kept(new_trainable, trainable), kept(new_statistics, non_trainable),
                 kept(new_optimizer, optimizer)],
                self.stats(terms, learning_rate, finite))

    def step_key(self) -> str:
        """What the compiled step depends on besides the variables' values: the backend, the
        net's structure, the batch size, the loss weights and the optimizer's settings.
        Trainers with the same key share one compiled step."""
        structure = self.model.get_config()
        structure.pop("name", None)
        return json.dumps([self.backend, structure, self.batch_size, self.value_loss_weight,
                           self.ownership_loss_weight, self.score_loss_weight,
                           self.reply_loss_weight, self.momentum, self.nesterov],
                          sort_keys=True, default=repr)

    @staticmethod
    def all_finite(total, gradients, new_non_trainable):
        """Whether the step may be applied: its loss, gradients and new batch-norm
        statistics are all finite."""
        return ops.all(ops.stack(
            [ops.all(ops.isfinite(total))]
            + [ops.all(ops.isfinite(value)) for value in gradients]
            + [ops.all(ops.isfinite(value)) for value in new_non_trainable
               if "float" in str(value.dtype)]))

    @staticmethod
    def stats(terms, learning_rate, applied):
        """The step's figures in STATS order, then 1.0 if it was applied, as one vector."""
        return ops.stack([ops.cast(terms[name], "float32") if name in terms
                          else ops.cast(learning_rate, "float32") for name in STATS]
                         + [ops.cast(applied, "float32")])

    def _state(self) -> tuple[list, list, list]:
        """The Keras variables the step reads and writes: trainable, non-trainable,
        optimizer."""
        return (self.model.trainable_variables, self.model.non_trainable_variables,
                self.optimizer.variables)

    def _state_variables(self) -> dict:
        named = {}
        for index, variable in enumerate(self.model.weights):
            named[f"model.{index:04d}"] = variable
        saved = [variable for index, variable in enumerate(self.optimizer.variables)
                 if index != self._rate_index]
        for index, variable in enumerate(saved):
            named[f"optimizer.{index:04d}"] = variable
        return named

    def state_dict(self) -> dict[str, np.ndarray]:
        """The whole training state as NumPy copies (module docstring: the keys)."""
        state = {name: np.array(variable.numpy())
                 for name, variable in self._state_variables().items()}
        state["trainer.step"] = np.array(self._step, np.int64)
        state["trainer.skipped_steps"] = np.array(self._skipped_steps, np.int64)
        return state

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        """Restore a `state_dict()` (e.g. an `np.load`ed .npz) exactly; all or nothing."""
        counters = ("trainer.step", "trainer.skipped_steps")
        _assign_all(self._state_variables(),
                    {name: array for name, array in state.items() if name not in counters},
                    required=[name for name in counters if name not in state])
        self._step = int(np.asarray(state["trainer.step"]))
        self._skipped_steps = int(np.asarray(state["trainer.skipped_steps"]))
        weights_changed(self.model)

    def load_model_weights(self, state: Mapping[str, np.ndarray]) -> None:
        """Restore only the model's weights (`model.NNNN` entries; a model file or a
        checkpoint); the optimizer and the counters stay as they are. All or nothing."""
        _assign_all({name: variable for name, variable in self._state_variables().items()
                     if name.startswith("model.")},
                    {name: array for name, array in state.items() if name.startswith("model.")})
        weights_changed(self.model)


def sgd_update(weights, gradients, momenta, learning_rate, momentum: float, nesterov: bool):
    """Keras' SGD (`keras.optimizers.SGD.update_step`, the same operations in the same order,
    so the same float32 results) as a function of values: (new weights, new momenta).
    m' = momentum * m - rate * g; w' = w + m' (nesterov: w + momentum * m' - rate * g).
    Without momentum (no momenta) w' = w - rate * g. Written out because Keras' TensorFlow
    optimizer has no stateless form, and a stateless step is what lets trainers share it."""
    if not momenta:
        return [w - g * learning_rate for w, g in zip(weights, gradients)], []
    new_momenta = [m * momentum - g * learning_rate for m, g in zip(momenta, gradients)]
    if nesterov:
        new_weights = [w + (m * momentum - g * learning_rate)
                       for w, m, g in zip(weights, new_momenta, gradients)]
    else:
        new_weights = [w + m for w, m in zip(weights, new_momenta)]
    return new_weights, new_momenta


class _SharedStep:
    """One compiled step and how often it was traced. It reads and writes only what it is
    given (variables or their values), never a trainer's own, so every trainer with the same
    `step_key` may run it: `bind(trainer)` gives that trainer's `run(inputs, taken)`, which
    takes a step for each (checked batch, rate) of `inputs` on that trainer's variables and
    appends each step's figures to `taken` as it gives the step (without waiting for them)."""

    def __init__(self, compiled, bind):
        self.compiled = compiled
        self.traces = 0
        self._bind = bind

    def bind(self, trainer: Trainer):
        return self._bind(self.compiled, trainer)


# step_key -> _SharedStep: a process compiles the step once per net and settings (the test
# suite builds hundreds of small trainers; a run's nets come back after a growth's reload).
# Oldest out past the limit.
_SHARED_STEPS: dict[str, _SharedStep] = {}
_SHARED_LIMIT = 16


def _shared_step(trainer: Trainer) -> _SharedStep:
    key = trainer.step_key()
    if key not in _SHARED_STEPS:
        while len(_SHARED_STEPS) >= _SHARED_LIMIT:
            del _SHARED_STEPS[next(iter(_SHARED_STEPS))]
        _SHARED_STEPS[key] = _COMPILERS[trainer.backend](trainer)
    return _SHARED_STEPS[key]


def _compile_tensorflow(first: Trainer) -> _SharedStep:
    """The step as one `tf.function` of the variables themselves (passed as arguments, so a
    trainer with other variables of the same shapes reuses the trace): their values read, the
    forward pass under a tape, `finish`, and the new values assigned. `first`, the trainer
    that compiles it, lends its model's structure and its settings (the key's)."""
    from architectures.quiet_tensorflow import load_tensorflow
    tf = load_tensorflow()

    def step(variables, batch, learning_rate):
        shared.traces += 1
        values = [[variable.read_value() for variable in group] for group in variables]
        with tf.GradientTape() as tape:
            tape.watch(values[0])
            total, (terms, new_statistics) = first.forward(values[0], values[1], batch)
        gradients = tape.gradient(total, values[0])
        new, stats = first.finish(values, total, terms, new_statistics, gradients,
                                  learning_rate)
        for group, fresh_values in zip(variables, new):
            for variable, fresh in zip(group, fresh_values):
                variable.assign(fresh)
        return stats

    def bind(compiled, trainer):
        # The backend's own tf.Variables behind the Keras variables.
        variables = [[variable.value for variable in group] for group in trainer._state()]

        def run(inputs, taken):
            for batch_arrays, rate in inputs:
                batch = tuple(tf.convert_to_tensor(array) for array in batch_arrays)
                taken.append(compiled(variables, batch, tf.convert_to_tensor(rate)))
        return run

    shared = _SharedStep(tf.function(step, autograph=False), bind)
    return shared


def _compile_jax(first: Trainer) -> _SharedStep:
    """The step as one `jax.jit` of the variables' values: `jax.value_and_grad` of the forward
    pass and `finish`; a call's steps pass the values from one to the next as the device's
    arrays, and the last ones are assigned to the trainer's Keras variables after them.
    `first` lends the structure and settings, as for TensorFlow."""
    import jax

    def step(values, batch, learning_rate):
        shared.traces += 1
        (total, (terms, new_statistics)), gradients = jax.value_and_grad(
            lambda trainable: first.forward(trainable, values[1], batch), has_aux=True)(
                list(values[0]))
        return first.finish(values, total, terms, new_statistics, gradients, learning_rate)

    def bind(compiled, trainer):
        variables = trainer._state()

        def run(inputs, taken):
            current = [[variable.value for variable in group] for group in variables]
            try:
                for batch_arrays, rate in inputs:
                    current, stats = compiled(current, tuple(batch_arrays), rate)
                    taken.append(stats)
            finally:
                for group, values in zip(variables, current):
                    for variable, fresh in zip(group, values):
                        variable.assign(fresh)
        return run

    shared = _SharedStep(jax.jit(step), bind)
    return shared


_COMPILERS = {"tensorflow": _compile_tensorflow, "jax": _compile_jax}


def _assign_all(variables: Mapping, state: Mapping[str, np.ndarray],
                required: Sequence[str] = ()) -> None:
    """Assign state[name] to every variable, after checking that names and shapes all match
    (`required`: further names the state lacks, reported with the others)."""
    missing = sorted(set(variables) - set(state)) + list(required)
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
