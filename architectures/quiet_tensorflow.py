"""TensorFlow imported without its start-up log on the terminal: the one place the project
loads TensorFlow (and Keras, which loads it), so that no entry script's first screen opens
with TensorFlow's lines before the project's own.

Why a file descriptor and not TF_CPP_MIN_LOG_LEVEL: where oneDNN's custom operations are on
(by default on AVX-512 CPUs, or with TF_ENABLE_ONEDNN_OPTS=1) TensorFlow 2.21 logs "oneDNN
custom operations are on ..." from C++ before absl's logging is initialised, and absl then
writes it, with "WARNING: All log messages before absl::InitializeLog() is called are written
to STDERR", whatever the level says (checked at levels 2 and 3). So the import runs with
file descriptor 2 pointed at a temporary file; afterwards every captured line goes on to
stderr except those start-up lines, and those only while the user's TF_CPP_MIN_LOG_LEVEL
(unset counts as the entry scripts' 2) hides INFO: an error or warning of the import is never
swallowed.

Four optional imports are declined while TensorFlow and Keras load (only there, and only
while not loaded already), each inside `try: ... except ImportError` where it is imported,
for features the project never calls: TensorFlow Lite's converter imports JAX when it is
installed, Keras' image-gallery plot matplotlib.pyplot, TensorFlow's Keras 2 scipy.sparse
(sparse inputs to its v1 training loops) and Keras 3's file editor IPython (its notebook
display). JAX and matplotlib cost 1.8 s of every TensorFlow start here (0.8 s and 1.0 s of
6.7 s, `-X importtime`), scipy and IPython 0.3 s of the remaining 4.5 s of CPU. Each imports
normally afterwards (the JAX backend, the notebook's plots and kernel). (`requests`, also
optional in places, is not declined: TensorFlow imports it unguarded elsewhere.)
"""
from __future__ import annotations

import contextlib
import importlib.abc
import os
import sys
import tempfile

# The lines TensorFlow prints at every import where oneDNN is on: INFO, and absl's notice
# that it printed INFO before it was initialised.
START_UP_LINES = ("All log messages before absl::InitializeLog() is called are written to STDERR",
                  "oneDNN custom operations are")


# Imported by TensorFlow and Keras only if present, for nothing the project uses (above).
DECLINED_WHILE_LOADING = ("jax", "matplotlib", "scipy", "IPython")


class _Declined(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.names = names

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"{fullname} is not loaded with TensorFlow", name=fullname)
        return None


@contextlib.contextmanager
def _declining_optional_imports():
    names = {name for name in DECLINED_WHILE_LOADING if name not in sys.modules}
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        names.discard("jax")
    finder = _Declined(names)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def is_start_up_line(line: str) -> bool:
    return any(marker in line for marker in START_UP_LINES)


def _hides_info() -> bool:
    level = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2").strip()
    return not level.isdigit() or int(level) >= 1


def load_keras():
    """The `keras` module on the backend KERAS_BACKEND names (TensorFlow when unset), loaded
    through `load_tensorflow` where that backend is TensorFlow: what every module of the
    project that builds or trains the Keras net imports it through."""
    if os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
        load_tensorflow()
    import keras
    return keras


def load_tensorflow():
    """The `tensorflow` module, imported once with its start-up lines held back (above);
    later calls return the loaded module."""
    if "tensorflow" in sys.modules:
        import tensorflow
        return _growing(tensorflow)
    if not _hides_info():
        return _growing(_import_tensorflow())
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            tensorflow = _import_tensorflow()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace")
            kept = [line for line in text.splitlines(keepends=True)
                    if not is_start_up_line(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
    return _growing(tensorflow)


def _import_tensorflow():
    with _declining_optional_imports():
        import tensorflow
        import keras  # noqa: F401  (its backend's import logs through the same path)
    return tensorflow


def _growing(tensorflow):
    """TensorFlow takes GPU memory as it needs it, not the whole card at its first operation:
    the CUDA rules (CuPy's pool) and the self-play net share the card with it."""
    for gpu in tensorflow.config.list_physical_devices("GPU"):
        try:
            tensorflow.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:       # the GPU was already initialised: growth is set or too late
            pass
    return tensorflow
