"""The residual policy-value net (AlphaGo Zero shape, sizes from the run's config).

Input: NHWC float32 planes (B, N, N, C) exactly as `GoBatch.features()` builds them.
Outputs, in this order:
  policy_logits  float32 (B, N*N+1)  unnormalised; column N*N is pass
  value          float32 (B, 1)      tanh, the expected result for the side to move
and with `aux_heads` (KataGo's auxiliary targets, trained only; play reads policy and value):
  ownership      float32 (B, N, N)   logits y: tanh(y) is the expected final owner of each
                                     point, +1 the side to move, -1 the opponent
  score          float32 (B, 1)      the final area margin for the side to move (komi
                                     included) divided by N*N, linear, from the value head's
                                     hidden layer
and with `reply_head` (KataGo's opponent policy; trained only, needs `aux_heads`):
  reply_logits   float32 (B, N*N+1)  unnormalised: the search's policy target at the next
                                     position, the opponent's reply (pass last)

With `global_pooling` the trunk ends in a global pooling bias (after KataGo's): the mean and
the max of each channel over the board go through a dense layer to one bias per channel,
added to every point before a ReLU, so each point's features see the whole board (a
convolution stack of this depth sees at most 2 * blocks + 1 points away).

Convolutions carry no bias (the batch norm after each one has the offset). L2 weight decay is
attached as Keras `kernel_regularizer`s on every convolution and dense kernel (not on biases or
batch-norm parameters), so the coefficient travels with the model and `model.losses` sums to
`l2 * sum(kernel ** 2)`; the training step adds that sum to the loss.

The model is backend-neutral Keras (TensorFlow by default, JAX when KERAS_BACKEND says so);
TensorFlow's folded inference pass over it is architectures/inference.py `inference_forward`,
which relies on the layer names `build_model` gives (tests/test_net.py checks it).
"""
from __future__ import annotations

import random

import numpy as np

from architectures.quiet_tensorflow import load_keras

keras = load_keras()
layers = keras.layers


def seed_initial_weights(seed: int) -> None:
    """Make the initial weights of the models built next follow `seed`, on every backend:
    Keras draws each initializer's seed from Python's `random` when the layer is made
    (`keras.random.make_default_seed`), so seeding it fixes them; NumPy's is seeded too, as
    Keras' `set_random_seed` does. Not `keras.utils.set_random_seed` itself: its
    `tf.random.set_seed` empties TensorFlow's cache of instantiated functions, so every
    compiled step and net of the process is optimized again (0.3-0.4 s each on a tiny net),
    and under JAX it imports the whole of TensorFlow only to seed it."""
    random.seed(seed)
    np.random.seed(seed)


def build_model(
    board_size: int,
    input_planes: int,
    blocks: int,
    filters: int,
    l2: float = 1e-4,
    value_hidden: int = 64,
    aux_heads: bool = False,
    global_pooling: bool = False,
    reply_head: bool = False,
) -> keras.Model:
    """A functional Keras model: stem, `blocks` residual blocks, policy and value heads (and
    with `aux_heads` the ownership and score heads, with `reply_head` the opponent's reply)."""
    for name, value, low in (
        ("board_size", board_size, 2),
        ("input_planes", input_planes, 1),
        ("blocks", blocks, 0),
        ("filters", filters, 1),
        ("value_hidden", value_hidden, 1),
    ):
        if int(value) != value or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if reply_head and not aux_heads:
        raise ValueError("reply_head needs aux_heads (its output follows theirs)")
    if not l2 >= 0.0:
        raise ValueError(f"l2 must be >= 0, got {l2!r}")
    regularizer = keras.regularizers.L2(l2) if l2 > 0 else None

    def conv(x, width, kernel_size, name):
        return layers.Conv2D(
            width, kernel_size, padding="same", use_bias=False,
            kernel_regularizer=regularizer, name=name,
        )(x)

    def batch_norm(x, name):
        return layers.BatchNormalization(name=name)(x)

    planes = keras.Input((board_size, board_size, input_planes), name="planes")
    x = conv(planes, filters, 3, STEM_CONV)
    x = layers.ReLU(name="stem_relu")(batch_norm(x, "stem_bn"))
    for block in range(blocks):
        prefix = f"block{block}"
        conv1, bn1, conv2, bn2 = block_layers(block)
        y = conv(x, filters, 3, conv1)
        y = layers.ReLU(name=f"{prefix}_relu1")(batch_norm(y, bn1))
        y = conv(y, filters, 3, conv2)
        y = batch_norm(y, bn2)
        x = layers.ReLU(name=f"{prefix}_relu2")(layers.Add(name=f"{prefix}_add")([x, y]))
    if global_pooling:
        pooled = layers.Concatenate(name="gpool_concat")([
            layers.GlobalAveragePooling2D(name="gpool_mean")(x),
            layers.GlobalMaxPooling2D(name="gpool_max")(x)])
        bias = layers.Dense(filters, kernel_regularizer=regularizer, name="gpool_dense")(pooled)
        bias = layers.Reshape((1, 1, filters), name="gpool_reshape")(bias)
        x = layers.ReLU(name="gpool_relu")(layers.Add(name="gpool_add")([x, bias]))

    p = conv(x, 2, 1, "policy_conv")
    p = layers.ReLU(name="policy_relu")(batch_norm(p, "policy_bn"))
    p = layers.Flatten(name="policy_flatten")(p)
    policy_logits = layers.Dense(
        board_size * board_size + 1, kernel_regularizer=regularizer, name="policy_logits",
    )(p)

    v = conv(x, 1, 1, "value_conv")
    v = layers.ReLU(name="value_relu")(batch_norm(v, "value_bn"))
    v = layers.Flatten(name="value_flatten")(v)
    v = layers.Dense(value_hidden, activation="relu", kernel_regularizer=regularizer,
                     name="value_hidden")(v)
    value = layers.Dense(1, activation="tanh", kernel_regularizer=regularizer, name="value")(v)
    outputs = [policy_logits, value]
    if aux_heads:
        o = layers.Conv2D(1, 1, padding="same", kernel_regularizer=regularizer,
                          name="ownership_conv")(x)
        outputs.append(layers.Reshape((board_size, board_size), name="ownership")(o))
        outputs.append(layers.Dense(1, kernel_regularizer=regularizer, name="score")(v))
    if reply_head:
        r = conv(x, 2, 1, "reply_conv")
        r = layers.ReLU(name="reply_relu")(batch_norm(r, "reply_bn"))
        r = layers.Flatten(name="reply_flatten")(r)
        outputs.append(layers.Dense(
            board_size * board_size + 1, kernel_regularizer=regularizer, name="reply_logits",
        )(r))

    return keras.Model(planes, outputs,
                       name=f"resnet_{board_size}x{board_size}_{blocks}x{filters}")


def is_built_by_build_model(model: keras.Model) -> bool:
    """Whether `inference_forward` understands this model (the layer names it reads exist)."""
    names = {item.name for item in model.layers}
    required = {STEM_CONV, "stem_bn", "policy_conv", "policy_bn", "policy_logits",
                "value_conv", "value_bn", "value_hidden", "value"}
    return required <= names


# The layers with weights that `aux_heads` adds (build_model): a warm start may add them to a
# net trained without (training/nets.py init_weights).
AUX_HEAD_LAYERS = ("ownership_conv", "score")
# The same for `reply_head`.
REPLY_HEAD_LAYERS = ("reply_conv", "reply_bn", "reply_logits")

# The first convolution, the only layer that sees the input planes: a warm start may give it
# the extra planes a source net was trained without (training/nets.py init_weights).
STEM_CONV = "stem_conv"


def block_layers(block: int) -> tuple[str, ...]:
    """The names of the layers with weights in residual block `block`, (conv1, bn1, conv2,
    bn2): build_model names them so, the folded graphs (here and onnx_export.py) find them so,
    and a warm start may add blocks after the source's last one (training/nets.py
    init_weights)."""
    return tuple(f"block{block}_{part}" for part in ("conv1", "bn1", "conv2", "bn2"))


def make_block_identity(model: keras.Model, block: int) -> None:
    """Make residual block `block` of a build_model net compute the identity: its last batch
    norm's scale and offset go to zero, so the block adds 0 to its input x, and
    ReLU(x + 0) = x because x is the output of a ReLU. Every other weight of the block keeps
    its random initialisation, so training grows the block from there (the scale's gradient
    is not zero) as in the zero-initialised residual branches of Goyal et al. (2017)."""
    batch_norm = model.get_layer(block_layers(block)[3])
    # zeros of the variable's shape, not zeros_like(variable): JAX's backend cannot convert a
    # Keras variable to an array there.
    for variable in (batch_norm.gamma, batch_norm.beta):
        variable.assign(keras.ops.zeros(variable.shape, variable.dtype))


def has_aux_heads(model: keras.Model) -> bool:
    """Whether a `build_model` net has the ownership and score heads (`aux_heads=True`)."""
    names = {item.name for item in model.layers}
    return set(AUX_HEAD_LAYERS) <= names


def has_reply_head(model: keras.Model) -> bool:
    """Whether a `build_model` net has the opponent's reply head (`reply_head=True`)."""
    names = {item.name for item in model.layers}
    return set(REPLY_HEAD_LAYERS) <= names
