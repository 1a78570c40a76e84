"""The README's notebook command, for real: `.venv/bin/jupyter notebook
notebooks/training_visualizations.ipynb` started from the checkout (on a free local port, with a
token, no browser), asked through its REST API for the notebook (the server's root is the notebook's folder) and its
page, and shut down
through the API. tests/test_notebook.py executes the notebook's cells (nbclient); this file
checks that the front end the README names is installed and serves it.
"""
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "notebooks/training_visualizations.ipynb"
NAME = "training_visualizations.ipynb"
JUPYTER = Path(sys.executable).parent / "jupyter"     # .venv/bin/jupyter, as the README says


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str, timeout: float = 10):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.headers.get_content_type(), response.read()


def test_the_readme_notebook_command_serves_the_notebook(tmp_path):
    pytest.importorskip("notebook", reason="Jupyter Notebook is not installed: "
                                           "pip install -r requirements.txt (build.sh does)")
    assert JUPYTER.exists(), f"{JUPYTER} is missing"
    port, token = free_port(), secrets.token_hex(16)
    environment = {**os.environ, "RUN_DIR": "notebooks/fixture_run",
                   "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),     # not the user's home
                   "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    log = tmp_path / "jupyter.log"
    with open(log, "wb") as log_file:
        server = subprocess.Popen(
            [str(JUPYTER), "notebook", NOTEBOOK, "--no-browser", "--ip=127.0.0.1",
             f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"],
            cwd=ROOT, env=environment, stdin=subprocess.DEVNULL, stdout=log_file,
            stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, f"jupyter notebook exited:\n{log.read_text()}"
            try:
                status, _, body = get(f"{base}/api/status?token={token}", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                assert time.monotonic() < deadline, f"no answer in 60 s:\n{log.read_text()}"
                time.sleep(0.3)
        assert status == 200

        # With a notebook file as its argument, the server's root is that file's folder.
        listing = json.loads(get(f"{base}/api/contents?token={token}")[2])
        assert {"training_visualizations.ipynb", "fixture_run"} <= {
            entry["name"] for entry in listing["content"]}
        status, kind, body = get(f"{base}/api/contents/{NAME}?token={token}")
        model = json.loads(body)
        assert status == 200 and model["type"] == "notebook"
        stored = json.loads((ROOT / NOTEBOOK).read_text())
        assert len(model["content"]["cells"]) == len(stored["cells"])
        assert 'os.environ.get("RUN_DIR")' in "".join(
            cell["source"] for cell in model["content"]["cells"])

        status, kind, _ = get(f"{base}/notebooks/{NAME}?token={token}")   # the page
        assert status == 200 and kind == "text/html"
        kernels = json.loads(get(f"{base}/api/kernelspecs?token={token}")[2])
        assert "python3" in kernels["kernelspecs"]

        request = urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
