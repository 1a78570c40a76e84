/*
 * kernels._go_cpu: the CPU back end. A `Rules` object fixes one slot layout (board size,
 * history length, superko, max_moves); its methods run the functions of go_rules.h over an
 * array of slots of a pool, in parallel over boards with OpenMP and without the GIL.
 *
 * The pool is any writable C-contiguous buffer of num_slots * slot_bytes bytes (the Python
 * facade owns it as a NumPy uint8 array). Slot and move arrays are int64. Every index is
 * checked here as well as in Python: a bad one raises, it never touches memory it should not.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <omp.h>
#include <stddef.h>
#include <string.h>

#include "adaptive_threads.h"
#include "go_rules.h"

/* Below this many boards a parallel region costs more than it saves. */
#define PARALLEL_MIN_BOARDS 32

/* Kinds of parallel region, each with its own thread-count record (adaptive_threads.h). */
typedef enum { OUT_LEGAL, OUT_SENSIBLE, OUT_BOARD, OUT_AREA, OUT_RANDOM_MOVE, OUT_RANDOM_MOVE_OR_PASS } OutputKind;
enum {
    REGION_OUTPUT = 0, /* + OutputKind */
    REGION_RESET = OUT_RANDOM_MOVE_OR_PASS + 1,
    REGION_CHECK,
    REGION_PLAY,
    REGION_COPY_PLAY,
    REGION_COPY,
    REGION_RANDOM_FROM_MASK,
    REGION_FEATURES,
    REGION_KINDS
};

/* Whether regions run on a team or on one thread just now: one decision for the whole module,
 * since contention is the machine's (adaptive_threads.h). */
static AdaptPolicy policy;

typedef struct {
    PyObject_HEAD
    GoLayout layout;
    int num_threads; /* OpenMP threads per call at most; every region states it explicitly */
    int adaptive;    /* fall back to one thread while the team stalls (adaptive_threads.h) */
    AdaptStats regions[REGION_KINDS];
} RulesObject;

/* for (i = 0; i < count; i++) body, over boards, on the team or one thread as the region
 * kind's record decides. Runs without the GIL (inside Py_BEGIN_ALLOW_THREADS). */
#define FOR_BOARDS(self, kind, count, i, ...)                                                              \
    do {                                                                                                  \
        AdaptRegion region_;                                                                              \
        adapt_begin(&region_, (self)->adaptive ? &policy : NULL, &(self)->regions[kind], (self)->num_threads, \
                    (count) >= PARALLEL_MIN_BOARDS);                                                      \
        _Pragma("omp parallel num_threads(region_.threads) if (region_.threads > 1)")                     \
        {                                                                                                 \
            const double started_ = adapt_thread_start(&region_);                                         \
            _Pragma("omp for schedule(static) nowait")                                                   \
            for (Py_ssize_t i = 0; i < (count); i++) { __VA_ARGS__; }                                     \
            adapt_thread_end(&region_, started_);                                                         \
        }                                                                                                 \
        adapt_end(&region_);                                                                              \
    } while (0)

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

static void release(Buffer *b)
{
    if (b->held) PyBuffer_Release(&b->view);
    b->held = 0;
}

/* Borrow a C-contiguous buffer of `count` items of `itemsize` bytes (count < 0: any count). */
static int borrow(PyObject *object, Buffer *b, int writable, Py_ssize_t itemsize, Py_ssize_t count,
                  const char *what)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, &b->view, flags) < 0) return -1;
    b->held = 1;
    if (b->view.itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: expected items of %zd bytes, got %zd", what, itemsize,
                     b->view.itemsize);
        release(b);
        return -1;
    }
    Py_ssize_t items = b->view.len / itemsize;
    if (count >= 0 && items != count) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items, got %zd", what, count, items);
        release(b);
        return -1;
    }
    return 0;
}

typedef struct {
    Buffer pool;
    Buffer slots;
    uint8_t *base;
    const int64_t *slot;
    Py_ssize_t num_slots;
    Py_ssize_t count;
} SlotArgs;

static void release_slots(SlotArgs *a)
{
    release(&a->slots);
    release(&a->pool);
}

/* Borrow the pool and a slot index array, checking every index against the pool's size. */
static int borrow_slots(RulesObject *self, PyObject *pool, PyObject *slots, SlotArgs *a)
{
    memset(a, 0, sizeof(*a));
    const Py_ssize_t slot_bytes = self->layout.slot_bytes;
    if (borrow(pool, &a->pool, 1, 1, -1, "pool") < 0) return -1;
    if (a->pool.view.len % slot_bytes != 0) {
        PyErr_Format(PyExc_ValueError, "pool: %zd bytes is not a whole number of %zd-byte slots",
                     a->pool.view.len, slot_bytes);
        release_slots(a);
        return -1;
    }
    if (borrow(slots, &a->slots, 0, 8, -1, "slots") < 0) {
        release_slots(a);
        return -1;
    }
    a->base = (uint8_t *)a->pool.view.buf;
    a->slot = (const int64_t *)a->slots.view.buf;
    a->num_slots = a->pool.view.len / slot_bytes;
    a->count = a->slots.view.len / 8;
    for (Py_ssize_t i = 0; i < a->count; i++) {
        if (a->slot[i] < 0 || a->slot[i] >= a->num_slots) {
            PyErr_Format(PyExc_ValueError, "slot %lld out of range 0..%zd", (long long)a->slot[i],
                         a->num_slots - 1);
            release_slots(a);
            return -1;
        }
    }
    return 0;
}

#define SLOT(a, i) ((a)->base + (a)->slot[i] * (Py_ssize_t)L->slot_bytes)

static PyObject *rules_reset(RulesObject *self, PyObject *args)
{
    PyObject *pool, *slots;
    SlotArgs a;
    if (!PyArg_ParseTuple(args, "OO", &pool, &slots) || borrow_slots(self, pool, slots, &a) < 0) return NULL;
    const GoLayout layout = self->layout, *L = &layout; /* a local copy: output stores cannot alias it */
    Py_BEGIN_ALLOW_THREADS
    FOR_BOARDS(self, REGION_RESET, a.count, i, go_reset(L, SLOT(&a, i)));
    Py_END_ALLOW_THREADS
    release_slots(&a);
    Py_RETURN_NONE;
}

static PyObject *rules_seed(RulesObject *self, PyObject *args)
{
    PyObject *pool, *slots;
    unsigned long long seed;
    SlotArgs a;
    const GoLayout *L = &self->layout;
    if (!PyArg_ParseTuple(args, "OOK", &pool, &slots, &seed) || borrow_slots(self, pool, slots, &a) < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < a.count; i++) go_seed(SLOT(&a, i), seed ^ go_mix64((uint64_t)a.slot[i]));
    release_slots(&a);
    Py_RETURN_NONE;
}

/* Status of moves[i] at slot[i] for all i; returns (index, status) of the first illegal one,
 * or None. Nothing is changed. */
static PyObject *first_illegal(RulesObject *self, SlotArgs *a, const int64_t *moves)
{
    const GoLayout layout = self->layout, *L = &layout; /* a local copy: output stores cannot alias it */
    Py_ssize_t first = a->count;
    int first_status = GO_LEGAL;
    Py_BEGIN_ALLOW_THREADS
    AdaptRegion region;
    adapt_begin(&region, self->adaptive ? &policy : NULL, &self->regions[REGION_CHECK], self->num_threads,
                a->count >= PARALLEL_MIN_BOARDS);
#pragma omp parallel num_threads(region.threads) if (region.threads > 1) reduction(min : first)
    {
        const double started = adapt_thread_start(&region);
#pragma omp for schedule(static) nowait
        for (Py_ssize_t i = 0; i < a->count; i++)
            if (go_move_status(L, SLOT(a, i), moves[i]) != GO_LEGAL && i < first) first = i;
        adapt_thread_end(&region, started);
    }
    adapt_end(&region);
    Py_END_ALLOW_THREADS
    if (first == a->count) Py_RETURN_NONE;
    first_status = go_move_status(L, SLOT(a, first), moves[first]);
    return Py_BuildValue("(ni)", first, first_status);
}

/* play(pool, slots, moves): all-or-nothing. Returns None when every move was played, else
 * (index, status) of the first illegal move and nothing is changed. */
static PyObject *rules_play(RulesObject *self, PyObject *args)
{
    PyObject *pool, *slots, *moves_object;
    SlotArgs a;
    Buffer moves = {0};
    if (!PyArg_ParseTuple(args, "OOO", &pool, &slots, &moves_object) ||
        borrow_slots(self, pool, slots, &a) < 0)
        return NULL;
    if (borrow(moves_object, &moves, 0, 8, a.count, "moves") < 0) {
        release_slots(&a);
        return NULL;
    }
    const int64_t *move = (const int64_t *)moves.view.buf;
    PyObject *result = first_illegal(self, &a, move);
    if (result == Py_None) {
        const GoLayout layout = self->layout, *L = &layout; /* a local copy: output stores cannot alias it */
        Py_BEGIN_ALLOW_THREADS
        FOR_BOARDS(self, REGION_PLAY, a.count, i, go_play(L, SLOT(&a, i), move[i]));
        Py_END_ALLOW_THREADS
    }
    release(&moves);
    release_slots(&a);
    return result;
}

/* Destinations must be distinct and must not be sources: copies run in parallel, so an
 * overlap would race. Raises ValueError otherwise. O(k) with a bitmap over the pool's slots. */
static int check_destinations(const SlotArgs *src, const SlotArgs *dst)
{
    if (dst->count != src->count) {
        PyErr_Format(PyExc_ValueError, "%zd source slots but %zd destination slots", src->count, dst->count);
        return -1;
    }
    uint8_t *marked = PyMem_Calloc((size_t)(dst->num_slots + 7) / 8, 1);
    if (marked == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int status = 0;
    for (Py_ssize_t i = 0; i < dst->count && status == 0; i++) {
        int64_t slot = dst->slot[i];
        if (marked[slot >> 3] & (1 << (slot & 7))) {
            PyErr_Format(PyExc_ValueError, "destination slots must be distinct (slot %lld twice)", (long long)slot);
            status = -1;
        }
        marked[slot >> 3] |= (uint8_t)(1 << (slot & 7));
    }
    for (Py_ssize_t i = 0; i < src->count && status == 0; i++) {
        int64_t slot = src->slot[i];
        if (marked[slot >> 3] & (1 << (slot & 7))) {
            PyErr_Format(PyExc_ValueError, "slot %lld is both a source and a destination", (long long)slot);
            status = -1;
        }
    }
    PyMem_Free(marked);
    return status;
}

/* copy_play(pool, src, dst, moves): position src[i] into slot dst[i], then play moves[i]
 * there. All-or-nothing like play; returns None or (index, status) judged at the source. */
static PyObject *rules_copy_play(RulesObject *self, PyObject *args)
{
    PyObject *pool, *src_object, *dst_object, *moves_object;
    SlotArgs src, dst;
    Buffer moves = {0};
    if (!PyArg_ParseTuple(args, "OOOO", &pool, &src_object, &dst_object, &moves_object) ||
        borrow_slots(self, pool, src_object, &src) < 0)
        return NULL;
    if (borrow_slots(self, pool, dst_object, &dst) < 0) {
        release_slots(&src);
        return NULL;
    }
    PyObject *result = NULL;
    if (check_destinations(&src, &dst) < 0) goto done;
    if (borrow(moves_object, &moves, 0, 8, src.count, "moves") < 0) goto done;
    const int64_t *move = (const int64_t *)moves.view.buf;
    result = first_illegal(self, &src, move);
    if (result == Py_None) {
        const GoLayout layout = self->layout, *L = &layout; /* a local copy: output stores cannot alias it */
        Py_BEGIN_ALLOW_THREADS
        FOR_BOARDS(self, REGION_COPY_PLAY, src.count, i, {
            uint8_t *to = SLOT(&dst, i);
            go_copy_slot(L, to, SLOT(&src, i));
            go_play(L, to, move[i]);
        });
        Py_END_ALLOW_THREADS
    }
done:
    release(&moves);
    release_slots(&dst);
    release_slots(&src);
    return result;
}

static PyObject *rules_copy(RulesObject *self, PyObject *args)
{
    PyObject *pool, *src_object, *dst_object;
    SlotArgs src, dst;
    if (!PyArg_ParseTuple(args, "OOO", &pool, &src_object, &dst_object) ||
        borrow_slots(self, pool, src_object, &src) < 0)
        return NULL;
    if (borrow_slots(self, pool, dst_object, &dst) < 0) {
        release_slots(&src);
        return NULL;
    }
    if (check_destinations(&src, &dst) < 0) {
        release_slots(&dst);
        release_slots(&src);
        return NULL;
    }
    const GoLayout layout = self->layout, *L = &layout; /* a local copy: output stores cannot alias it */
    Py_BEGIN_ALLOW_THREADS
    FOR_BOARDS(self, REGION_COPY, src.count, i, go_copy_slot(L, SLOT(&dst, i), SLOT(&src, i)));
    Py_END_ALLOW_THREADS
    release_slots(&dst);
    release_slots(&src);
    Py_RETURN_NONE;
}

/* The per-board output methods share one shape: (pool, slots, out) with `per_board` items of
 * `itemsize` bytes per slot. */
static PyObject *fill_output(RulesObject *self, PyObject *args, OutputKind kind)
{
    PyObject *pool, *slots, *out_object;
    SlotArgs a;
    Buffer out = {0};
    const GoLayout layout = self->layout, *L = &layout; /* a local copy: output stores cannot alias it */
    const int n = L->n;
    Py_ssize_t per_board = 1, itemsize = 8;
    switch (kind) {
    case OUT_LEGAL:
    case OUT_SENSIBLE: per_board = n * n + 1; itemsize = 1; break;
    case OUT_BOARD: per_board = n * n; itemsize = 1; break;
    case OUT_AREA: itemsize = 8; break;
    case OUT_RANDOM_MOVE:
    case OUT_RANDOM_MOVE_OR_PASS: itemsize = 8; break;
    }
    if (!PyArg_ParseTuple(args, "OOO", &pool, &slots, &out_object) || borrow_slots(self, pool, slots, &a) < 0)
        return NULL;
    if (borrow(out_object, &out, 1, itemsize, a.count * per_board, "out") < 0) {
        release_slots(&a);
        return NULL;
    }
    uint8_t *bytes = (uint8_t *)out.view.buf;
    int64_t *words = (int64_t *)out.view.buf;
    Py_BEGIN_ALLOW_THREADS
    FOR_BOARDS(self, REGION_OUTPUT + kind, a.count, i, {
        uint8_t *base = SLOT(&a, i);
        switch (kind) {
        case OUT_LEGAL: go_legal_mask(L, base, bytes + i * per_board); break;
        case OUT_SENSIBLE: go_sensible_mask(L, base, bytes + i * per_board); break;
        case OUT_BOARD: go_board(L, base, (int8_t *)bytes + i * per_board); break;
        case OUT_AREA: words[i] = go_area_score(L, base); break;
        case OUT_RANDOM_MOVE: words[i] = go_random_move(L, base, 0); break;
        case OUT_RANDOM_MOVE_OR_PASS: words[i] = go_random_move(L, base, 1); break;
        }
    });
    Py_END_ALLOW_THREADS
    release(&out);
    release_slots(&a);
    Py_RETURN_NONE;
}

static PyObject *rules_legal(RulesObject *self, PyObject *args) { return fill_output(self, args, OUT_LEGAL); }
static PyObject *rules_sensible(RulesObject *self, PyObject *args) { return fill_output(self, args, OUT_SENSIBLE); }
static PyObject *rules_board(RulesObject *self, PyObject *args) { return fill_output(self, args, OUT_BOARD); }
static PyObject *rules_area(RulesObject *self, PyObject *args) { return fill_output(self, args, OUT_AREA); }

static PyObject *rules_random(RulesObject *self, PyObject *args)
{
    PyObject *pool, *slots, *out;
    int include_pass;
    if (!PyArg_ParseTuple(args, "OOOp", &pool, &slots, &out, &include_pass)) return NULL;
    PyObject *inner = Py_BuildValue("(OOO)", pool, slots, out);
    if (inner == NULL) return NULL;
    PyObject *result = fill_output(self, inner, include_pass ? OUT_RANDOM_MOVE_OR_PASS : OUT_RANDOM_MOVE);
    Py_DECREF(inner);
    return result;
}

/* random_from_mask(pool, slots, legal uint8 (k, n*n+1), out int64 (k,), include_pass): a
 * uniform draw among the moves a caller's legal mask allows (saves recomputing it). */
static PyObject *rules_random_from_mask(RulesObject *self, PyObject *args)
{
    PyObject *pool, *slots, *legal_object, *out_object;
    int include_pass;
    SlotArgs a;
    Buffer legal = {0}, out = {0};
    const GoLayout layout = self->layout, *L = &layout; /* a local copy: output stores cannot alias it */
    if (!PyArg_ParseTuple(args, "OOOOp", &pool, &slots, &legal_object, &out_object, &include_pass) ||
        borrow_slots(self, pool, slots, &a) < 0)
        return NULL;
    const Py_ssize_t actions = (Py_ssize_t)L->n * L->n + 1;
    if (borrow(legal_object, &legal, 0, 1, a.count * actions, "legal") < 0 ||
        borrow(out_object, &out, 1, 8, a.count, "out") < 0) {
        release(&legal);
        release_slots(&a);
        return NULL;
    }
    const uint8_t *mask = (const uint8_t *)legal.view.buf;
    int64_t *moves = (int64_t *)out.view.buf;
    Py_BEGIN_ALLOW_THREADS
    FOR_BOARDS(self, REGION_RANDOM_FROM_MASK, a.count, i,
               moves[i] = go_random_from_mask(L, SLOT(&a, i), mask + i * actions, include_pass));
    Py_END_ALLOW_THREADS
    release(&out);
    release(&legal);
    release_slots(&a);
    Py_RETURN_NONE;
}

/* playouts(pool, slots, out int64 (k,)): out[i] = go_playout from slot[i] (its final area
 * score). Slots must be distinct (each playout writes its slot's random generator; GoBatch
 * checks). Every thread plays in its own scratch slot; playouts differ in length, so boards
 * are handed out dynamically. */
static PyObject *rules_playouts(RulesObject *self, PyObject *args)
{
    PyObject *pool, *slots, *out_object;
    SlotArgs a;
    Buffer out = {0};
    const GoLayout layout = self->layout, *L = &layout; /* a local copy: output stores cannot alias it */
    if (!PyArg_ParseTuple(args, "OOO", &pool, &slots, &out_object) || borrow_slots(self, pool, slots, &a) < 0)
        return NULL;
    if (borrow(out_object, &out, 1, 8, a.count, "out") < 0) {
        release_slots(&a);
        return NULL;
    }
    const int threads = a.count >= PARALLEL_MIN_BOARDS ? self->num_threads : 1;
    uint8_t *scratch = PyMem_Malloc((size_t)threads * (size_t)L->slot_bytes);
    if (scratch == NULL) {
        release(&out);
        release_slots(&a);
        return PyErr_NoMemory();
    }
    int64_t *scores = (int64_t *)out.view.buf;
    Py_BEGIN_ALLOW_THREADS
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        uint8_t *mine = scratch + (size_t)omp_get_thread_num() * (size_t)L->slot_bytes;
#pragma omp for schedule(dynamic, 4)
        for (Py_ssize_t i = 0; i < a.count; i++) scores[i] = go_playout(L, SLOT(&a, i), mine);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(scratch);
    release(&out);
    release_slots(&a);
    Py_RETURN_NONE;
}

static PyObject *rules_features(RulesObject *self, PyObject *args)
{
    PyObject *pool, *slots, *out_object;
    int history, extra, komi;
    SlotArgs a;
    Buffer out = {0};
    const GoLayout layout = self->layout, *L = &layout; /* a local copy: output stores cannot alias it */
    if (!PyArg_ParseTuple(args, "OOippO", &pool, &slots, &history, &extra, &komi, &out_object)) return NULL;
    if (history < 0 || history > L->history) {
        return PyErr_Format(PyExc_ValueError, "features: history %d out of range 0..%d", history,
                            L->history);
    }
    if (borrow_slots(self, pool, slots, &a) < 0) return NULL;
    const Py_ssize_t per_board = (Py_ssize_t)L->n * L->n * go_feature_channels(history, extra, komi);
    if (borrow(out_object, &out, 1, 4, a.count * per_board, "out") < 0) {
        release_slots(&a);
        return NULL;
    }
    float *planes = (float *)out.view.buf;
    Py_BEGIN_ALLOW_THREADS
    FOR_BOARDS(self, REGION_FEATURES, a.count, i, go_features(L, SLOT(&a, i), history, extra, komi, planes + i * per_board));
    Py_END_ALLOW_THREADS
    release(&out);
    release_slots(&a);
    Py_RETURN_NONE;
}

/* set_board(pool, slots, stones int8 (k*n*n), to_play int8 (k)): returns None, or
 * (index, reason) with reason 1 = a group without liberties, 2 = a value not in -1..1,
 * 3 = to_play not +-1. Boards before the bad one are already loaded. */
static PyObject *rules_set_board(RulesObject *self, PyObject *args)
{
    PyObject *pool, *slots, *stones_object, *to_play_object;
    SlotArgs a;
    Buffer stones = {0}, to_play = {0};
    const GoLayout layout = self->layout, *L = &layout; /* a local copy: output stores cannot alias it */
    if (!PyArg_ParseTuple(args, "OOOO", &pool, &slots, &stones_object, &to_play_object) ||
        borrow_slots(self, pool, slots, &a) < 0)
        return NULL;
    PyObject *result = NULL;
    if (borrow(stones_object, &stones, 0, 1, a.count * L->n * L->n, "stones") < 0) goto done;
    if (borrow(to_play_object, &to_play, 0, 1, a.count, "to_play") < 0) goto done;
    const int8_t *stone = (const int8_t *)stones.view.buf;
    const int8_t *side = (const int8_t *)to_play.view.buf;
    for (Py_ssize_t i = 0; i < a.count; i++) {
        if (side[i] != 1 && side[i] != -1) {
            result = Py_BuildValue("(ni)", i, 3);
            goto done;
        }
        int reason = go_set_board(L, SLOT(&a, i), stone + i * L->n * L->n, side[i] == 1 ? GO_BLACK : GO_WHITE);
        if (reason != 0) {
            go_reset(L, SLOT(&a, i));
            result = Py_BuildValue("(ni)", i, reason);
            goto done;
        }
    }
    result = Py_NewRef(Py_None);
done:
    release(&to_play);
    release(&stones);
    release_slots(&a);
    return result;
}

static PyObject *rules_layout(RulesObject *self, PyObject *unused)
{
    const GoLayout layout = self->layout, *L = &layout; /* a local copy: output stores cannot alias it */
    /* Header fields by name; the arrays as off_NAME (kernels/slot_check.py reads them all). */
    return Py_BuildValue(
        "{s:i,s:i,s:i,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "slot_bytes",
        L->slot_bytes, "padded", L->padded, "stride", L->stride, "hash", offsetof(GoHeader, hash), "rng",
        offsetof(GoHeader, rng), "move_count", offsetof(GoHeader, move_count), "captures",
        offsetof(GoHeader, captures), "komi", offsetof(GoHeader, komi), "ko_point", offsetof(GoHeader, ko_point), "to_play",
        offsetof(GoHeader, to_play), "passes", offsetof(GoHeader, passes), "over", offsetof(GoHeader, over),
        "off_stone", L->off_stone, "off_group", L->off_group, "off_next", L->off_next, "off_size", L->off_size,
        "off_libs", L->off_libs, "off_lib_sum", L->off_lib_sum, "off_lib_sum_sq", L->off_lib_sum_sq,
        "off_history", L->off_history, "off_hashes", L->off_hashes);
}

/* thread_stats() -> (parallel_runs, serial_runs, failed_runs) over all region kinds: regions run
 * by the team, regions run on one thread while backing off, team runs judged too slow. */
static PyObject *rules_thread_stats(RulesObject *self, PyObject *unused)
{
    long long parallel = 0, serial = 0, failed = 0;
    for (int k = 0; k < REGION_KINDS; k++) {
        parallel += self->regions[k].parallel_runs;
        serial += self->regions[k].serial_runs;
        failed += self->regions[k].failed_runs;
    }
    return Py_BuildValue("(LLL)", parallel, serial, failed);
}

static int rules_init(RulesObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"board_size", "history", "superko", "max_moves", "num_threads", "adaptive", NULL};
    int n, history, superko, max_moves, num_threads = 0, adaptive = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iipi|ip", keywords, &n, &history, &superko, &max_moves,
                                     &num_threads, &adaptive))
        return -1;
    if (num_threads < 0) {
        PyErr_Format(PyExc_ValueError, "num_threads must be >= 0 (0: OpenMP's default), got %d", num_threads);
        return -1;
    }
    self->num_threads = adapt_clamp_threads(num_threads > 0 ? num_threads : omp_get_max_threads());
    self->adaptive = adaptive;
    memset(self->regions, 0, sizeof(self->regions));
    if (n < GO_MIN_SIZE || n > GO_MAX_SIZE) {
        PyErr_Format(PyExc_ValueError, "board_size must be in %d..%d, got %d", GO_MIN_SIZE, GO_MAX_SIZE, n);
        return -1;
    }
    if (history < 0 || history > 64) {
        PyErr_Format(PyExc_ValueError, "history must be in 0..64, got %d", history);
        return -1;
    }
    if (max_moves < 1 || max_moves > 100000) {
        PyErr_Format(PyExc_ValueError, "max_moves must be in 1..100000, got %d", max_moves);
        return -1;
    }
    self->layout = go_layout(n, history, superko, max_moves);
    return 0;
}

static PyMethodDef rules_methods[] = {
    {"layout", (PyCFunction)rules_layout, METH_NOARGS, "Slot size and header field offsets."},
    {"thread_stats", (PyCFunction)rules_thread_stats, METH_NOARGS,
     "(parallel_runs, serial_runs, failed_runs) of the parallel regions so far."},
    {"reset", (PyCFunction)rules_reset, METH_VARARGS, "reset(pool, slots)"},
    {"seed", (PyCFunction)rules_seed, METH_VARARGS, "seed(pool, slots, seed)"},
    {"play", (PyCFunction)rules_play, METH_VARARGS, "play(pool, slots, moves) -> None | (index, status)"},
    {"copy_play", (PyCFunction)rules_copy_play, METH_VARARGS,
     "copy_play(pool, src, dst, moves) -> None | (index, status)"},
    {"copy", (PyCFunction)rules_copy, METH_VARARGS, "copy(pool, src, dst)"},
    {"legal", (PyCFunction)rules_legal, METH_VARARGS, "legal(pool, slots, out uint8 (k, n*n+1))"},
    {"sensible", (PyCFunction)rules_sensible, METH_VARARGS, "sensible(pool, slots, out uint8 (k, n*n+1))"},
    {"board", (PyCFunction)rules_board, METH_VARARGS, "board(pool, slots, out int8 (k, n, n))"},
    {"area", (PyCFunction)rules_area, METH_VARARGS, "area(pool, slots, out int64 (k,))"},
    {"random", (PyCFunction)rules_random, METH_VARARGS, "random(pool, slots, out int64 (k,), include_pass)"},
    {"random_from_mask", (PyCFunction)rules_random_from_mask, METH_VARARGS,
     "random_from_mask(pool, slots, legal uint8 (k, n*n+1), out int64 (k,), include_pass)"},
    {"playouts", (PyCFunction)rules_playouts, METH_VARARGS,
     "playouts(pool, slots, out int64 (k,)): final area scores of random sensible playouts"},
    {"features", (PyCFunction)rules_features, METH_VARARGS, "features(pool, slots, history, extra, komi, out float32)"},
    {"set_board", (PyCFunction)rules_set_board, METH_VARARGS,
     "set_board(pool, slots, stones int8, to_play int8) -> None | (index, reason)"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot rules_slots[] = {
    {Py_tp_doc, "Rules(board_size, history, superko, max_moves, num_threads=0, adaptive=True): Go rules over a "
                "pool of slots."},
    {Py_tp_init, rules_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_methods, rules_methods},
    {0, NULL},
};

static PyType_Spec rules_spec = {
    .name = "kernels._go_cpu.Rules",
    .basicsize = sizeof(RulesObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = rules_slots,
};

static int module_exec(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &rules_spec, NULL);
    if (type == NULL) return -1;
    if (PyModule_AddObjectRef(module, "Rules", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    Py_DECREF(type);
    static const struct { const char *name; int value; } constants[] = {
        {"LEGAL", GO_LEGAL},
        {"ILLEGAL_GAME_OVER", GO_ILLEGAL_GAME_OVER},
        {"ILLEGAL_OCCUPIED", GO_ILLEGAL_OCCUPIED},
        {"ILLEGAL_KO", GO_ILLEGAL_KO},
        {"ILLEGAL_SUICIDE", GO_ILLEGAL_SUICIDE},
        {"ILLEGAL_SUPERKO", GO_ILLEGAL_SUPERKO},
        {"ILLEGAL_OUT_OF_RANGE", GO_ILLEGAL_OUT_OF_RANGE},
        {"EXTRA_PLANES", GO_EXTRA_PLANES},
    };
    for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++)
        if (PyModule_AddIntConstant(module, constants[i].name, constants[i].value) < 0) return -1;
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kernels._go_cpu",
    .m_doc = "Batched Go rules on the CPU (go_rules.h over slots, OpenMP).",
    .m_size = 0,
    .m_slots = module_slots,
};

PyMODINIT_FUNC PyInit__go_cpu(void) { return PyModuleDef_Init(&module_def); }
