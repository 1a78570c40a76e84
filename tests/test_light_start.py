"""The front ends play without TensorFlow or Keras: the GTP engine, the JSON analysis engine,
evaluate.py and the GUI's net process open the shipped model as ONNX Runtime's graph of its
named weights (training/nets.py `open_net`). Each entry script runs as a user runs it, side
by side, under a driver that reports at its end which of the two modules were ever imported;
the GUI's net process is asked for an answer, then its memory map is read."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from gui.net_process import NetProcess
from training.nets import SHIPPED_MODEL, read_config

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("tensorflow", "keras")
# Runs an entry script as __main__, then names the heavy modules it imported.
DRIVER = ("import runpy, sys\n"
          "script = sys.argv[1]\n"
          "sys.argv = sys.argv[1:]\n"
          "try:\n"
          "    runpy.run_path(script, run_name='__main__')\n"
          "except SystemExit as stop:\n"
          "    code = stop.code\n"
          "else:\n"
          "    code = 0\n"
          "print('imported:', *[m for m in %r if m in sys.modules], file=sys.stderr)\n"
          "sys.exit(code)\n" % (HEAVY,))


def test_the_front_ends_answer_without_importing_tensorflow_or_keras():
    query = {"id": "q", "moves": [["B", "E5"]], "rules": "chinese", "komi": 7.5,
             "boardXSize": 9, "boardYSize": 9, "maxVisits": 8}
    scripts = {
        "gtp_engine.py": ([], "name\ngenmove b\nquit\n"),
        "katago_analysis.py": (["analysis", "-config", "/dev/null"], json.dumps(query) + "\n"),
        "evaluate.py": (["--black", f"model:{SHIPPED_MODEL}", "--white", "random",
                         "--games", "2", "--sims", "4"], ""),
    }
    started = {name: subprocess.Popen([sys.executable, "-c", DRIVER, name, *arguments],
                                      cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
               for name, (arguments, _) in scripts.items()}
    for name, process in started.items():
        out, err = process.communicate(scripts[name][1], timeout=300)
        assert process.returncode == 0, f"{name}: {err}"
        assert out.strip(), f"{name} answered nothing"
        imported = err.strip().splitlines()[-1]
        assert imported == "imported:", f"{name} {imported}"


def test_the_guis_net_process_answers_without_loading_tensorflow():
    config, _ = read_config(SHIPPED_MODEL)
    net = NetProcess(str(SHIPPED_MODEL))
    try:
        planes = np.zeros((2, config.board_size, config.board_size, config.input_planes),
                          np.float32)
        policy, value = net(planes)
        assert policy.shape == (2, config.num_actions) and value.shape == (2,)
        libraries = Path(f"/proc/{net.process.pid}/maps").read_text()
        assert "libtensorflow" not in libraries
    finally:
        net.close()
