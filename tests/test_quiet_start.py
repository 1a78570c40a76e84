"""No entry script opens with TensorFlow's own log lines: with oneDNN's custom operations forced
on (TF_ENABLE_ONEDNN_OPTS=1, what AVX-512 CPUs get by default), TensorFlow 2.21 prints "oneDNN
custom operations are on" and absl's "All log messages before absl::InitializeLog()" at import,
whatever TF_CPP_MIN_LOG_LEVEL says. The training loop (./run.sh), the GTP engine and the JSON
analysis engine are started as a user starts them, side by side (each waits on its imports),
and everything they print is read. (The GUI is checked in tests/test_gui_display.py, in a real
X window.)"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from architectures.quiet_tensorflow import is_start_up_line

ROOT = Path(__file__).resolve().parent.parent
ONEDNN_ON = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1"}


def start(command: list[str]) -> subprocess.Popen:
    """Started now; its input is given when its output is read (`communicate`), so all of
    them import side by side."""
    return subprocess.Popen(command, cwd=ROOT, env=ONEDNN_ON, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.long
def test_no_entry_script_prints_tensorflows_start_up_lines(tmp_path):
    python = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").is_dir() else sys.executable
    query = {"id": "q", "moves": [["B", "E5"]], "rules": "chinese", "komi": 7.5,
             "boardXSize": 9, "boardYSize": 9, "maxVisits": 8}
    processes = {
        "run.sh": (start([str(ROOT / "run.sh"), "--run", str(tmp_path / "run"), "--preset",
                          "tiny", "--iterations", "1"]), ""),
        "gtp_engine.py": (start([python, "gtp_engine.py"]), "name\ngenmove b\nquit\n"),
        "katago_analysis.py": (start([python, "katago_analysis.py", "analysis", "-config",
                                      "/dev/null"]), json.dumps(query) + "\n"),
    }
    outputs = {}
    for name, (process, given) in processes.items():
        out, err = process.communicate(given, timeout=600)
        assert process.returncode == 0, f"{name}: {err}"
        noisy = [line for line in (out + err).splitlines() if is_start_up_line(line)]
        assert not noisy, f"{name} printed TensorFlow's start-up lines: {noisy}"
        outputs[name] = out
    # Each did its work: the engine named itself and played, the analysis answered, the
    # loop completed its iteration.
    answers = [line for line in outputs["gtp_engine.py"].splitlines() if line.startswith("=")]
    assert len(answers) == 3 and answers[1] != "="
    assert json.loads(outputs["katago_analysis.py"].splitlines()[0])["id"] == "q"
    assert (tmp_path / "run" / "checkpoints" / "ckpt_000001.npz").is_file()


@pytest.mark.long
def test_tensorflow_prints_the_lines_when_info_is_asked_for_and_loads_without_declined_imports():
    """With oneDNN forced on and INFO asked for (TF_CPP_MIN_LOG_LEVEL=0), TensorFlow's import
    prints the start-up lines and they are passed on: the check above can fail on this CPU.
    TensorFlow Lite's JAX, Keras' matplotlib.pyplot, TensorFlow's Keras 2 scipy.sparse and
    Keras' IPython are not loaded with TensorFlow (2.1 s of every start), and each imports as
    usual afterwards."""
    probe = ("import sys\n"
             "from architectures.quiet_tensorflow import load_keras\n"
             "keras = load_keras()\n"
             "print(sorted(m for m in ('jax', 'matplotlib', 'scipy', 'IPython')\n"
             "             if m in sys.modules))\n"
             "import jax.numpy, matplotlib.pyplot, scipy.sparse, IPython\n"
             "print(float(jax.numpy.ones(2).sum()), keras.ops.sum(keras.ops.ones(3)).numpy(),\n"
             "      scipy.sparse.eye(2).nnz, callable(IPython.get_ipython))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, timeout=300,
                          env={**ONEDNN_ON, "TF_CPP_MIN_LOG_LEVEL": "0",
                               "KERAS_BACKEND": "tensorflow", "MPLBACKEND": "Agg"})
    assert done.returncode == 0, done.stderr
    assert any(is_start_up_line(line) for line in done.stderr.splitlines()), done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "2.0 3.0 2 True"], done.stdout
