"""Build the C extensions in place (``python setup.py build_ext --inplace``, run by build.sh).

Project metadata lives in pyproject.toml; only the native modules are declared here because
setuptools' declarative ext-modules table is still experimental.
"""
from setuptools import Extension, setup

# CPython's own CFLAGS carry -fwrapv, which stops gcc vectorising the board loops (4x slower
# legal masks, measured); our C never relies on signed overflow wrapping. Slots are typed
# views of one byte pool, hence -fno-strict-aliasing.
OPTIMIZE = ["-O3", "-std=c11", "-fno-wrapv", "-fno-strict-aliasing", "-Wall", "-Wextra",
            "-Wno-unused-parameter"]

EXTENSIONS = [
    # Batched Go rules on the CPU: kernels/go_rules.h run over boards with OpenMP.
    Extension(
        "kernels._go_cpu",
        sources=["kernels/go_cpu.c"],
        depends=["kernels/go_rules.h", "kernels/adaptive_threads.h"],
        extra_compile_args=OPTIMIZE + ["-fopenmp"],
        extra_link_args=["-fopenmp"],
    ),
    # Batched MCTS trees in preallocated per-game buffers, OpenMP over games.
    Extension(
        "py_util._mcts",
        sources=["py_util/mcts.c"],
        depends=["kernels/adaptive_threads.h"],
        extra_compile_args=OPTIMIZE + ["-fopenmp"],
        extra_link_args=["-fopenmp"],
    ),
]

setup(ext_modules=EXTENSIONS)
