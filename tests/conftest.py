"""The suite's order. Tests marked `long` (8 s or more of wall time: processes across a kill
or a signal, a Ray cluster, a process per Keras backend, TensorFlow's start-up in fresh
processes) run first. pytest-xdist deals the tests out in their order and the two workers
take more as they finish, so the long ones, dealt last, kept one worker busy 25-30 s after
the other had run out; dealt first, short tests fill in around them."""


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.get_closest_marker("long") is None)   # a stable sort
