"""The Pygame GUI in a real X server (Xvfb), started the way a user starts it: no SDL variables
in its environment, so SDL picks its X11 driver and probes OpenGL, which on Xvfb is Mesa's
software renderer (llvmpipe), the set-up where a window and TensorFlow in one process crashed
(SIGSEGV in `pygame.display.set_mode`). The test waits for the window, clicks a board point
with xdotool (real X input events), and reads the screen to see the stone and the net's reply.
It runs a second time with SDL_FRAMEBUFFER_ACCELERATION=1, a user's setting that makes SDL draw
every frame through an OpenGL renderer (the fix must not depend on SDL's defaults).

tests/test_gui_session.py and tests/test_gui_window.py test the GUI's logic with SDL's dummy
driver; this file tests only what a real display adds. Needs Xvfb and xdotool (Debian: xvfb, xdotool; build.sh installs them,
with Mesa's libgl1-mesa-dri, when it runs as root); without them it is skipped.
"""
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from architectures.quiet_tensorflow import is_start_up_line
from gui.geometry import BoardGeometry

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_RUN = ROOT / "notebooks" / "fixture_run"
XVFB, XDOTOOL = shutil.which("Xvfb"), shutil.which("xdotool")
MESA_SOFTWARE_RENDERER = Path("/usr/lib/x86_64-linux-gnu/dri/swrast_dri.so")
LIBGL = Path("/usr/lib/x86_64-linux-gnu/libGL.so.1")     # what SDL loads to probe OpenGL
N = 5                       # the fixture run's board
BOARD_PIXELS = 680          # play_network_gui.BOARD_PIXELS (not imported: it imports pygame)
C3 = (2, 2)

pytestmark = pytest.mark.skipif(
    not (XVFB and XDOTOOL and sys.platform.startswith("linux")),
    reason="needs Linux with Xvfb and xdotool (Debian: apt-get install xvfb xdotool "
           "libgl1-mesa-dri; ./build.sh installs them when run as root)")


@pytest.fixture
def x_display():
    """A fresh Xvfb on a display number it picks itself (-displayfd): ':N'."""
    read_end, write_end = os.pipe()
    server = subprocess.Popen([XVFB, "-displayfd", str(write_end), "-screen", "0", "1280x800x24",
                               "-nolisten", "tcp"], pass_fds=(write_end,),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], 20)
        number = os.read(read_end, 64).decode().strip() if ready else ""
        if not number.isdigit():
            pytest.fail(f"Xvfb did not start (exit status {server.poll()})")
        display = f":{number}"
        # The GUI's own refusal ("no display answers") must not be mistaken for a server that
        # is not up yet or has gone (a CI run under load once saw that refusal on a fresh
        # server): the test starts only once the server answers a client.
        def answers():
            try:
                return xdotool(display, "getdisplaygeometry")
            except subprocess.CalledProcessError:
                return None

        wait_for(f"an answer from Xvfb at {display}", answers, server, timeout=20, name="Xvfb")
        yield display
    finally:
        os.close(read_end)
        server.terminate()
        server.wait(timeout=10)


def xdotool(display, *args, timeout=10) -> str:
    return subprocess.run([XDOTOOL, *args], env={**os.environ, "DISPLAY": display}, check=True,
                          capture_output=True, text=True, timeout=timeout).stdout


def screen(display) -> np.ndarray:
    """The whole screen, uint8 (height, width, 3)."""
    from PIL import ImageGrab
    return np.asarray(ImageGrab.grab(xdisplay=display).convert("RGB"))


def wait_for(what, condition, process, timeout, name="the GUI"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{name} ended while waiting for {what}: {exit_description(process)}")
        found = condition()
        if found is not None and found is not False:
            return found
        time.sleep(0.2)
    pytest.fail(f"no {what} after {timeout} s")


def exit_description(process) -> str:
    code = process.returncode
    if code is not None and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


def stones(image, window_origin) -> np.ndarray:
    """int8 (N, N) read from the pixels: +1 a dark stone, -1 a light one, 0 wood, 2 anything
    else (the window not drawn yet)."""
    geometry = BoardGeometry(N, size=BOARD_PIXELS)
    offset = int(geometry.stone_radius * 0.45)      # off the grid lines and the last-move dot
    board = np.zeros((N, N), np.int8)
    for row in range(N):
        for col in range(N):
            x, y = geometry.point_to_pixel(row, col)
            red, green, blue = (int(v) for v in image[window_origin[1] + y + offset,
                                                      window_origin[0] + x + offset])
            if red + green + blue < 150:
                board[row, col] = 1
            elif min(red, green, blue) > 200:
                board[row, col] = -1
            elif not (red > green > blue and red > 150):
                board[row, col] = 2
    return board


@pytest.mark.parametrize("sdl_variables", [
    {},                                           # as a user starts it
    {"SDL_FRAMEBUFFER_ACCELERATION": "1"},        # SDL draws the window through OpenGL
], ids=["no-sdl-variables", "opengl-framebuffer"])
def test_the_gui_opens_and_plays_in_a_real_x_server(x_display, tmp_path, sdl_variables):
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("SDL_") and name != "WAYLAND_DISPLAY"}
    # oneDNN forced on, as AVX-512 CPUs have it: TensorFlow's start-up lines must not show.
    environment.update(sdl_variables, DISPLAY=x_display, TF_ENABLE_ONEDNN_OPTS="1")
    log = tmp_path / "gui.log"
    with open(log, "wb") as log_file:
        gui = subprocess.Popen([sys.executable, str(ROOT / "play_network_gui.py"),
                                "--run", str(FIXTURE_RUN), "--sims", "8",
                                "--save-dir", str(tmp_path)],
                               cwd=tmp_path, env=environment, stdin=subprocess.DEVNULL,
                               stdout=log_file, stderr=subprocess.STDOUT)
    try:
        def the_window():
            found = subprocess.run([XDOTOOL, "search", "--classname", "play_network_gui"],
                                   env={**os.environ, "DISPLAY": x_display},
                                   capture_output=True, text=True).stdout.split()
            return found[0] if found else None

        window = wait_for("window", the_window, gui, timeout=120)   # TensorFlow loads first
        shape = dict(line.split("=", 1) for line in
                     xdotool(x_display, "getwindowgeometry", "--shell", window).split())
        origin = (int(shape["X"]), int(shape["Y"]))
        assert (int(shape["WIDTH"]), int(shape["HEIGHT"])) == (1010, 680)

        # The window is drawn: an empty board of wood.
        wait_for("empty board on the screen",
                 lambda: bool((stones(screen(x_display), origin) == 0).all()), gui, timeout=20)

        # The same process shows the window and runs no TensorFlow; with Mesa installed, its
        # OpenGL (the part that crashed) was loaded too, so this test meets the crash's set-up.
        libraries = Path(f"/proc/{gui.pid}/maps").read_text()
        assert "libtensorflow" not in libraries
        if MESA_SOFTWARE_RENDERER.exists() and LIBGL.exists():
            assert str(MESA_SOFTWARE_RENDERER) in libraries

        geometry = BoardGeometry(N, size=BOARD_PIXELS)
        x, y = geometry.point_to_pixel(*C3)
        xdotool(x_display, "mousemove", "--sync", str(origin[0] + x), str(origin[1] + y))
        xdotool(x_display, "click", "1")

        def the_reply():
            board = stones(screen(x_display), origin)
            done = board[C3] == 1 and (board == -1).sum() == 1 and not (board == 2).any()
            return board if done else None

        board = wait_for("black stone on C3 and the net's white reply", the_reply, gui,
                         timeout=30)
        assert (board == 1).sum() == 1

        xdotool(x_display, "windowfocus", "--sync", window)
        xdotool(x_display, "key", "Escape")
        assert gui.wait(timeout=20) == 0, log.read_text()
    finally:
        if gui.poll() is None:
            gui.kill()
            gui.wait()
    output = log.read_text()
    assert "Traceback" not in output, output
    assert not any(is_start_up_line(line) for line in output.splitlines()), output
