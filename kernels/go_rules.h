/*
 * go_rules.h: the one source of the Go rules, compiled by a C compiler for the CPU back end
 * (go_cpu.c) and by CUDA for the GPU back end (go_kernels.cu). Every function works on one
 * position ("slot") inside a pool of fixed-size slots; the back ends only decide which boards
 * run where.
 *
 * Rules: captures; suicide illegal; simple ko; optional positional superko; the game ends
 * after two consecutive passes or at max_moves; Tromp-Taylor area scoring (komi is applied by
 * the caller, from the slot's header: each position carries its game's komi). On a finished board only pass is legal, and it changes nothing.
 *
 * Board representation. A board of size n is stored padded: stride W = n + 1, one border
 * column shared by the left and right edges (the cell after the last column of row r is the
 * cell before the first column of row r + 1), one border row above and below:
 *
 *     padded index of (row, col) = (row + 1) * W + col,     padded points P = (n + 2) * W
 *
 * so the four neighbours of any board point are q - W, q - 1, q + 1, q + W with no bounds
 * test. Flat moves as the API sees them are row * n + col, pass = n * n.
 *
 * Groups. Every stone carries the padded index of its group's representative (group[]), and
 * the stones of a group form a circular list (next[]). Per representative the pool keeps the
 * stone count and pseudo-liberties: every (stone, empty neighbour) adjacency counts once,
 * with the sum and sum of squares of those empty points. A group has exactly one distinct
 * liberty iff all its pseudo-liberties are the same point, i.e. libs * sum_sq == sum * sum;
 * this gives O(1) atari tests, which is all that legality, capture and ko need.
 *
 * Slot layout (byte offsets in GoLayout, every array 8-byte aligned, slot_bytes % 8 == 0):
 *
 *     GoHeader     header               see below
 *     uint8_t      stone[P]             EMPTY 0, BLACK 1, WHITE 2, BORDER 3
 *     int16_t      group[P]             representative of the stone's group (stones only)
 *     int16_t      next[P]              next stone of the same group (circular)
 *     int16_t      size[P]              at a representative: number of stones
 *     int16_t      libs[P]              at a representative: pseudo-liberty count
 *     int32_t      lib_sum[P]           at a representative: sum of pseudo-liberty indices
 *     int32_t      lib_sum_sq[P]        at a representative: sum of their squares
 *     uint8_t      history[H][P]        stone[] before move m is history[m % H]; H = history
 *     uint64_t     hashes[M + 1]        superko only: Zobrist hash after m moves, m = 0..M
 *
 * Bounds: P <= 420 and 4 * 361 pseudo-liberties of index <= 420 keep lib_sum_sq below 2^31.
 */
#ifndef GO_RULES_H
#define GO_RULES_H

#if defined(__CUDACC__)
#define GO_FN static __host__ __device__ inline
#else
#define GO_FN static inline
#endif

#if defined(__CUDACC_RTC__)
/* NVRTC has no system headers. */
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

enum { GO_EMPTY = 0, GO_BLACK = 1, GO_WHITE = 2, GO_BORDER = 3 };
enum { GO_MIN_SIZE = 2, GO_MAX_SIZE = 19 };
enum { GO_MAX_PADDED = (GO_MAX_SIZE + 2) * (GO_MAX_SIZE + 1) };

/* Why a move is illegal; GO_LEGAL when it is not. */
enum {
    GO_LEGAL = 0,
    GO_ILLEGAL_GAME_OVER = 1,
    GO_ILLEGAL_OCCUPIED = 2,
    GO_ILLEGAL_KO = 3,
    GO_ILLEGAL_SUICIDE = 4,
    GO_ILLEGAL_SUPERKO = 5,
    GO_ILLEGAL_OUT_OF_RANGE = 6,
};

typedef struct {
    uint64_t hash;         /* Zobrist hash of the stones (positional) */
    uint64_t rng;          /* state of this slot's random move generator */
    int32_t move_count;    /* moves played, passes included */
    int32_t captures[2];   /* stones captured by black, by white */
    float komi;            /* the game's komi, set by the caller; reset and set_board keep it */
    int16_t ko_point;      /* padded point the side to move may not play, or -1 */
    int8_t to_play;        /* GO_BLACK or GO_WHITE */
    int8_t passes;         /* consecutive passes just played */
    int8_t over;           /* 1 once the game has ended */
    int8_t unused_[3];
} GoHeader;

typedef struct {
    int n, stride, padded, history, superko, max_moves;
    int off_stone, off_group, off_next, off_size, off_libs, off_lib_sum, off_lib_sum_sq;
    int off_history, off_hashes, slot_bytes;
} GoLayout;

GO_FN int go_align8(int bytes) { return (bytes + 7) & ~7; }

GO_FN GoLayout go_layout(int n, int history, int superko, int max_moves)
{
    GoLayout L;
    int offset = go_align8((int)sizeof(GoHeader));
    L.n = n;
    L.stride = n + 1;
    L.padded = (n + 2) * (n + 1);
    L.history = history;
    L.superko = superko;
    L.max_moves = max_moves;
    L.off_stone = offset;       offset += go_align8(L.padded);
    L.off_group = offset;       offset += go_align8(2 * L.padded);
    L.off_next = offset;        offset += go_align8(2 * L.padded);
    L.off_size = offset;        offset += go_align8(2 * L.padded);
    L.off_libs = offset;        offset += go_align8(2 * L.padded);
    L.off_lib_sum = offset;     offset += go_align8(4 * L.padded);
    L.off_lib_sum_sq = offset;  offset += go_align8(4 * L.padded);
    L.off_history = offset;     offset += history * go_align8(L.padded);
    L.off_hashes = offset;      offset += superko ? 8 * (max_moves + 1) : 0;
    L.slot_bytes = offset;
    return L;
}

/* Typed views of one slot. */
typedef struct {
    GoHeader *h;
    uint8_t *stone;
    int16_t *group, *next, *size, *libs;
    int32_t *lib_sum, *lib_sum_sq;
    uint8_t *history;
    uint64_t *hashes;
} GoSlot;

GO_FN GoSlot go_slot(const GoLayout *L, uint8_t *base)
{
    GoSlot s;
    s.h = (GoHeader *)base;
    s.stone = base + L->off_stone;
    s.group = (int16_t *)(base + L->off_group);
    s.next = (int16_t *)(base + L->off_next);
    s.size = (int16_t *)(base + L->off_size);
    s.libs = (int16_t *)(base + L->off_libs);
    s.lib_sum = (int32_t *)(base + L->off_lib_sum);
    s.lib_sum_sq = (int32_t *)(base + L->off_lib_sum_sq);
    s.history = base + L->off_history;
    s.hashes = (uint64_t *)(base + L->off_hashes);
    return s;
}

GO_FN int go_padded(const GoLayout *L, int flat) { return (flat / L->n + 1) * L->stride + flat % L->n; }
GO_FN int go_flat(const GoLayout *L, int padded) { return (padded / L->stride - 1) * L->n + padded % L->stride; }

/* splitmix64: Zobrist keys and the random generator (counter-based keys need no table,
 * so host and device agree without sharing memory). */
GO_FN uint64_t go_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

GO_FN uint64_t go_zobrist(int point, int color) { return go_mix64(((uint64_t)point << 2) | (uint64_t)color); }

GO_FN uint64_t go_next_random(GoHeader *h)
{
    h->rng += 0x9E3779B97F4A7C15ull;
    return go_mix64(h->rng);
}

/* Uniform in [0, bound) by multiply-shift; bound <= 362 so the bias is below 2^-22. */
GO_FN int go_random_below(GoHeader *h, int bound)
{
    return (int)(((go_next_random(h) >> 32) * (uint64_t)bound) >> 32);
}

GO_FN void go_copy_slot(const GoLayout *L, uint8_t *dst, const uint8_t *src)
{
    const uint64_t *from = (const uint64_t *)src;
    uint64_t *to = (uint64_t *)dst;
    for (int i = 0; i < L->slot_bytes / 8; i++) to[i] = from[i];
}

GO_FN void go_seed(uint8_t *base, uint64_t seed)
{
    ((GoHeader *)base)->rng = go_mix64(seed);
}

/* Empty board, black to move; keeps the slot's random generator running and its komi. */
GO_FN void go_reset(const GoLayout *L, uint8_t *base)
{
    GoSlot s = go_slot(L, base);
    const int n = L->n, W = L->stride;
    s.h->hash = 0;
    s.h->move_count = 0;
    s.h->captures[0] = s.h->captures[1] = 0;
    s.h->ko_point = -1;
    s.h->to_play = GO_BLACK;
    s.h->passes = 0;
    s.h->over = 0;
    for (int q = 0; q < L->padded; q++) {
        int row = q / W - 1, col = q % W;
        s.stone[q] = (row >= 0 && row < n && col < n) ? GO_EMPTY : GO_BORDER;
    }
    if (L->superko) s.hashes[0] = 0;
}

GO_FN int go_in_atari(const GoSlot *s, int rep)
{
    return (int64_t)s->libs[rep] * s->lib_sum_sq[rep] == (int64_t)s->lib_sum[rep] * s->lib_sum[rep];
}

GO_FN void go_add_liberty(GoSlot *s, int rep, int point)
{
    s->libs[rep] += 1;
    s->lib_sum[rep] += point;
    s->lib_sum_sq[rep] += point * point;
}

GO_FN void go_remove_liberty(GoSlot *s, int rep, int point)
{
    s->libs[rep] -= 1;
    s->lib_sum[rep] -= point;
    s->lib_sum_sq[rep] -= point * point;
}

/* The position's hash after `color` plays at empty `q`, captures included. */
GO_FN uint64_t go_hash_after(const GoLayout *L, const GoSlot *s, int q, int color)
{
    const int W = L->stride, opponent = 3 - color;
    const int neighbours[4] = {q - W, q - 1, q + 1, q + W};
    int captured[4];
    int num_captured = 0;
    uint64_t hash = s->h->hash ^ go_zobrist(q, color);
    for (int k = 0; k < 4; k++) {
        int nb = neighbours[k];
        if (s->stone[nb] != opponent) continue;
        int rep = s->group[nb], seen = 0;
        for (int j = 0; j < num_captured; j++) seen |= captured[j] == rep;
        if (seen || !go_in_atari(s, rep)) continue;
        captured[num_captured++] = rep;
        int stone = rep;
        do {
            hash ^= go_zobrist(stone, opponent);
            stone = s->next[stone];
        } while (stone != rep);
    }
    return hash;
}

GO_FN int go_repeats_position(const GoLayout *L, const GoSlot *s, int q, int color)
{
    uint64_t hash = go_hash_after(L, s, q, color);
    for (int m = 0; m <= s->h->move_count; m++)
        if (s->hashes[m] == hash) return 1;
    return 0;
}

/* Legality of `color` playing at padded point q; the game is assumed not over. */
GO_FN int go_point_status(const GoLayout *L, const GoSlot *s, int q, int color)
{
    const int W = L->stride, opponent = 3 - color;
    if (s->stone[q] != GO_EMPTY) return GO_ILLEGAL_OCCUPIED;
    if (q == s->h->ko_point) return GO_ILLEGAL_KO;
    const int neighbours[4] = {q - W, q - 1, q + 1, q + W};
    int breathes = 0;
    for (int k = 0; k < 4; k++) {
        int nb = neighbours[k], v = s->stone[nb];
        /* An own group not in atari keeps another liberty; an opponent group in atari dies. */
        if (v == GO_EMPTY || (v == color && !go_in_atari(s, s->group[nb])) ||
            (v == opponent && go_in_atari(s, s->group[nb]))) {
            breathes = 1;
            break;
        }
    }
    if (!breathes) return GO_ILLEGAL_SUICIDE;
    if (L->superko && go_repeats_position(L, s, q, color)) return GO_ILLEGAL_SUPERKO;
    return GO_LEGAL;
}

GO_FN int go_move_status(const GoLayout *L, uint8_t *base, int64_t move)
{
    GoSlot s = go_slot(L, base);
    const int64_t pass = (int64_t)L->n * L->n;
    if (move < 0 || move > pass) return GO_ILLEGAL_OUT_OF_RANGE;
    if (move == pass) return GO_LEGAL;
    if (s.h->over) return GO_ILLEGAL_GAME_OVER;
    return go_point_status(L, &s, go_padded(L, (int)move), s.h->to_play);
}

/* Merge group `small` into group `big` (both representatives, big has at least as many stones). */
GO_FN void go_merge(GoSlot *s, int big, int small)
{
    int stone = small;
    do {
        s->group[stone] = (int16_t)big;
        stone = s->next[stone];
    } while (stone != small);
    int16_t after_big = s->next[big];
    s->next[big] = s->next[small];
    s->next[small] = after_big;
    s->size[big] += s->size[small];
    s->libs[big] += s->libs[small];
    s->lib_sum[big] += s->lib_sum[small];
    s->lib_sum_sq[big] += s->lib_sum_sq[small];
}

/* Put a `color` stone on empty q and join it with its friends; no captures. */
GO_FN void go_add_stone(const GoLayout *L, GoSlot *s, int q, int color)
{
    const int W = L->stride;
    const int neighbours[4] = {q - W, q - 1, q + 1, q + W};
    s->stone[q] = (uint8_t)color;
    s->group[q] = (int16_t)q;
    s->next[q] = (int16_t)q;
    s->size[q] = 1;
    s->libs[q] = 0;
    s->lib_sum[q] = 0;
    s->lib_sum_sq[q] = 0;
    s->h->hash ^= go_zobrist(q, color);
    for (int k = 0; k < 4; k++) {
        int nb = neighbours[k], v = s->stone[nb];
        if (v == GO_EMPTY) go_add_liberty(s, q, nb);
        else if (v == GO_BLACK || v == GO_WHITE) go_remove_liberty(s, s->group[nb], q);
    }
    for (int k = 0; k < 4; k++) {
        int nb = neighbours[k];
        if (s->stone[nb] != color) continue;
        int mine = s->group[q], theirs = s->group[nb];
        if (mine == theirs) continue;
        if (s->size[mine] >= s->size[theirs]) go_merge(s, mine, theirs);
        else go_merge(s, theirs, mine);
    }
}

/* Take group `rep` off the board; returns the number of stones removed. */
GO_FN int go_remove_group(const GoLayout *L, GoSlot *s, int rep)
{
    const int W = L->stride;
    const int color = s->stone[rep], capturer = 3 - color;
    int removed = 0, stone = rep;
    do {
        s->stone[stone] = GO_EMPTY;
        s->h->hash ^= go_zobrist(stone, color);
        removed++;
        /* Only the capturer's groups can touch a dead group from outside. */
        const int neighbours[4] = {stone - W, stone - 1, stone + 1, stone + W};
        for (int k = 0; k < 4; k++)
            if (s->stone[neighbours[k]] == capturer) go_add_liberty(s, s->group[neighbours[k]], stone);
        stone = s->next[stone];
    } while (stone != rep);
    return removed;
}

/* Play a move already known to be legal (go_move_status == GO_LEGAL). */
GO_FN void go_play(const GoLayout *L, uint8_t *base, int64_t move)
{
    GoSlot s = go_slot(L, base);
    GoHeader *h = s.h;
    const int pass = L->n * L->n;
    if (h->over) return;
    if (L->history > 0) {
        uint64_t *to = (uint64_t *)(s.history + (h->move_count % L->history) * go_align8(L->padded));
        const uint64_t *from = (const uint64_t *)s.stone;
        for (int i = 0; i < go_align8(L->padded) / 8; i++) to[i] = from[i];
    }
    if (move == pass) {
        h->passes += 1;
        h->ko_point = -1;
    } else {
        const int W = L->stride, color = h->to_play, opponent = 3 - color;
        const int q = go_padded(L, (int)move);
        const int neighbours[4] = {q - W, q - 1, q + 1, q + W};
        go_add_stone(L, &s, q, color);
        int captured = 0, captured_point = -1;
        for (int k = 0; k < 4; k++) {
            int nb = neighbours[k];
            if (s.stone[nb] == opponent && s.libs[s.group[nb]] == 0) {
                captured_point = nb;
                captured += go_remove_group(L, &s, s.group[nb]);
            }
        }
        h->captures[color - 1] += captured;
        int rep = s.group[q];
        /* Recapturing would restore the previous position exactly when a lone stone took a
         * lone stone and now sits in atari on that stone's point. */
        h->ko_point = (int16_t)((captured == 1 && s.size[rep] == 1 && s.libs[rep] == 1) ? captured_point : -1);
        h->passes = 0;
    }
    h->move_count += 1;
    h->to_play = (int8_t)(3 - h->to_play);
    if (L->superko) s.hashes[h->move_count] = h->hash;
    if (h->passes >= 2 || h->move_count >= L->max_moves) h->over = 1;
}

/* Legal mask for flat moves 0..n*n (pass last, always 1); out has n*n + 1 bytes.
 * Most empty points touch another empty point and are legal whatever the groups around them
 * do; that test runs branch-free over the padded board (the compiler vectorises it) and only
 * the rest get the group test. Superko needs the full test at every point. */
GO_FN void go_legal_mask(const GoLayout *L, uint8_t *base, uint8_t *out)
{
    GoSlot s = go_slot(L, base);
    const int n = L->n, W = L->stride, color = s.h->to_play;
    const uint8_t *stone = s.stone;
    union { uint64_t words[GO_MAX_PADDED / 8 + 1]; uint8_t bytes[GO_MAX_PADDED + 8]; } breathes, needs_test;
    out[n * n] = 1;
    if (s.h->over) {
        for (int p = 0; p < n * n; p++) out[p] = 0;
        return;
    }
    if (L->superko) {
        for (int row = 0; row < n; row++)
            for (int col = 0; col < n; col++)
                out[row * n + col] = go_point_status(L, &s, (row + 1) * W + col, color) == GO_LEGAL;
        return;
    }
    /* needs_test[q]: empty with no empty neighbour, so legality depends on the groups. */
    for (int q = W; q < (n + 1) * W; q++) {
        const uint8_t empty = stone[q] == GO_EMPTY;
        const uint8_t open = (stone[q - W] == GO_EMPTY) | (stone[q - 1] == GO_EMPTY) |
                             (stone[q + 1] == GO_EMPTY) | (stone[q + W] == GO_EMPTY);
        breathes.bytes[q] = empty & open;
        needs_test.bytes[q] = empty & !open;
    }
    for (int row = 0; row < n; row++)
        for (int col = 0; col < n; col++) out[row * n + col] = breathes.bytes[(row + 1) * W + col];
    for (int word = W / 8; word <= ((n + 1) * W - 1) / 8; word++) {
        if (!needs_test.words[word]) continue;
        for (int q = word * 8; q < word * 8 + 8; q++)
            if (q >= W && q < (n + 1) * W && needs_test.bytes[q])
                out[go_flat(L, q)] = go_point_status(L, &s, q, color) == GO_LEGAL;
    }
    if (s.h->ko_point >= 0) out[go_flat(L, s.h->ko_point)] = 0;
}

/* Is empty q an eye of `color`? All on-board neighbours are `color` stones, and the
 * diagonals hold no opponent stone on the edge, at most one in the middle (the usual
 * Monte Carlo Go test: filling such a point only throws away a liberty or an eye). */
GO_FN int go_is_own_eye(const GoLayout *L, const GoSlot *s, int q, int color)
{
    const int W = L->stride, opponent = 3 - color;
    const int neighbours[4] = {q - W, q - 1, q + 1, q + W};
    for (int k = 0; k < 4; k++) {
        int v = s->stone[neighbours[k]];
        if (v != color && v != GO_BORDER) return 0;
    }
    /* The top-left point's upper-left diagonal lies before the padded array: border. */
    const int diagonals[4] = {q - W - 1, q - W + 1, q + W - 1, q + W + 1};
    int opponents = 0, borders = 0;
    for (int k = 0; k < 4; k++) {
        int v = diagonals[k] >= 0 ? s->stone[diagonals[k]] : GO_BORDER;
        opponents += v == opponent;
        borders += v == GO_BORDER;
    }
    return borders ? opponents == 0 : opponents <= 1;
}

/* Sensible moves: the legal points that do not fill one of the mover's own eyes; pass only
 * when there is no such point (on a finished board: pass only). Self-play and matches use it
 * so that games are played out until both sides have nothing useful left, which is when
 * Tromp-Taylor area scoring counts what a human would. */
GO_FN void go_sensible_mask(const GoLayout *L, uint8_t *base, uint8_t *out)
{
    GoSlot s = go_slot(L, base);
    const int n = L->n, W = L->stride, color = s.h->to_play;
    int any = 0;
    go_legal_mask(L, base, out);
    for (int row = 0; row < n; row++)
        for (int col = 0; col < n; col++) {
            uint8_t *cell = out + row * n + col;
            if (*cell && go_is_own_eye(L, &s, (row + 1) * W + col, color)) *cell = 0;
            any |= *cell;
        }
    out[n * n] = (uint8_t)!any;
}

/* A uniform choice among the moves set in legal[0..n*n-1], plus pass when include_pass; pass
 * also when nothing is set. Advances the slot's generator. */
GO_FN int64_t go_random_from_mask(const GoLayout *L, uint8_t *base, const uint8_t *legal, int include_pass)
{
    const int points = L->n * L->n;
    int count = 0;
    for (int p = 0; p < points; p++) count += legal[p] != 0;
    int choices = count + (include_pass ? 1 : 0);
    if (choices == 0) return points;
    int pick = go_random_below((GoHeader *)base, choices);
    if (pick == count) return points;
    for (int p = 0;; p++)
        if (legal[p] && pick-- == 0) return p;
}

/* A uniformly random legal move (see go_random_from_mask). */
GO_FN int64_t go_random_move(const GoLayout *L, uint8_t *base, int include_pass)
{
    uint8_t legal[GO_MAX_SIZE * GO_MAX_SIZE + 1];
    go_legal_mask(L, base, legal);
    return go_random_from_mask(L, base, legal, include_pass);
}

/* Stones as +1 black, -1 white, 0 empty into out[n * n]. */
GO_FN void go_board(const GoLayout *L, uint8_t *base, int8_t *out)
{
    GoSlot s = go_slot(L, base);
    const int n = L->n, W = L->stride;
    for (int row = 0; row < n; row++)
        for (int col = 0; col < n; col++) {
            int v = s.stone[(row + 1) * W + col];
            out[row * n + col] = (int8_t)(v == GO_BLACK ? 1 : v == GO_WHITE ? -1 : 0);
        }
}

/* Extra input planes of go_features when asked for (KataGo's kind of features, which its
 * ablation credits with learning 1.55x faster): the liberties of each stone's group, exactly
 * (not the pseudo-liberties the pool keeps), and the simple-ko point. */
enum { GO_EXTRA_PLANES = 7 };

/* The komi plane, when asked for, holds the game's komi from the side to move's view (komi
 * counts for White: +komi when White is to move, -komi when Black is) divided by this, so that
 * the komis a 9x9 or 19x19 game meets stay within about one. */
#define GO_KOMI_SCALE 20.0f

/* The input planes go_features writes per point: the one definition of the count, which the
 * CPU extension exports (EXTRA_PLANES) and kernels/go_batch.py's feature_planes repeats; a
 * test holds the two to the planes actually written. */
GO_FN int go_feature_channels(int history, int extra, int komi)
{
    return 2 * (history + 1) + 2 + (extra ? GO_EXTRA_PLANES : 0) + (komi ? 1 : 0);
}

/* out[q] for every stone point q: its group's distinct liberties capped at 3; 0 elsewhere. */
GO_FN void go_liberty_counts(const GoLayout *L, GoSlot s, uint8_t *out)
{
    int16_t counted_by[GO_MAX_PADDED];  /* the representative that last counted this empty point */
    const int n = L->n, W = L->stride;
    for (int q = 0; q < L->padded; q++) { counted_by[q] = -1; out[q] = 0; }
    for (int row = 0; row < n; row++)
        for (int col = 0; col < n; col++) {
            const int q = (row + 1) * W + col;
            if ((s.stone[q] != GO_BLACK && s.stone[q] != GO_WHITE) || s.group[q] != q) continue;
            int liberties = 0, r = q;
            do {
                const int neighbours[4] = {r - W, r - 1, r + 1, r + W};
                for (int k = 0; k < 4; k++) {
                    const int e = neighbours[k];
                    if (s.stone[e] == GO_EMPTY && counted_by[e] != q) {
                        counted_by[e] = (int16_t)q;
                        liberties++;
                    }
                }
                r = s.next[r];
            } while (r != q);
            const uint8_t capped = (uint8_t)(liberties > 3 ? 3 : liberties);
            r = q;
            do { out[r] = capped; r = s.next[r]; } while (r != q);
        }
}

/* Input planes, NHWC for one board: out[(row * n + col) * C + c], C = 2 * (h + 1) + 2, plus
 * GO_EXTRA_PLANES when `extra`, plus the komi plane (last, see GO_KOMI_SCALE) when `komi`. Channel 2j / 2j+1: stones of the side to move / of its
 * opponent j positions ago (empty before the first move); channel 2h+2: 1 if black is to
 * move; 2h+3: ones. Extra, from B = 2h+4: B, B+1, B+2: the side to move's stones whose group
 * has 1, 2, 3 or more liberties; B+3..B+5: the same for the opponent's; B+6: the point the
 * side to move may not play because of simple ko. */
GO_FN void go_features(const GoLayout *L, uint8_t *base, int h, int extra, int komi, float *out)
{
    GoSlot s = go_slot(L, base);
    const int n = L->n, W = L->stride, base_channels = go_feature_channels(h, 0, 0);
    const int channels = go_feature_channels(h, extra, komi);
    const int me = s.h->to_play, opponent = 3 - me;
    const float black_to_move = me == GO_BLACK ? 1.0f : 0.0f;
    for (int j = 0; j <= h; j++) {
        const int then = s.h->move_count - j;
        const uint8_t *stones = j == 0 ? s.stone
                              : then >= 0 ? s.history + (then % L->history) * go_align8(L->padded)
                              : 0;
        for (int row = 0; row < n; row++)
            for (int col = 0; col < n; col++) {
                float *cell = out + (row * n + col) * channels;
                int v = stones ? stones[(row + 1) * W + col] : GO_EMPTY;
                cell[2 * j] = v == me ? 1.0f : 0.0f;
                cell[2 * j + 1] = v == opponent ? 1.0f : 0.0f;
            }
    }
    const float own_komi = (me == GO_WHITE ? s.h->komi : -s.h->komi) / GO_KOMI_SCALE;
    for (int p = 0; p < n * n; p++) {
        out[p * channels + 2 * h + 2] = black_to_move;
        out[p * channels + 2 * h + 3] = 1.0f;
        if (komi) out[p * channels + channels - 1] = own_komi;
    }
    if (!extra) return;
    uint8_t liberties[GO_MAX_PADDED];
    go_liberty_counts(L, s, liberties);
    for (int row = 0; row < n; row++)
        for (int col = 0; col < n; col++) {
            const int q = (row + 1) * W + col, v = s.stone[q];
            float *cell = out + (row * n + col) * channels + base_channels;
            for (int c = 0; c < GO_EXTRA_PLANES; c++) cell[c] = 0.0f;
            if (v == me || v == opponent) cell[(v == me ? 0 : 3) + liberties[q] - 1] = 1.0f;
            if (q == s.h->ko_point) cell[6] = 1.0f;
        }
}

/* Area score, black minus white, komi not applied: stones plus empty regions whose border
 * holds one colour only (Tromp-Taylor). */
GO_FN int go_area_score(const GoLayout *L, uint8_t *base)
{
    GoSlot s = go_slot(L, base);
    const int n = L->n, W = L->stride;
    uint8_t seen[GO_MAX_PADDED];
    int16_t stack[GO_MAX_PADDED];
    int score = 0;
    for (int q = 0; q < L->padded; q++) seen[q] = 0;
    for (int row = 0; row < n; row++)
        for (int col = 0; col < n; col++) {
            int q = (row + 1) * W + col, v = s.stone[q];
            if (v == GO_BLACK) { score++; continue; }
            if (v == GO_WHITE) { score--; continue; }
            if (seen[q]) continue;
            int top = 0, region = 0, borders = 0; /* borders: bit 1 black, bit 2 white */
            stack[top++] = (int16_t)q;
            seen[q] = 1;
            while (top > 0) {
                int p = stack[--top];
                region++;
                const int neighbours[4] = {p - W, p - 1, p + 1, p + W};
                for (int k = 0; k < 4; k++) {
                    int nb = neighbours[k], w = s.stone[nb];
                    if (w == GO_EMPTY && !seen[nb]) { seen[nb] = 1; stack[top++] = (int16_t)nb; }
                    else if (w == GO_BLACK || w == GO_WHITE) borders |= w;
                }
            }
            if (borders == GO_BLACK) score += region;
            else if (borders == GO_WHITE) score -= region;
        }
    return score;
}

/* A playout: the game in `base` continued to its end in `scratch` (slot_bytes bytes, not
 * `base`) with uniformly random sensible moves (go_sensible_mask, then go_random_from_mask
 * without pass: no filling of one's own eyes, pass only when nothing else is left), ending as
 * every game does, after two passes or at max_moves. Returns the final area score, black minus
 * white, komi not applied. `base` keeps its position; only its random generator moves on (it
 * takes the scratch game's), so the next playout from the same slot draws other moves. */
GO_FN int go_playout(const GoLayout *L, uint8_t *base, uint8_t *scratch)
{
    uint8_t sensible[GO_MAX_SIZE * GO_MAX_SIZE + 1];
    go_copy_slot(L, scratch, base);
    GoHeader *h = (GoHeader *)scratch;
    while (!h->over) {
        go_sensible_mask(L, scratch, sensible);
        go_play(L, scratch, go_random_from_mask(L, scratch, sensible, 0));
    }
    ((GoHeader *)base)->rng = h->rng;
    return go_area_score(L, scratch);
}

/* Load stones (+1 black, -1 white, 0 empty; n * n values) with `to_play` to move, as a fresh
 * game (no history, no ko). Returns 0, or 1 if a group would have no liberty, 2 for a bad value. */
GO_FN int go_set_board(const GoLayout *L, uint8_t *base, const int8_t *stones, int to_play)
{
    GoSlot s = go_slot(L, base);
    const int n = L->n, W = L->stride;
    go_reset(L, base);
    s.h->to_play = (int8_t)to_play;
    for (int p = 0; p < n * n; p++) {
        int v = stones[p];
        if (v < -1 || v > 1) return 2;
        if (v != 0) go_add_stone(L, &s, (p / n + 1) * W + p % n, v == 1 ? GO_BLACK : GO_WHITE);
    }
    for (int p = 0; p < n * n; p++) {
        int q = (p / n + 1) * W + p % n;
        if (s.stone[q] != GO_EMPTY && s.libs[s.group[q]] == 0) return 1;
    }
    if (L->superko) s.hashes[0] = s.h->hash;
    return 0;
}

#endif /* GO_RULES_H */
