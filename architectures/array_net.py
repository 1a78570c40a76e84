"""The net's inference pass in an array namespace, without TensorFlow: NumPy on the CPU, CuPy
on a GPU. Self-play on a GPU runs the net here, beside the CUDA rules, so no plane leaves the
device and a machine without TensorFlow (the GPU machines we test on) can play.

    weights = named_weights(config, arrays)         # "model.NNNN" arrays -> {"layer.field": array}
    net = ArrayNet(weights, config, xp=cupy, precision="float16")
    policy, value = net(planes)       # planes (k, N, N, C) of net.xp; any k >= 0
    # policy float32 (k, N*N+1): softmax over all moves, pass last; value float32 (k,) in [-1, 1]
    logits, value = net.logits_and_value(planes)    # the same before the softmax, on the device

Named weights. A model file or checkpoint stores the Keras model's variables in its variable
order ("model.0000", ...; training/nets.py). `weight_names` lists the "layer.field" name of each
for a `resnet.build_model` net of a config's shape (tests/test_array_net.py checks the list
against Keras for every combination of heads and pooling), so the weights can be read by name
with no model built. Fields: conv kernels "kernel" HWIO, batch norms "gamma", "beta",
"moving_mean", "moving_variance", dense layers "kernel" (in, out) and "bias".

The arithmetic. Each batch norm is folded into the convolution before it (kernel times scale,
plus a bias), once per `load`. A 3x3 convolution is one GEMM: activations are NHWC
(k, N, N, F); im2col writes every point's 3x3 neighbourhood (zeros off the board) as a row of
the (k*N*N, 9F) matrix (one CUDA kernel on CuPy, a strided view of a padded copy on NumPy),
and its product with the (9F, F) kernel runs in cuBLAS (CuPy) or the BLAS under NumPy. The
bias, the residual add and the ReLU follow in one elementwise kernel. The two 1x1 head
convolutions are one GEMM. Buffers are allocated for the largest batch seen and reused, so a
steady self-play loop allocates nothing on the trunk's path.

Precision: "float32" everywhere; "float16" (CuPy only) stores the weights and activations in
half precision and multiplies on tensor cores (cuBLAS accumulates in float32); the heads'
dense layers, the softmax and the value stay in float32. tests/test_array_net.py bounds the
difference from float32 on real positions.
"""
from __future__ import annotations

import numpy as np

PRECISIONS = ("float32", "float16")
# What self-play on a GPU runs (chosen by benchmarks/gpu_check.sh's figures).
GPU_PRECISION = "float16"
BATCH_NORM_FIELDS = ("gamma", "beta", "moving_mean", "moving_variance")
# Keras' BatchNormalization default, which resnet.build_model keeps.
BATCH_NORM_EPSILON = 1e-3


def weight_names(blocks: int, aux_heads: bool, global_pooling: bool,
                 reply_head: bool = False) -> list[str]:
    """The "layer.field" name of each variable of a `resnet.build_model` net, in the Keras
    model's variable order (the order of a model file's "model.NNNN" arrays). Keras orders
    layers by the graph's topology; the heads' layers interleave as listed here."""
    def conv(name):
        return [f"{name}.kernel"]

    def batch_norm(name):
        return [f"{name}.{field}" for field in BATCH_NORM_FIELDS]

    def dense(name):
        return [f"{name}.kernel", f"{name}.bias"]

    names = conv("stem_conv") + batch_norm("stem_bn")
    for block in range(blocks):
        prefix = f"block{block}"
        names += (conv(f"{prefix}_conv1") + batch_norm(f"{prefix}_bn1")
                  + conv(f"{prefix}_conv2") + batch_norm(f"{prefix}_bn2"))
    if global_pooling:
        names += dense("gpool_dense")
    names += conv("value_conv") + conv("policy_conv") + batch_norm("value_bn")
    if reply_head:
        names += conv("reply_conv")
    names += batch_norm("policy_bn")
    if reply_head:
        names += batch_norm("reply_bn")
    names += dense("value_hidden")
    if aux_heads:
        names += dense("ownership_conv")
    names += dense("policy_logits") + dense("value")
    if aux_heads:
        names += dense("score")
    if reply_head:
        names += dense("reply_logits")
    return names


def named_weights(config, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """{"layer.field": array} of the "model.NNNN" arrays of a model file or checkpoint trained
    under `config`; ValueError (one line) when their number or shapes do not fit its shape."""
    stored = sorted(name for name in arrays if name.startswith("model."))
    names = weight_names(config.blocks, config.aux_heads, config.global_pooling,
                         config.reply_head)
    if len(stored) != len(names):
        raise ValueError(f"{len(stored)} weight arrays, but a {config.blocks}x{config.filters} "
                         f"net of this config has {len(names)}")
    weights = {name: np.asarray(arrays[key], dtype=np.float32)
               for name, key in zip(names, stored)}
    expected = expected_shapes(config)
    for name, shape in expected.items():
        if weights[name].shape != shape:
            raise ValueError(f"weight {name} has shape {weights[name].shape}, the config's net "
                             f"needs {shape}")
    return weights


def keras_named_weights(model) -> dict[str, np.ndarray]:
    """{"layer.field": array} of a Keras model's variables (Keras 3 paths read
    "layer_name/variable_name"); the names `weight_names` gives a file's arrays."""
    return {".".join(variable.path.split("/")[-2:]): np.asarray(variable.numpy())
            for variable in model.weights}


def expected_shapes(config) -> dict[str, tuple]:
    """The shape of every named weight of a net of `config`'s shape."""
    n, f, c = config.board_size, config.filters, config.input_planes
    shapes = {"stem_conv.kernel": (3, 3, c, f)}

    def batch_norm(name, width):
        shapes.update({f"{name}.{field}": (width,) for field in BATCH_NORM_FIELDS})

    batch_norm("stem_bn", f)
    for block in range(config.blocks):
        prefix = f"block{block}"
        shapes[f"{prefix}_conv1.kernel"] = shapes[f"{prefix}_conv2.kernel"] = (3, 3, f, f)
        batch_norm(f"{prefix}_bn1", f)
        batch_norm(f"{prefix}_bn2", f)
    if config.global_pooling:
        shapes.update({"gpool_dense.kernel": (2 * f, f), "gpool_dense.bias": (f,)})
    shapes.update({"value_conv.kernel": (1, 1, f, 1), "policy_conv.kernel": (1, 1, f, 2)})
    batch_norm("value_bn", 1)
    batch_norm("policy_bn", 2)
    hidden = config.value_hidden
    shapes.update({"value_hidden.kernel": (n * n, hidden), "value_hidden.bias": (hidden,),
                   "policy_logits.kernel": (2 * n * n, n * n + 1),
                   "policy_logits.bias": (n * n + 1,),
                   "value.kernel": (hidden, 1), "value.bias": (1,)})
    if config.aux_heads:
        shapes.update({"ownership_conv.kernel": (1, 1, f, 1), "ownership_conv.bias": (1,),
                       "score.kernel": (hidden, 1), "score.bias": (1,)})
    if config.reply_head:
        shapes.update({"reply_conv.kernel": (1, 1, f, 2),
                       "reply_logits.kernel": (2 * n * n, n * n + 1),
                       "reply_logits.bias": (n * n + 1,)})
        batch_norm("reply_bn", 2)
    return shapes


def fold_batch_norm(weights: dict[str, np.ndarray], conv: str, batch_norm: str):
    """(kernel (kh*kw*Cin, Cout), bias (Cout,)), float64, of convolution `conv` followed by
    batch norm `batch_norm` in inference mode, as one convolution with a bias."""
    kernel = weights[f"{conv}.kernel"].astype(np.float64)
    gamma, beta, mean, variance = (weights[f"{batch_norm}.{field}"].astype(np.float64)
                                   for field in BATCH_NORM_FIELDS)
    scale = gamma / np.sqrt(variance + BATCH_NORM_EPSILON)
    return (kernel * scale).reshape(-1, kernel.shape[-1]), beta - mean * scale


class ArrayNet:
    """A `build_model` net's (policy, value) in namespace `xp` from named weights (see the
    module docstring). Calls take planes of `xp` and return arrays of `xp`, float32."""

    def __init__(self, weights: dict[str, np.ndarray], config, xp=np,
                 precision: str = "float32"):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if precision == "float16" and xp is np:
            raise ValueError("precision float16 needs a GPU namespace (CuPy): NumPy's half "
                             "precision matrix products are slow emulations")
        self.xp = xp
        self.precision = precision
        self.config = config
        self.board_size = n = config.board_size
        self.input_planes = config.input_planes
        self.filters = config.filters
        self.blocks = config.blocks
        self.num_actions = n * n + 1
        self._dtype = np.dtype(precision)
        self._capacity = 0
        self._kernels = _elementwise_kernels(xp)
        self.load(weights)

    def load(self, weights: dict[str, np.ndarray]) -> None:
        """Take new weights of the same shape (the training loop's, after each iteration):
        folded and copied to the device here, once."""
        config, xp = self.config, self.xp
        for name, shape in expected_shapes(config).items():
            if name not in weights or tuple(weights[name].shape) != shape:
                raise ValueError(f"weight {name} is missing or not of shape {shape}")

        def device(array, dtype):
            return xp.asarray(np.ascontiguousarray(array, dtype=dtype))

        trunk = [("stem_conv", "stem_bn")]
        for block in range(config.blocks):
            trunk += [(f"block{block}_conv1", f"block{block}_bn1"),
                      (f"block{block}_conv2", f"block{block}_bn2")]
        self._trunk = [tuple(device(part, self._dtype) for part in fold_batch_norm(weights, *pair))
                       for pair in trunk]
        self._gpool = (None if not config.global_pooling else
                       (device(weights["gpool_dense.kernel"], np.float32),
                        device(weights["gpool_dense.bias"], np.float32)))
        # Both 1x1 head convolutions as one (F, 3) GEMM: columns policy 0, 1 and value 2.
        policy_kernel, policy_bias = fold_batch_norm(weights, "policy_conv", "policy_bn")
        value_kernel, value_bias = fold_batch_norm(weights, "value_conv", "value_bn")
        self._heads = (device(np.concatenate([policy_kernel, value_kernel], axis=1), self._dtype),
                       device(np.concatenate([policy_bias, value_bias]), np.float32))
        self._dense = {name: (device(weights[f"{name}.kernel"], np.float32),
                              device(weights[f"{name}.bias"], np.float32))
                       for name in ("policy_logits", "value_hidden", "value")}

    def _reserve(self, rows: int) -> None:
        if rows <= self._capacity:
            return
        xp, n, f = self.xp, self.board_size, self.filters
        rows = max(rows, 2 * self._capacity)
        width = max(f, self.input_planes)
        self._input = xp.empty((rows, n, n, self.input_planes), self._dtype)
        self._activations = [xp.empty((rows, n, n, f), self._dtype) for _ in range(2)]
        self._columns = xp.empty(rows * n * n * 9 * width, self._dtype)
        self._product = xp.empty((rows * n * n, f), self._dtype)
        self._head_product = xp.empty((rows * n * n, 3), self._dtype)
        self._capacity = rows

    def _conv3x3(self, source, kernel, bias, out, residual=None) -> None:
        """out = relu(conv(source) + bias (+ residual)); all (rows, N, N, channels)."""
        xp, n = self.xp, self.board_size
        rows, channels = source.shape[0], source.shape[-1]
        columns = self._columns[:rows * n * n * 9 * channels].reshape(rows * n * n, 9 * channels)
        self._kernels.im2col(source, columns)
        product = self._product[:rows * n * n]
        xp.matmul(columns, kernel, out=product)
        product = product.reshape(rows, n, n, -1)
        if residual is None:
            self._kernels.bias_relu(product, bias, out)
        else:
            self._kernels.bias_add_relu(product, bias, residual, out)

    def logits_and_value(self, planes):
        """(policy logits (k, N*N+1), value (k,) after tanh), float32 arrays of `xp`."""
        xp, n = self.xp, self.board_size
        planes = xp.asarray(planes)
        if planes.ndim != 4 or planes.shape[1:] != (n, n, self.input_planes):
            raise ValueError(f"planes must be (k, {n}, {n}, {self.input_planes}), got shape "
                             f"{tuple(planes.shape)}")
        rows = planes.shape[0]
        if rows == 0:
            return (xp.zeros((0, self.num_actions), np.float32), xp.zeros(0, np.float32))
        self._reserve(rows)
        source = self._input[:rows]
        source[...] = planes
        first, second = (buffer[:rows] for buffer in self._activations)
        stem_kernel, stem_bias = self._trunk[0]
        self._conv3x3(source, stem_kernel, stem_bias, first)
        for block in range(self.blocks):
            (kernel1, bias1), (kernel2, bias2) = self._trunk[1 + 2 * block:3 + 2 * block]
            self._conv3x3(first, kernel1, bias1, second)
            self._conv3x3(second, kernel2, bias2, first, residual=first)
        trunk = first
        if self._gpool is not None:
            pooled = xp.concatenate([trunk.mean(axis=(1, 2), dtype=np.float32),
                                     trunk.max(axis=(1, 2)).astype(np.float32)], axis=1)
            kernel, bias = self._gpool
            shift = (pooled @ kernel + bias).astype(self._dtype)[:, None, None, :]
            self._kernels.bias_relu(trunk, shift, trunk)
        heads = self._head_product[:rows * n * n]
        xp.matmul(trunk.reshape(rows * n * n, self.filters), self._heads[0], out=heads)
        heads = xp.maximum(heads.astype(np.float32) + self._heads[1], 0).reshape(rows, n * n, 3)
        policy_features = heads[:, :, :2].reshape(rows, 2 * n * n)
        value_features = xp.ascontiguousarray(heads[:, :, 2])
        kernel, bias = self._dense["policy_logits"]
        logits = policy_features @ kernel + bias
        kernel, bias = self._dense["value_hidden"]
        hidden = xp.maximum(value_features @ kernel + bias, 0)
        kernel, bias = self._dense["value"]
        value = xp.tanh(hidden @ kernel + bias).reshape(rows)
        return logits, value

    def __call__(self, planes):
        """(policy softmax (k, N*N+1), value (k,)), float32 arrays of `xp`."""
        logits, value = self.logits_and_value(planes)
        logits = logits - logits.max(axis=1, keepdims=True)
        weights = self.xp.exp(logits)
        return weights / weights.sum(axis=1, keepdims=True), value


class _NumpyKernels:
    @staticmethod
    def im2col(source, columns):
        """columns (rows*N*N, 9*C) = each point's 3x3 neighbourhood of source (rows, N, N, C),
        zeros off the board, in the kernel's (row, column, channel) order."""
        rows, n, _, channels = source.shape
        padded = np.pad(source, ((0, 0), (1, 1), (1, 1), (0, 0)))
        s = padded.strides
        windows = np.lib.stride_tricks.as_strided(
            padded, shape=(rows, n, n, 3, 3, channels), strides=(s[0], s[1], s[2], s[1], s[2], s[3]))
        columns.reshape(rows, n, n, 3, 3, channels)[...] = windows

    @staticmethod
    def bias_relu(product, bias, out):
        np.maximum(product + bias, 0, out=out)

    @staticmethod
    def bias_add_relu(product, bias, residual, out):
        np.maximum(product + bias + residual, 0, out=out)


# One thread per (point, tap): it copies that neighbour's C channels (zeros off the board) in
# 16-byte words where the rows allow it, so a warp writes whole cache lines. T is the element's
# bits (2 or 4 bytes), copied as they are. 32-bit index arithmetic: 64-bit division was most of
# the net's time on an H100 in the first version of this kernel.
_IM2COL_SOURCE = r"""
template <typename T>
__global__ void im2col3x3(const T *source, T *columns, int pairs, int n, int channels)
{
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= pairs) return;
    const int tap = e % 9, point = e / 9;
    const int x = point % n, y = (point / n) % n, board = point / (n * n);
    const int yy = y + tap / 3 - 1, xx = x + tap % 3 - 1;
    const bool inside = yy >= 0 && yy < n && xx >= 0 && xx < n;
    const long long from = (((long long)board * n + yy) * n + xx) * channels;
    T *to = columns + (long long)e * channels;
    const int bytes = channels * (int)sizeof(T);
    if (bytes % 16 == 0) {
        uint4 *out = (uint4 *)to;
        const uint4 *in = (const uint4 *)(source + from);
        const uint4 zero = make_uint4(0, 0, 0, 0);
        for (int w = 0; w < bytes / 16; w++) out[w] = inside ? in[w] : zero;
    } else {
        for (int c = 0; c < channels; c++) to[c] = inside ? source[from + c] : (T)0;
    }
}
"""


def _elementwise_kernels(xp):
    """im2col and the fused epilogues: NumPy operations, or CUDA kernels through CuPy."""
    if xp is np:
        return _NumpyKernels
    import types
    module = xp.RawModule(code=_IM2COL_SOURCE, options=("--std=c++14",),
                          name_expressions=["im2col3x3<unsigned short>",
                                            "im2col3x3<unsigned int>"])
    copies = {2: module.get_function("im2col3x3<unsigned short>"),
              4: module.get_function("im2col3x3<unsigned int>")}

    def im2col(source, columns):
        rows, n, _, channels = source.shape
        pairs = rows * n * n * 9
        copies[source.dtype.itemsize](((pairs + 255) // 256,), (256,),
                                      (source, columns, np.int32(pairs), np.int32(n),
                                       np.int32(channels)))

    # In float whatever T is: CuPy's half type has no max().
    bias_relu = xp.ElementwiseKernel(
        "T y, T b", "T out", "float v = (float)y + (float)b; out = (T)(v > 0.0f ? v : 0.0f)",
        "bgz_bias_relu")
    bias_add_relu = xp.ElementwiseKernel(
        "T y, T b, T r", "T out",
        "float v = (float)y + (float)b + (float)r; out = (T)(v > 0.0f ? v : 0.0f)",
        "bgz_bias_add_relu")
    return types.SimpleNamespace(im2col=im2col,
                                 bias_relu=lambda y, b, out: bias_relu(y, b, out),
                                 bias_add_relu=lambda y, b, r, out: bias_add_relu(y, b, r, out))
