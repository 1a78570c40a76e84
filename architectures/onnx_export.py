"""The policy-value net as an ONNX graph, built directly from the Keras model's weights.

`onnx_model(model)` writes the inference pass of a `resnet.build_model` net as ONNX operators:
NHWC planes in (the layout `GoBatch.features()` builds), one transpose to NCHW, every
convolution followed by its own BatchNormalization node (inference mode, moving statistics),
the residual adds and ReLUs, the heads flattened in Keras' NHWC order, the policy softmax and
the value tanh. Outputs: `policy` float32 (B, N*N+1) probabilities over all moves, pass last,
and `value` float32 (B,), exactly what `CompiledNet` returns. The batch dimension is symbolic.
`onnx_model(model, aux_heads=True)` is a second graph for analysis, of a net with auxiliary
heads: outputs `ownership` float32 (B, N, N), tanh of the ownership logits, and `score` float32
(B,), the score head as it is (margin / N*N); a separate graph, so that the search's graph
computes nothing it does not read. `onnx_model(model, score=True)` is the search's graph with
that `score` as a third output, for a search whose leaf utility reads the score (one more
dense layer on the value head's hidden layer).

The initializers are the model's own variables, unchanged: `keras_weights(onnx_model(m))`
gives back `m.get_weights()` bit for bit (tests/test_onnx.py). Folding the batch norms into
the convolutions is left to ONNX Runtime's graph optimiser (Conv+BatchNormalization fusion),
so no float rounding happens on the way out. tf2onnx is not needed (nor installable next to
TF 2.21's protobuf without risk); the graph is twenty lines of `onnx.helper`. It is built
from named weights (`onnx_graph`), so this module imports without TensorFlow.
"""
from __future__ import annotations

import os

import numpy as np

from architectures.array_net import BATCH_NORM_EPSILON, BATCH_NORM_FIELDS, keras_named_weights

OPSET = 17
# The file format version opset 17 came with: the onnx package's own default runs ahead of
# ONNX Runtime (onnx 1.23 writes 14, which ONNX Runtime 1.30 refuses).
IR_VERSION = 8


def onnx_model(model, aux_heads: bool = False, score: bool = False):
    """An `onnx.ModelProto` computing (policy softmax, value) of a `build_model` net, with
    `score` also its score, or with `aux_heads` (ownership tanh, score) of one that has those
    heads."""
    from architectures.resnet import has_aux_heads, is_built_by_build_model  # TensorFlow
    if not is_built_by_build_model(model):
        raise ValueError("onnx_model needs a model from architectures.resnet.build_model")
    if (aux_heads or score) and not has_aux_heads(model):
        raise ValueError("this net has no ownership head (it was trained without --aux-heads)")
    weights = keras_named_weights(model)
    n, _, channels = tuple(model.input_shape[1:])
    return onnx_graph(weights, n, channels, model.name, aux_heads, score)


def onnx_graph(weights: dict[str, np.ndarray], board_size: int, channels: int, name: str,
               aux_heads: bool = False, score: bool = False):
    """`onnx_model`'s graph from named weights ({"layer.field": array}, the names of
    architectures/array_net.py `weight_names`): no TensorFlow needed, so a model file can run
    in ONNX Runtime on a machine without it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    if (aux_heads or score) and "ownership_conv.kernel" not in weights:
        raise ValueError("this net has no ownership head (it was trained without --aux-heads)")
    n = board_size
    nodes, initializers = [], []
    counter = iter(range(1 << 30))

    def constant(name: str, array) -> str:
        initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(op: str, inputs: list[str], **attributes) -> str:
        output = f"{op.lower()}_{next(counter)}"
        # Named after its output: the quantizer keeps nodes out by name.
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attributes))
        return output

    def conv_bn(x: str, conv_name: str, bn_name: str, residual: str | None = None) -> str:
        kernel = weights[f"{conv_name}.kernel"]                   # HWIO
        size = kernel.shape[0]
        kernel = constant(f"{conv_name}.kernel", kernel.transpose(3, 2, 0, 1))  # OIHW
        y = node("Conv", [x, kernel], kernel_shape=[size, size], pads=[size // 2] * 4)
        y = node("BatchNormalization",
                 [y] + [constant(f"{bn_name}.{field}", weights[f"{bn_name}.{field}"])
                        for field in BATCH_NORM_FIELDS],
                 epsilon=BATCH_NORM_EPSILON)
        if residual is not None:
            y = node("Add", [y, residual])
        return node("Relu", [y])

    def flatten_nhwc(x: str) -> str:
        return node("Reshape", [node("Transpose", [x], perm=[0, 2, 3, 1]),
                                constant(f"shape_{next(counter)}", np.array([0, -1], np.int64))])

    def dense(x: str, name: str) -> str:
        return node("Gemm", [x, constant(f"{name}.kernel", weights[f"{name}.kernel"]),
                             constant(f"{name}.bias", weights[f"{name}.bias"])])

    x = node("Transpose", ["planes"], perm=[0, 3, 1, 2])
    x = conv_bn(x, "stem_conv", "stem_bn")
    block = 0
    while f"block{block}_conv1.kernel" in weights:
        x = conv_bn(conv_bn(x, f"block{block}_conv1", f"block{block}_bn1"),
                    f"block{block}_conv2", f"block{block}_bn2", residual=x)
        block += 1
    if "gpool_dense.kernel" in weights:   # the global pooling bias, as resnet.py's inference_forward
        pooled = node("Flatten", [node("Concat", [node("GlobalAveragePool", [x]),
                                                  node("GlobalMaxPool", [x])], axis=1)])
        width = weights["gpool_dense.kernel"].shape[1]
        bias = node("Reshape", [dense(pooled, "gpool_dense"),
                                constant("gpool_shape", np.array([-1, width, 1, 1], np.int64))])
        x = node("Relu", [node("Add", [x, bias])])
    hidden = node("Relu", [dense(flatten_nhwc(conv_bn(x, "value_conv", "value_bn")),
                                 "value_hidden")])
    if aux_heads:
        # ownership_conv is a 1x1 convolution with a bias and no batch norm; its one channel
        # makes NCHW (B, 1, N, N) and Keras' (B, N, N) the same row-major order.
        logits = node("Conv", [x, constant("ownership_conv.kernel",
                                           weights["ownership_conv.kernel"].transpose(3, 2, 0, 1)),
                               constant("ownership_conv.bias", weights["ownership_conv.bias"])],
                      kernel_shape=[1, 1])
        shape = constant("ownership_shape", np.array([-1, n, n], np.int64))
        nodes.append(helper.make_node("Reshape", [node("Tanh", [logits]), shape], ["ownership"]))
        nodes.append(helper.make_node(
            "Reshape", [dense(hidden, "score"), constant("score_shape", np.array([-1], np.int64))],
            ["score"]))
        outputs = [helper.make_tensor_value_info("ownership", TensorProto.FLOAT, ["batch", n, n]),
                   helper.make_tensor_value_info("score", TensorProto.FLOAT, ["batch"])]
    else:
        policy = dense(flatten_nhwc(conv_bn(x, "policy_conv", "policy_bn")), "policy_logits")
        nodes.append(helper.make_node("Softmax", [policy], ["policy"], axis=-1))
        value = node("Tanh", [dense(hidden, "value")])
        nodes.append(helper.make_node(
            "Reshape", [value, constant("value_shape", np.array([-1], np.int64))], ["value"]))
        outputs = [helper.make_tensor_value_info("policy", TensorProto.FLOAT, ["batch", n * n + 1]),
                   helper.make_tensor_value_info("value", TensorProto.FLOAT, ["batch"])]
        if score:
            nodes.append(helper.make_node(
                "Reshape", [dense(hidden, "score"),
                            constant("score_shape", np.array([-1], np.int64))], ["score"]))
            outputs.append(helper.make_tensor_value_info("score", TensorProto.FLOAT, ["batch"]))

    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("planes", TensorProto.FLOAT, ["batch", n, n, channels])],
        outputs, initializers)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="batched-go-zero", ir_version=IR_VERSION)
    onnx.checker.check_model(proto)
    return proto


def onnxruntime_session(proto):
    """An ONNX Runtime CPU session of `proto` (a ModelProto or its serialised bytes), set up
    for the search's steady calls."""
    import onnxruntime  # deferred: an optional back end

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle intra-op threads block at once instead of spinning: between net calls the
    # search runs on this core and the rules engine's threads want the other.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # As many threads as cores this process may run on: left to itself, ONNX Runtime counts
    # the machine's cores and pins a thread to each, so a process confined to some cores
    # (taskset, a container's cpuset) ran a thread on a core it was kept from.
    options.intra_op_num_threads = allowed_cores()
    serialised = proto if isinstance(proto, bytes) else proto.SerializeToString()
    return onnxruntime.InferenceSession(serialised, options,
                                        providers=["CPUExecutionProvider"])


def session_evaluator(session):
    """An evaluator (games/search.py) over an ONNX Runtime session: planes on the host (device
    arrays are copied there), policy and value as NumPy, the value clipped to [-1, 1] (ONNX
    Runtime's Tanh can round to 1 + 1 ulp)."""
    def evaluate(planes):
        if not isinstance(planes, np.ndarray):
            planes = planes.get()   # a CuPy array beside the CUDA rules
        policy, value = session.run(None, {"planes": np.ascontiguousarray(planes, np.float32)})
        return policy, np.clip(value, -1.0, 1.0, out=value)
    return evaluate


def allowed_cores() -> int:
    """The number of cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity masks on this OS
        return max(1, os.cpu_count() or 1)


def keras_weights(proto, model) -> list[np.ndarray]:
    """The Keras weights (`model.get_weights()` order) read back from an `onnx_model` graph."""
    from onnx import numpy_helper

    stored = {tensor.name: numpy_helper.to_array(tensor) for tensor in proto.graph.initializer}
    field = {"kernel": "kernel", "bias": "bias", "gamma": "gamma", "beta": "beta",
             "moving_mean": "moving_mean", "moving_variance": "moving_variance"}
    weights = []
    for variable in model.weights:
        # Keras 3 paths read "layer_name/variable_name".
        layer_name, variable_name = variable.path.split("/")[-2:]
        array = stored[f"{layer_name}.{field[variable_name]}"]
        if variable_name == "kernel" and array.ndim == 4:
            array = array.transpose(2, 3, 1, 0)                   # OIHW back to HWIO
        weights.append(array)
    return weights
