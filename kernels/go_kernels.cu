/*
 * go_kernels.cu: the GPU back end. Thin kernels, one thread per board, over the same
 * go_rules.h the CPU back end runs, so the CPU tests check every rule the GPU plays.
 *
 * Compiled at run time by CuPy (cuda_backend.py), once per layout, with the layout as
 * compile-time constants: GO_N (board size), GO_HISTORY, GO_SUPERKO, GO_MAX_MOVES.
 * Argument conventions match go_cpu.c: `pool` is num_slots * slot_bytes bytes, slot and move
 * arrays are int64, `count` is the number of boards addressed.
 */
#include "go_rules.h"

#if !defined(GO_N) || !defined(GO_HISTORY) || !defined(GO_SUPERKO) || !defined(GO_MAX_MOVES)
#error "compile with -DGO_N=... -DGO_HISTORY=... -DGO_SUPERKO=... -DGO_MAX_MOVES=..."
#endif

#define BOARD_INDEX(i)                                    \
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; \
    if (i >= count) return;                               \
    const GoLayout layout = go_layout(GO_N, GO_HISTORY, GO_SUPERKO, GO_MAX_MOVES)

#define SLOT(index) (pool + (index) * (long long)layout.slot_bytes)

extern "C" __global__ void go_reset_kernel(uint8_t *pool, const int64_t *slots, int count)
{
    BOARD_INDEX(i);
    go_reset(&layout, SLOT(slots[i]));
}

extern "C" __global__ void go_seed_kernel(uint8_t *pool, const int64_t *slots, uint64_t seed, int count)
{
    BOARD_INDEX(i);
    go_seed(SLOT(slots[i]), seed ^ go_mix64((uint64_t)slots[i]));
}

/* status[i] = why moves[i] is illegal at slot[i], or GO_LEGAL. */
extern "C" __global__ void go_status_kernel(uint8_t *pool, const int64_t *slots, const int64_t *moves,
                                            int32_t *status, int count)
{
    BOARD_INDEX(i);
    status[i] = go_move_status(&layout, SLOT(slots[i]), moves[i]);
}

extern "C" __global__ void go_play_kernel(uint8_t *pool, const int64_t *slots, const int64_t *moves, int count)
{
    BOARD_INDEX(i);
    go_play(&layout, SLOT(slots[i]), moves[i]);
}

extern "C" __global__ void go_copy_play_kernel(uint8_t *pool, const int64_t *src, const int64_t *dst,
                                               const int64_t *moves, int count)
{
    BOARD_INDEX(i);
    go_copy_slot(&layout, SLOT(dst[i]), SLOT(src[i]));
    go_play(&layout, SLOT(dst[i]), moves[i]);
}

extern "C" __global__ void go_copy_kernel(uint8_t *pool, const int64_t *src, const int64_t *dst, int count)
{
    BOARD_INDEX(i);
    go_copy_slot(&layout, SLOT(dst[i]), SLOT(src[i]));
}

extern "C" __global__ void go_legal_kernel(uint8_t *pool, const int64_t *slots, uint8_t *out, int count)
{
    BOARD_INDEX(i);
    go_legal_mask(&layout, SLOT(slots[i]), out + i * (GO_N * GO_N + 1));
}

extern "C" __global__ void go_sensible_kernel(uint8_t *pool, const int64_t *slots, uint8_t *out, int count)
{
    BOARD_INDEX(i);
    go_sensible_mask(&layout, SLOT(slots[i]), out + i * (GO_N * GO_N + 1));
}

extern "C" __global__ void go_board_kernel(uint8_t *pool, const int64_t *slots, int8_t *out, int count)
{
    BOARD_INDEX(i);
    go_board(&layout, SLOT(slots[i]), out + i * GO_N * GO_N);
}

extern "C" __global__ void go_area_kernel(uint8_t *pool, const int64_t *slots, int64_t *out, int count)
{
    BOARD_INDEX(i);
    out[i] = go_area_score(&layout, SLOT(slots[i]));
}

extern "C" __global__ void go_random_kernel(uint8_t *pool, const int64_t *slots, int64_t *out,
                                            int include_pass, int count)
{
    BOARD_INDEX(i);
    out[i] = go_random_move(&layout, SLOT(slots[i]), include_pass);
}

extern "C" __global__ void go_random_from_mask_kernel(uint8_t *pool, const int64_t *slots, const uint8_t *legal,
                                                      int64_t *out, int include_pass, int count)
{
    BOARD_INDEX(i);
    out[i] = go_random_from_mask(&layout, SLOT(slots[i]), legal + i * (GO_N * GO_N + 1), include_pass);
}

extern "C" __global__ void go_features_kernel(uint8_t *pool, const int64_t *slots, int history, int extra,
                                              int komi, float *out, int count)
{
    BOARD_INDEX(i);
    const int channels = go_feature_channels(history, extra, komi);
    go_features(&layout, SLOT(slots[i]), history, extra, komi, out + i * GO_N * GO_N * channels);
}

/* status[i]: 0 loaded, 1 a group without liberties, 2 a bad stone value (see go_set_board). */
extern "C" __global__ void go_set_board_kernel(uint8_t *pool, const int64_t *slots, const int8_t *stones,
                                               const int8_t *to_play, int32_t *status, int count)
{
    BOARD_INDEX(i);
    status[i] = go_set_board(&layout, SLOT(slots[i]), stones + i * GO_N * GO_N,
                             to_play[i] == 1 ? GO_BLACK : GO_WHITE);
    if (status[i] != 0) go_reset(&layout, SLOT(slots[i]));
}

/* scores[i] = go_playout from slots[i]; scratch holds count slots, one per board. */
extern "C" __global__ void go_playout_kernel(uint8_t *pool, const int64_t *slots, uint8_t *scratch,
                                             int64_t *scores, int count)
{
    BOARD_INDEX(i);
    scores[i] = go_playout(&layout, SLOT(slots[i]), scratch + i * (long long)layout.slot_bytes);
}

/* A search step's leaves in one launch (games/device_step.py). Row i takes slot dst[i] as it
 * is (mode 0), as a copy of src[i] (mode 1: a root taken from its game's slot), or as that copy
 * with moves[i] played (mode 2: a new leaf; the caller vouches that the move is legal and the
 * destinations distinct, as for copy_play_unchecked). Then it writes what evaluating dst[i]
 * needs: its input planes (go_features), its move mask (go_sensible_mask when `sensible`,
 * else go_legal_mask), its game-over flag, and for a finished game the result for the side to
 * move there (+1 won, -1 lost, 0 drawn: area score minus the slot's komi), 0 for a game that
 * goes on. */
extern "C" __global__ void go_leaf_kernel(uint8_t *pool, const int64_t *src, const int64_t *dst,
                                          const int64_t *moves, int mode, int history, int extra,
                                          int sensible, int komi, float *planes, uint8_t *mask,
                                          uint8_t *over, float *finished, int count)
{
    BOARD_INDEX(i);
    uint8_t *base = SLOT(dst[i]);
    if (mode >= 1) go_copy_slot(&layout, base, SLOT(src[i]));
    if (mode == 2) go_play(&layout, base, moves[i]);
    if (sensible) go_sensible_mask(&layout, base, mask + i * (GO_N * GO_N + 1));
    else go_legal_mask(&layout, base, mask + i * (GO_N * GO_N + 1));
    const GoHeader *h = (const GoHeader *)base;
    over[i] = h->over ? 1 : 0;
    float result = 0.0f;
    if (h->over) {
        const float margin = (float)go_area_score(&layout, base) - h->komi;
        const float black = margin > 0.0f ? 1.0f : (margin < 0.0f ? -1.0f : 0.0f);
        result = h->to_play == GO_BLACK ? black : -black;
    }
    finished[i] = result;
    const int channels = go_feature_channels(history, extra, komi);
    go_features(&layout, base, history, extra, komi, planes + i * (long long)(GO_N * GO_N * channels));
}

/* The evaluation of a search step's leaves, in place in the block the host reads back (layout
 * in games/device_step.py): priors[i] = softmax(policy[i]) when `logits`, else policy[i] as
 * given (probabilities); values[i] = finished[i] where the game is over (over[i], written by
 * go_leaf_kernel into the same block), else value[i]. */
extern "C" __global__ void go_pack_kernel(uint8_t *pool, const float *policy, const float *value,
                                          const float *finished, int logits, uint8_t *block,
                                          int count)
{
    BOARD_INDEX(i);
    const int actions = GO_N * GO_N + 1;
    float *priors = (float *)block + i * (long long)actions;
    float *values = (float *)block + count * (long long)actions;
    const uint8_t *over = block + 5 * count * (long long)actions + 4 * (long long)count;
    const float *row = policy + i * (long long)actions;
    if (logits) {
        float top = row[0], total = 0.0f;
        for (int a = 1; a < actions; a++) top = fmaxf(top, row[a]);
        for (int a = 0; a < actions; a++) { priors[a] = __expf(row[a] - top); total += priors[a]; }
        const float scale = 1.0f / total;
        for (int a = 0; a < actions; a++) priors[a] *= scale;
    } else {
        for (int a = 0; a < actions; a++) priors[a] = row[a];
    }
    values[i] = over[i] ? finished[i] : value[i];
}
