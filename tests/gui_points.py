"""The GUI tests' board: 5x5, flat index = row * 5 + col with row 0 at the top, so C3 (the
centre) is 12, A5 (top left) is 0 and pass is 25. Used by test_gui_session.py and
test_gui_window.py.
"""

N = 5
PASS = N * N
CENTRE, A5, B5, A4, E1 = 12, 0, 1, 5, 24
