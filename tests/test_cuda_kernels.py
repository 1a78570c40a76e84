"""The GPU back end: its sources compile with nvcc wherever nvcc is, and where a GPU is it
agrees with the CPU back end bit for bit on random games and in self-play, and a tiny training
iteration runs with --backend cuda (skipped, not faked, without one)."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kernels import GoBatch
from kernels.go_batch import _cuda_available
from training.config import PRESETS

NEEDS_CUDA = pytest.mark.skipif(not _cuda_available()[0],
                                reason="no CUDA device (CuPy and a GPU are needed)")

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"
NVCC = shutil.which("nvcc")


# Every rules variant for the H100/H200's architecture; the A100's once: the source has no
# architecture-dependent code, so one variant shows that it compiles there too. The variants
# differ in what the preprocessor and the front end see. The optimizer, 9.2 s of a 9.8 s
# 19x19 compile, gets no new code from them: one variant (9x9 with superko, the shipped
# rules) is optimized as the GPU's own compile is, and the others skip it (-Xcicc -O0).
@pytest.mark.skipif(NVCC is None, reason="nvcc is not on this machine")
@pytest.mark.parametrize("arch,board_size,history,superko,optimized",
                         [("sm_90", 2, 0, 0, False), ("sm_90", 9, 7, 0, False),
                          ("sm_90", 9, 7, 1, True), ("sm_90", 19, 7, 0, False),
                          ("sm_90", 19, 7, 1, False), ("sm_80", 9, 7, 1, False)])
def test_cuda_sources_compile_with_nvcc(tmp_path, arch, board_size, history, superko, optimized):
    output = tmp_path / "go_kernels.ptx"
    command = [NVCC, "-ptx", f"-arch={arch}", "--std=c++14", f"-DGO_N={board_size}",
               f"-DGO_HISTORY={history}", f"-DGO_SUPERKO={superko}",
               f"-DGO_MAX_MOVES={2 * board_size * board_size}", f"-I{KERNEL_DIR}",
               *([] if optimized else ["-Xcicc", "-O0"]),
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


@NEEDS_CUDA
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
            # Drawn on both: a draw moves the parents' generators on, and the children copy them.
            child_moves = cpu.random_moves()
            np.testing.assert_array_equal(child_moves, gpu.to_numpy(gpu.random_moves()))
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


@NEEDS_CUDA
@pytest.mark.parametrize("superko", [False, True])
@pytest.mark.parametrize("board_size", [9, 19])
def test_cpu_and_cuda_agree_over_10000_random_games(board_size, superko):
    """10,000 random games in lockstep to their end: every ply the boards, legal masks,
    captures, side to move and game-over flags agree, the input planes of a rotating window
    of 500 games agree, the scores every 16 plies and at the end."""
    games, window = 10_000, 500
    cpu = GoBatch(games, board_size, backend="cpu", superko=superko, seed=11)
    gpu = GoBatch(games, board_size, backend="cuda", superko=superko, seed=11)
    ply = 0
    while True:
        over = cpu.is_over()
        np.testing.assert_array_equal(over, gpu.to_numpy(gpu.is_over()))
        if over.all():
            break
        live = np.flatnonzero(~over)
        legal = cpu.legal_moves(live)
        np.testing.assert_array_equal(legal, gpu.to_numpy(gpu.legal_moves(live)))
        include_pass = ply % 9 == 0
        moves = cpu.random_moves(live, include_pass=include_pass, legal=legal)
        np.testing.assert_array_equal(
            moves, gpu.to_numpy(gpu.random_moves(live, include_pass=include_pass)))
        cpu.play(moves, slots=live)
        gpu.play(gpu.xp.asarray(moves), slots=live)
        for name in ("board", "captures", "to_play", "move_count"):
            np.testing.assert_array_equal(getattr(cpu, name)(), gpu.to_numpy(getattr(gpu, name)()),
                                          err_msg=f"{name} at ply {ply}")
        shown = (np.arange(window) + ply * window) % games
        np.testing.assert_array_equal(cpu.features(slots=shown),
                                      gpu.to_numpy(gpu.features(slots=shown)), err_msg=f"ply {ply}")
        if ply % 16 == 0:
            np.testing.assert_array_equal(cpu.score(), gpu.to_numpy(gpu.score()))
        ply += 1
    np.testing.assert_array_equal(cpu.score(), gpu.to_numpy(gpu.score()))
    np.testing.assert_array_equal(cpu.position_hash(), gpu.to_numpy(gpu.position_hash()))
    assert ply >= board_size * board_size // 2  # the games were played, not ended at once


def _host_evaluator(board_size):
    """A deterministic stand-in for a net, computed on the host from the planes: both back
    ends must then search and play identically."""
    def evaluate(planes):
        planes = planes if isinstance(planes, np.ndarray) else planes.get()
        rows = len(planes)
        own = planes[..., 0].reshape(rows, -1)
        opponent = planes[..., 1].reshape(rows, -1)
        logits = np.concatenate([opponent - 0.5 * own, np.zeros((rows, 1))], axis=1)
        policy = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        value = np.tanh((own - opponent).mean(axis=1) * board_size)
        if planes.shape[-1] % 2:          # the komi plane (komi_input): the value reads it
            value = np.tanh(value + planes[:, 0, 0, -1])
        return policy.astype(np.float32), value.astype(np.float32)
    return evaluate


@NEEDS_CUDA
@pytest.mark.parametrize("board_size,superko,komi", [(9, True, False), (19, False, False),
                                                     (9, False, True)])
def test_self_play_is_the_same_on_both_back_ends(board_size, superko, komi):
    """One code path: SelfPlay over the CUDA rules (one upload and one download per search
    step) records exactly the positions, policy targets and results of the CPU rules; with
    the komi plane, drawn komis and handicap games too (each slot's komi in the leaf kernel)."""
    from games.selfplay import SelfPlay
    config = PRESETS["tiny"].overridden(board_size=board_size, superko=superko, num_games=16,
                                        simulations=8, history=3)
    if komi:
        config = config.overridden(komi_input=True, komi_spread=3.0, komi_wide_share=0.3,
                                   handicap_share=0.3)
    batches = [SelfPlay(config.overridden(backend=backend), _host_evaluator(board_size),
                        seed=5).play(4 * board_size * board_size)
               for backend in ("cpu", "cuda")]
    cpu, gpu = batches
    for name in ("planes", "policy", "value", "komi"):
        np.testing.assert_array_equal(getattr(cpu, name), getattr(gpu, name), err_msg=name)
    assert [g.moves for g in cpu.games] == [g.moves for g in gpu.games]
    assert [(g.komi, g.handicap) for g in cpu.games] == [(g.komi, g.handicap) for g in gpu.games]
    assert [g.score for g in cpu.games] == [g.score for g in gpu.games]


@NEEDS_CUDA
def test_a_tiny_training_iteration_runs_with_backend_cuda(tmp_path):
    """bp_tree end to end on the CUDA rules, the net wherever TensorFlow runs (its CUDA build
    from ./build.sh --cuda: the planes reach it through DLPack)."""
    pytest.importorskip("tensorflow", reason="TensorFlow is not installed on this machine")
    import contextlib
    import io
    import bp_tree
    err = io.StringIO()
    run = tmp_path / "cuda"
    with contextlib.redirect_stderr(err):
        code = bp_tree.main(["--run", str(run), "--preset", "tiny", "--iterations", "1",
                             "--backend", "cuda", "--positions_per_iteration", "64",
                             "--eval_games_random", "4"])
    assert code == 0, err.getvalue()
    assert "rules: CUDA kernels on" in err.getvalue()
    assert (run / "checkpoints" / "ckpt_000001.npz").is_file()
    with np.load(run / "replay" / "chunk_000001.npz") as chunk:
        assert len(chunk["value"]) >= 64 and set(np.unique(chunk["planes"])) <= {0, 1}
