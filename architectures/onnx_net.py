"""The net that plays, in ONNX Runtime, from named weights: no TensorFlow, no Keras.

    net = OnnxNet(weights, board_size=9, input_planes=21, name="9x9.npz", batch_size=64)
    policy, value = net(planes)            # (k, N*N+1) softmax, (k,) in [-1, 1]; float32
    policy, value, score = net.with_score(planes)   # score in points (a net with aux heads)
    ownership, score = net.ownership(planes)         # (k, N, N) in [-1, 1], points

`weights` are {"layer.field": array} (architectures/array_net.py `named_weights`, read from a
model file or checkpoint); the graphs are `onnx_export.onnx_graph`'s. The search's graph
(policy, value) is built at construction, the two side graphs (with the score; ownership and
score) on their first call. The front ends play through this (training/nets.py `open_net`),
so they start without importing TensorFlow; `CompiledNet(backend="onnxruntime")` runs the
same sessions over a Keras model's current weights.

`precision="int8"` plays the search's graph (policy, value) quantized (architectures/
quantized.py), its activation ranges from `calibration` planes; it is quantized again from
every new set of weights (`load`, a followed model's change), from the newest planes given to
`calibrate`. The side graphs stay float32.

All results are host float32 NumPy from the side to move's view; planes on a GPU (CuPy) are
copied to the host. Calls larger than `batch_size` rows run in chunks of it (ONNX Runtime
takes any batch, but one huge call would hold all its activations at once).
"""
from __future__ import annotations

import time

import numpy as np

from architectures.onnx_export import onnx_graph, onnxruntime_session
from architectures.weights_version import weights_version

DEVICE = "ONNX Runtime on the CPU"


class OnnxNet:
    backend = "onnxruntime"
    device = DEVICE
    tracing_count = 1          # as CompiledNet counts it: ONNX Runtime never traces

    def __init__(self, weights: dict[str, np.ndarray], board_size: int, input_planes: int,
                 name: str = "net", batch_size: int | None = None, *,
                 precision: str = "float32", calibration: np.ndarray | None = None,
                 search_graph: bytes | None = None):
        if batch_size is not None and (int(batch_size) != batch_size or batch_size < 1):
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if precision not in ("float32", "int8"):
            raise ValueError(f"precision must be float32 or int8, got {precision!r}")
        if precision == "int8" and calibration is None:
            raise ValueError("an int8 net needs calibration planes")
        self.precision = precision
        self.device = DEVICE + (", int8" if precision == "int8" else "")
        self._calibration = calibration
        self.quantize_seconds = 0.0      # spent quantizing so far (the loop reports it)
        self.int8_graph: bytes | None = None  # the int8 search graph playing (serialised)
        self.board_size, self.input_planes = int(board_size), int(input_planes)
        self.num_actions = self.board_size * self.board_size + 1
        self.batch_size = None if batch_size is None else int(batch_size)
        self._name = name
        self._model = self._version = None       # the Keras model followed (`following`)
        self.load(weights, int8_graph=search_graph)

    @classmethod
    def following(cls, model, batch_size: int | None = None, *, precision: str = "float32",
                  calibration: np.ndarray | None = None) -> "OnnxNet":
        """An OnnxNet of a `build_model` Keras model on any backend that takes the model's
        weights again at its next call whenever they changed (architectures/weights_version.py:
        every trainer step and state load says so): the training loop's playing net."""
        from architectures.array_net import keras_named_weights
        board_size, _, input_planes = tuple(model.input_shape[1:])
        version = weights_version(model)      # read before the copy: a change during it shows
        net = cls(keras_named_weights(model), board_size, input_planes, model.name, batch_size,
                  precision=precision, calibration=calibration)
        net._model, net._version = model, version
        return net

    def load(self, weights: dict[str, np.ndarray], int8_graph: bytes | None = None) -> None:
        """Play with new weights of the same net from the next call on (a self-play actor
        taking the learner's newest): the search's session is rebuilt now, the side graphs
        on their next call. An int8 net quantizes the weights unless `int8_graph` is their
        quantized graph already."""
        if self.precision == "int8":
            if int8_graph is None:
                from architectures.quantized import quantized_graph
                started = time.perf_counter()
                int8_graph = quantized_graph(weights, self.board_size, self.input_planes,
                                             self._name, self._calibration).SerializeToString()
                self.quantize_seconds += time.perf_counter() - started
            search = onnxruntime_session(int8_graph)
        else:
            search = self._session(weights)
        # Only once the search's session is made: a failure leaves the net as it was.
        self.has_aux_heads = "ownership_conv.kernel" in weights
        self._weights = weights
        self.int8_graph = int8_graph
        self._sessions = {"search": search}

    def calibrate(self, planes: np.ndarray) -> None:
        """Activation ranges from these planes at the next quantization (an int8 net)."""
        self._calibration = planes

    def _session(self, weights, **graph):
        return onnxruntime_session(onnx_graph(weights, self.board_size, self.input_planes,
                                              self._name, **graph))

    def follow(self) -> None:
        """A net following a model: take its weights now if they changed since (otherwise
        this happens at the next call)."""
        if self._model is not None and weights_version(self._model) != self._version:
            from architectures.array_net import keras_named_weights
            version = weights_version(self._model)   # read first: a change during the copy shows
            self.load(keras_named_weights(self._model))
            self._version = version                  # only once loaded: a failure is retried

    def _run(self, planes, head: str, graph: dict, outputs: int) -> list[np.ndarray]:
        """The outputs of graph `head` on `planes` (checked, on the host), chunked."""
        self.follow()
        if head != "search" and not self.has_aux_heads:
            raise ValueError(f"this net has no {head} head (it was trained without "
                             "--aux-heads true)")
        if not isinstance(planes, np.ndarray) and hasattr(planes, "get"):
            planes = planes.get()      # a CuPy array beside the CUDA rules
        planes = np.ascontiguousarray(planes, dtype=np.float32)
        expected = (self.board_size, self.board_size, self.input_planes)
        if planes.ndim != 4 or planes.shape[1:] != expected:
            raise ValueError(f"planes must be (k, {', '.join(map(str, expected))}), "
                             f"got shape {planes.shape}")
        if head not in self._sessions:
            self._sessions[head] = self._session(self._weights, **graph)
        session, rows = self._sessions[head], len(planes)
        if rows == 0:
            n, moves = self.board_size, self.num_actions
            shapes = {"search": [(0, moves), (0,)], "score": [(0, moves), (0,), (0,)],
                      "ownership": [(0, n, n), (0,)]}[head]
            return [np.empty(shape, np.float32) for shape in shapes]
        step = self.batch_size or rows
        parts = [session.run(None, {"planes": planes[start:start + step]})
                 for start in range(0, rows, step)]
        return [np.concatenate([part[i] for part in parts]) for i in range(outputs)]

    def __call__(self, planes) -> tuple[np.ndarray, np.ndarray]:
        policy, value = self._run(planes, "search", {}, 2)
        # ONNX Runtime's Tanh can round to 1 + 1 ulp (seen: 1.00000012); the search demands
        # values in [-1, 1].
        return policy, np.clip(value, -1.0, 1.0, out=value)

    def with_score(self, planes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(policy, value, score in points) in one pass, for a search whose leaf utility reads
        the score; ValueError for a net without the score head."""
        policy, value, score = self._run(planes, "score", {"score": True}, 3)
        np.clip(value, -1.0, 1.0, out=value)
        return policy, value, self._points(score)

    def ownership(self, planes) -> tuple[np.ndarray, np.ndarray]:
        """(ownership (k, N, N) in [-1, 1], score (k,) in points), a pass of its own so that
        the search's graph computes only policy and value; ValueError without the heads."""
        ownership, score = self._run(planes, "ownership", {"aux_heads": True}, 2)
        np.clip(ownership, -1.0, 1.0, out=ownership)
        return ownership, self._points(score)

    def _points(self, score: np.ndarray) -> np.ndarray:
        """The score head predicts the margin / N*N."""
        return (score * np.float32(self.board_size ** 2)).astype(np.float32)
