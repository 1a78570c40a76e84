"""The GPU back end: its sources compile with nvcc wherever nvcc is, and where a GPU is it
agrees with the CPU back end bit for bit on random games (skipped, not faked, without one)."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kernels import GoBatch
from kernels.go_batch import _cuda_available

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"
NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on this machine")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("board_size,history,superko", [(2, 0, 0), (9, 7, 0), (19, 3, 1)])
def test_cuda_sources_compile_with_nvcc(tmp_path, arch, board_size, history, superko):
    output = tmp_path / "go_kernels.ptx"
    command = [NVCC, "-ptx", f"-arch={arch}", "--std=c++14", f"-DGO_N={board_size}",
               f"-DGO_HISTORY={history}", f"-DGO_SUPERKO={superko}",
               f"-DGO_MAX_MOVES={2 * board_size * board_size}", f"-I{KERNEL_DIR}",
               str(KERNEL_DIR / "go_kernels.cu"), "-o", str(output)]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    ptx = output.read_text()
    for kernel in ("go_play_kernel", "go_legal_kernel", "go_copy_play_kernel", "go_features_kernel",
                   "go_playout_kernel"):
        assert f".entry {kernel}" in ptx


def test_without_a_gpu_cuda_is_refused_and_auto_falls_back():
    available, why = _cuda_available()
    if available:
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(RuntimeError, match="CUDA"):
        GoBatch(batch_size=2, board_size=9, backend="cuda")
    assert GoBatch(batch_size=2, board_size=9, backend="auto").backend_name == "cpu"


@pytest.mark.skipif(not _cuda_available()[0], reason="no CUDA device (CuPy and a GPU are needed)")
@pytest.mark.parametrize("board_size,superko", [(5, False), (9, False), (9, True), (19, False)])
def test_cpu_and_cuda_agree_on_random_games(board_size, superko):
    batch = 64
    cpu = GoBatch(batch, board_size, backend="cpu", superko=superko, seed=7, num_slots=2 * batch)
    gpu = GoBatch(batch, board_size, backend="cuda", superko=superko, seed=7, num_slots=2 * batch)
    rng = np.random.default_rng(board_size)
    for ply in range(3 * board_size * board_size):
        cpu_legal = cpu.legal_moves()
        np.testing.assert_array_equal(cpu_legal, gpu.to_numpy(gpu.legal_moves()))
        moves = cpu.random_moves(include_pass=ply % 7 == 0)
        np.testing.assert_array_equal(moves, gpu.to_numpy(gpu.random_moves(include_pass=ply % 7 == 0)))
        cpu.play(moves)
        gpu.play(gpu.xp.asarray(moves))
        for name in ("board", "to_play", "captures", "score", "is_over", "move_count"):
            np.testing.assert_array_equal(getattr(cpu, name)(), gpu.to_numpy(getattr(gpu, name)()), err_msg=name)
        np.testing.assert_array_equal(cpu.features(), gpu.to_numpy(gpu.features()))
        np.testing.assert_array_equal(cpu.position_hash(), gpu.to_numpy(gpu.position_hash()))
        if ply % 5 == 0:
            children = np.arange(batch, 2 * batch)
            child_moves = cpu.random_moves()
            cpu.copy_play(np.arange(batch), children, child_moves)
            gpu.copy_play(np.arange(batch), children, gpu.xp.asarray(child_moves))
            np.testing.assert_array_equal(cpu.board(children), gpu.to_numpy(gpu.board(children)))
            # Playouts draw the same moves from the same generators, so they end alike.
            np.testing.assert_array_equal(cpu.playouts(children),
                                          gpu.to_numpy(gpu.playouts(children)))
        over = cpu.is_over()
        if rng.random() < 0.5 and over.any():
            cpu.reset(over)
            gpu.reset(gpu.xp.asarray(over))
    # The raw slot bytes of the batch agree too (the layout is shared, byte for byte).
    np.testing.assert_array_equal(cpu.save().data, gpu.to_numpy(gpu.save().data))
