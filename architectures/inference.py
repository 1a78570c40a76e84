"""Batched inference: TensorFlow `tf.function`s of fixed batch shape, or ONNX Runtime.

`CompiledNet(model, batch_size)` traces the model's inference pass (training=False) once, at
construction, for the input signature float32 (batch_size, N, N, C). Calls with fewer rows
are padded into a preallocated buffer and calls with more rows run in chunks, so the graph
never retraces whatever the caller's batch. The function reads the model's variables, so it
sees every weight update (training, `Trainer.load_state_dict`) with no rebuild. By default it
runs `inference_forward` (below: batch norm folded into the convolutions, 4-28% faster);
`fold_batch_norm=False` calls the Keras model instead and accepts any model with the same
two outputs.

    net = CompiledNet(model, batch_size=128)
    policy, value = net(planes)       # planes: float32 NumPy (k, N, N, C), any k >= 0
    # policy  float32 (k, N*N+1): softmax over ALL moves (no legal mask), pass last
    # value   float32 (k,):       tanh output in [-1, 1], for the side to move
    priors = mask_policy(policy, legal)   # legal: bool (k, N*N+1) -> renormalised over legal

Analysis reads the auxiliary heads of a net trained with them (`resnet.build_model(...,
aux_heads=True)`), off the search's path, through functions of their own:

    net.has_aux_heads                       # False: ownership() raises ValueError
    ownership, score = net.ownership(planes)
    # ownership float32 (k, N, N): tanh of the ownership logits in [-1, 1], +1 the side to move
    # score     float32 (k,):      the expected final area margin for the side to move, komi
    #                              included, in points (the score head times N*N)
    policy, value, score = net.with_score(planes)   # one pass, for a search that reads the score

Planes that live on a GPU (a CuPy array from the CUDA rules back end, or any array whose
`__dlpack_device__` is not the CPU) reach TensorFlow through DLPack without a host copy, are
padded on the device, and come back as `DeviceTensor`s, DLPack producers on the same device
that the caller's array library imports (`cupy.from_dlpack`): nothing crosses to the host.

Never call the Keras model itself in a hot path: an eager Keras call costs 14-46 ms here,
a compiled call 0.3-1 ms plus the arithmetic (this wrapper adds under 0.1 ms).

Back ends (`backend=`): "tensorflow" runs the `tf.function`s above; "onnxruntime" runs the
same net exported by `onnx_export.onnx_model` (the model's own weights, batch norms folded by
ONNX Runtime's optimiser) in an ONNX Runtime session, any batch size without padding.
TensorFlow stays the trainer either way. An ONNX Runtime session holds a copy of the
weights: it is rebuilt on the next call after `Trainer.train_step` or
`Trainer.load_state_dict` changed them (they call `weights_changed(model)`); code that
assigns the model's variables some other way calls `weights_changed(model)` or
`net.refresh()` itself. `DEFAULT_BACKEND` is the faster one on the CPUs measured
(benchmarks/bench_net.py, figures in benchmarks/README.md).
"""
from __future__ import annotations

import numpy as np

from architectures.onnx_net import DEVICE as ONNX_DEVICE
from architectures.onnx_net import OnnxNet
from architectures.quiet_tensorflow import load_tensorflow
from architectures.resnet import (STEM_CONV, block_layers, has_aux_heads,
                                  is_built_by_build_model)

tf = load_tensorflow()

BACKENDS = ("tensorflow", "onnxruntime")
# ONNX Runtime ran every preset net faster than TensorFlow on the 2-core development machine:
# 1.0-1.9x at batch 128, 1.8-4x at 64, 6-8x at 16 (benchmarks/README.md); TensorFlow is the
# fallback when the onnxruntime package is missing.
DEFAULT_BACKEND = "onnxruntime"


def inference_forward(model, planes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """`model(planes, training=False)` for a `build_model` net, batch norms folded.

    Returns (policy_logits (B, N*N+1), value (B, 1)). For use inside a `tf.function`. Each
    batch norm is folded into the convolution before it (scaled kernel plus a bias,
    recomputed from the current variables on every call, so it always matches the weights);
    oneDNN then runs each convolution, bias, residual add and ReLU as one fused op (the Keras
    graph fuses none of its convolutions): 4-28% faster at batch 128 on these CPUs, the most
    for narrow nets, with the same outputs to float32 rounding.
    """
    layer = {item.name: item for item in model.layers}

    def conv_bn(x, conv_name, bn_name, residual=None):
        conv, batch_norm = layer[conv_name], layer[bn_name]
        scale = batch_norm.gamma * tf.math.rsqrt(batch_norm.moving_variance + batch_norm.epsilon)
        y = tf.nn.conv2d(x, conv.kernel * scale, strides=1, padding="SAME")
        y = tf.nn.bias_add(y, batch_norm.beta - batch_norm.moving_mean * scale)
        if residual is not None:
            y = y + residual
        return tf.nn.relu(y)

    def dense(x, name):
        return tf.nn.bias_add(tf.matmul(x, layer[name].kernel), layer[name].bias)

    batch = tf.shape(planes)[0]
    x = conv_bn(planes, STEM_CONV, "stem_bn")
    block = 0
    while block_layers(block)[0] in layer:
        conv1, bn1, conv2, bn2 = block_layers(block)
        x = conv_bn(conv_bn(x, conv1, bn1), conv2, bn2, residual=x)
        block += 1
    if "gpool_dense" in layer:
        pooled = tf.concat([tf.reduce_mean(x, axis=[1, 2]), tf.reduce_max(x, axis=[1, 2])], -1)
        x = tf.nn.relu(x + dense(pooled, "gpool_dense")[:, None, None, :])
    policy = tf.reshape(conv_bn(x, "policy_conv", "policy_bn"), [batch, -1])
    value = tf.reshape(conv_bn(x, "value_conv", "value_bn"), [batch, -1])
    value = tf.tanh(dense(tf.nn.relu(dense(value, "value_hidden")), "value"))
    return dense(policy, "policy_logits"), value


def onnxruntime_available() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True
DLPACK_CPU = 1  # kDLCPU in DLPack's device enumeration


def on_accelerator(array) -> bool:
    """True for an array held on a device other than the host (a CuPy array, say)."""
    return (not isinstance(array, np.ndarray) and hasattr(array, "__dlpack_device__")
            and array.__dlpack_device__()[0] != DLPACK_CPU)


def default_backend(fold_batch_norm: bool = True) -> str:
    """The back end a CompiledNet gets unless told: TensorFlow where it has a GPU (planes from
    the CUDA rules then never leave the device), for the Keras path (fold_batch_norm=False)
    and without the onnxruntime package; ONNX Runtime on the CPU otherwise."""
    if (not fold_batch_norm or not onnxruntime_available()
            or tf.config.list_physical_devices("GPU")):
        return "tensorflow"
    return DEFAULT_BACKEND


def net_device() -> str:
    """Where a CompiledNet of the default back end runs the net."""
    if default_backend() == "onnxruntime":
        return ONNX_DEVICE
    return tensorflow_device()


def tensorflow_device() -> str:
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return "TensorFlow on the CPU"
    details = tf.config.experimental.get_device_details(gpus[0])
    return f"TensorFlow on {details.get('device_name', gpus[0].name)}"


class DeviceTensor:
    """A TensorFlow result offered to another array library through DLPack.

    TensorFlow runs its GPU work on its own streams, which another library's stream does not
    wait for; the tensor is therefore complete (`sync_devices`) before it is handed over, and
    the consumer's stream argument is moot. TensorFlow's own `__dlpack__` refuses any stream
    argument, which is why consumers cannot take the tensor directly."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return tf.experimental.dlpack.to_dlpack(self.tensor)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()

    def __len__(self) -> int:
        return int(self.tensor.shape[0])


class CompiledNet:
    """A Keras policy-value model behind `tf.function`s of fixed input shapes.

    `shapes` compiled batch sizes, evenly spaced up to `batch_size` (1: one function of
    batch_size rows). A call pads its rows up to the smallest compiled shape that holds them,
    so a search step whose batch came up short (some selections ended on finished games)
    does not pay for a full batch: self-play's steps averaged 99 of 128 rows."""

    def __init__(self, model, batch_size: int, fold_batch_norm: bool = True, shapes: int = 1,
                 backend: str | None = None):
        if int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if int(shapes) != shapes or not 1 <= shapes <= batch_size:
            raise ValueError(f"shapes must be an integer in 1..batch_size, got {shapes!r}")
        shape = tuple(model.input_shape[1:])
        if len(shape) != 3 or shape[0] != shape[1] or None in shape:
            raise ValueError(f"model input must be (N, N, C) planes, got {shape}")
        if fold_batch_norm and not is_built_by_build_model(model):
            raise ValueError("fold_batch_norm needs a model from architectures.resnet."
                             "build_model; pass fold_batch_norm=False for other models")
        if backend is None:
            backend = default_backend(fold_batch_norm)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if backend == "onnxruntime" and not fold_batch_norm:
            raise ValueError("the onnxruntime back end runs the build_model net; "
                             "fold_batch_norm=False (the Keras model) needs backend='tensorflow'")
        self.backend = backend
        self.model = model
        self.fold_batch_norm = bool(fold_batch_norm)
        self.batch_size = int(batch_size)
        self.board_size, _, self.input_planes = shape
        self.num_actions = self.board_size * self.board_size + 1
        self.compiled_sizes = sorted({-(-self.batch_size * i // int(shapes))
                                      for i in range(1, int(shapes) + 1)})
        self._buffers = {size: np.zeros((size, *shape), dtype=np.float32)
                         for size in self.compiled_sizes}

        def forward(planes):
            if fold_batch_norm:
                logits, value = inference_forward(model, planes)
            else:
                logits, value = model(planes, training=False)[:2]   # auxiliary heads unused
            return tf.nn.softmax(logits, axis=-1), tf.reshape(value, [-1])

        self._functions = {}
        # TensorFlow's ownership() and with_score(): {head: function}, each traced on its
        # first call (_side_pass); ONNX Runtime's are OnnxNet's.
        self._side_passes: dict[str, object] = {}
        self.has_aux_heads = is_built_by_build_model(model) and has_aux_heads(model)
        if backend == "onnxruntime":
            self._onnx = None
            self.refresh()
            return
        for size in self.compiled_sizes:
            function = tf.function(forward, input_signature=[tf.TensorSpec((size, *shape), tf.float32)])
            function.get_concrete_function()    # trace now, not on the first search step
            self._functions[size] = function

    @property
    def tracing_count(self) -> int:
        """How many times the most-traced function was traced; stays 1 for the object's life
        (1 for ONNX Runtime, which never traces)."""
        if self.backend == "onnxruntime":
            return 1
        return max(f.experimental_get_tracing_count() for f in self._functions.values())

    def refresh(self) -> None:
        """ONNX Runtime: the model's current weights into a new `OnnxNet` (TensorFlow reads
        the variables on every call and needs nothing). Steps and loads need no refresh: the
        OnnxNet follows the model's weights version itself."""
        if self.backend == "onnxruntime":
            self._onnx = OnnxNet.following(self.model, self.batch_size)

    @property
    def device(self) -> str:
        """Where this net runs, for start-up lines."""
        if self.backend == "onnxruntime":
            return self._onnx.device
        return tensorflow_device()

    def _side_pass(self, planes, head: str, keras_outputs) -> list[np.ndarray]:
        """TensorFlow's outputs, host float32 NumPy, of a pass beside the search's through the
        auxiliary heads: `keras_outputs(model outputs)`, a function traced on first use and
        kept in `_side_passes`. ValueError naming `head` for a net without the heads, or for
        planes of another shape; device planes are copied to the host."""
        if not self.has_aux_heads:
            raise ValueError(f"this net has no {head} head (it was trained without "
                             "--aux-heads true)")
        if on_accelerator(planes):
            planes = _to_host(planes)
        planes = np.ascontiguousarray(planes, dtype=np.float32)
        expected = (self.board_size, self.board_size, self.input_planes)
        if planes.ndim != 4 or planes.shape[1:] != expected:
            raise ValueError(f"planes must be (k, {', '.join(map(str, expected))}), "
                             f"got shape {planes.shape}")
        built = self._side_passes.get(head)
        if built is None:      # TensorFlow reads the variables: no rebuild on new weights
            model = self.model
            built = tf.function(lambda batch: keras_outputs(model(batch, training=False)),
                                input_signature=[tf.TensorSpec((None, *expected), tf.float32)])
            self._side_passes[head] = built
        return [t.numpy() for t in built(planes)]

    def ownership(self, planes) -> tuple[np.ndarray, np.ndarray]:
        """(ownership (k, N, N) in [-1, 1], score (k,) in points), float32 NumPy, both from the
        side to move's view, of planes (k, N, N, C); ValueError for a net without the
        auxiliary heads. For analysis: a pass of its own, so the search's compiled net
        computes only policy and value."""
        if self.backend == "onnxruntime":
            return self._onnx.ownership(planes)
        ownership, score = self._side_pass(
            planes, "ownership",
            lambda outputs: (tf.tanh(outputs[2]), tf.reshape(outputs[3], [-1])))
        # Tanh may round to 1 + 1 ulp.
        np.clip(ownership, -1.0, 1.0, out=ownership)
        return ownership, (score * np.float32(self.board_size ** 2)).astype(np.float32)

    def with_score(self, planes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(policy (k, N*N+1), value (k,), score (k,) in points), float32 NumPy, all from the
        side to move's view: one pass for a search whose leaf utility reads the score
        (SearchSettings.score_utility); ValueError for a net without the score head. Host
        arrays: device planes are copied to the host."""
        if self.backend == "onnxruntime":
            return self._onnx.with_score(planes)
        policy, value, score = self._side_pass(
            planes, "score",
            lambda outputs: (tf.nn.softmax(outputs[0], axis=-1), tf.reshape(outputs[1], [-1]),
                             tf.reshape(outputs[3], [-1])))
        np.clip(value, -1.0, 1.0, out=value)       # Tanh may round to 1 + 1 ulp
        return policy, value, (score * np.float32(self.board_size ** 2)).astype(np.float32)

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(policy (k, N*N+1), value (k,)), float32 NumPy, for planes (k, N, N, C); for
        planes on a GPU, `DeviceTensor`s on that GPU instead."""
        if on_accelerator(planes):
            if self.backend == "tensorflow" and tf.config.list_physical_devices("GPU"):
                return self._call_on_device(planes)
            # ONNX Runtime's CPU session, or TensorFlow without a GPU (the CPU build beside
            # CUDA rules), cannot import device memory: the planes come to the host, the
            # results stay there.
            planes = _to_host(planes)
        planes = np.asarray(planes)
        expected = (self.board_size, self.board_size, self.input_planes)
        if planes.ndim != 4 or planes.shape[1:] != expected:
            raise ValueError(f"planes must be (k, {', '.join(map(str, expected))}), "
                             f"got shape {planes.shape}")
        rows = planes.shape[0]
        if self.backend == "onnxruntime":
            return self._onnx(planes)
        policy = np.empty((rows, self.num_actions), dtype=np.float32)
        value = np.empty(rows, dtype=np.float32)
        for start in range(0, rows, self.batch_size):
            stop = min(start + self.batch_size, rows)
            count = stop - start
            size = next(size for size in self.compiled_sizes if size >= count)
            if count == size:
                chunk = np.ascontiguousarray(planes[start:stop], dtype=np.float32)
            else:
                # Unused rows are zeroed so results never depend on an earlier call's data
                # (they cannot affect used rows: batch norm runs on its moving averages).
                chunk = self._buffers[size]
                chunk[:count] = planes[start:stop]
                chunk[count:] = 0.0
            chunk_policy, chunk_value = self._functions[size](chunk)
            policy[start:stop] = chunk_policy.numpy()[:count]
            value[start:stop] = chunk_value.numpy()[:count]
        return policy, value

    def _call_on_device(self, planes):
        # The producer's kernels run on its own stream, which TensorFlow's does not wait for:
        # finish them before TensorFlow reads the planes (a wait, not a copy).
        if type(planes).__module__.split(".")[0] == "cupy":
            import cupy  # deferred: only CuPy arrays come here, and CuPy is a GPU extra
            cupy.cuda.get_current_stream().synchronize()
        tensor = tf.experimental.dlpack.from_dlpack(planes.__dlpack__())
        expected = (self.board_size, self.board_size, self.input_planes)
        if tensor.shape.rank != 4 or tuple(tensor.shape[1:]) != expected:
            raise ValueError(f"planes must be (k, {', '.join(map(str, expected))}), "
                             f"got shape {tuple(tensor.shape)}")
        if tensor.dtype != tf.float32:
            tensor = tf.cast(tensor, tf.float32)
        rows = int(tensor.shape[0])
        policies, values = [], []
        for start in range(0, rows, self.batch_size):
            count = min(start + self.batch_size, rows) - start
            size = next(size for size in self.compiled_sizes if size >= count)
            chunk = tensor[start:start + count]
            if count < size:
                chunk = tf.pad(chunk, [[0, size - count], [0, 0], [0, 0], [0, 0]])
            chunk_policy, chunk_value = self._functions[size](chunk)
            policies.append(chunk_policy[:count])
            values.append(chunk_value[:count])
        if not policies:
            policies.append(tf.zeros((0, self.num_actions), tf.float32))
            values.append(tf.zeros((0,), tf.float32))
        policy = tf.concat(policies, axis=0) if len(policies) > 1 else policies[0]
        value = tf.concat(values, axis=0) if len(values) > 1 else values[0]
        tf.test.experimental.sync_devices()
        return DeviceTensor(policy), DeviceTensor(value)


def _to_host(array) -> np.ndarray:
    if type(array).__module__.split(".")[0] == "cupy":
        import cupy  # deferred: only CuPy arrays come here, and CuPy is a GPU extra
        return cupy.asnumpy(array)
    raise TypeError(f"planes on a device TensorFlow cannot reach: {type(array).__name__}")


def mask_policy(policy: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """Zero illegal moves and renormalise each row to sum to 1 (float32 (k, A)).

    A row whose legal moves all received zero probability (underflow) becomes uniform over
    its legal moves. Every row must have a legal move (pass always is one).
    """
    policy = np.asarray(policy, dtype=np.float32)
    legal = np.asarray(legal, dtype=bool)
    if policy.shape != legal.shape:
        raise ValueError(f"policy {policy.shape} and legal {legal.shape} differ in shape")
    if not legal.any(axis=1).all():
        raise ValueError("every row of legal needs at least one legal move")
    masked = np.where(legal, policy, np.float32(0.0))
    total = masked.sum(axis=1, keepdims=True)
    uniform = legal / legal.sum(axis=1, keepdims=True, dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, masked / total, uniform).astype(np.float32)
