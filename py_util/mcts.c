/*
 * py_util._mcts: one AlphaZero search tree per game for a batch of B games.
 *
 * A `Tree` object owns every buffer, allocated once by its constructor; nothing is allocated
 * afterwards and no state lives in C globals, so any number of searches coexist. The edge
 * arena, sized for every node of every tree having every action (82 x 40 bytes a node on
 * 9x9), is only reserved: its pages are mapped as the searches use them, and a game's are
 * handed back to the system when its tree is reset. So memory follows what is searched, not
 * the visit cap (64 trees of 9,757 nodes would otherwise hold 2 GB). The search
 * sees only actions 0..A-1, priors, legal masks and values: it knows nothing about Go.
 *
 * Layout (g = game, i = node id in 0..M-1, e = edge index in 0..E-1 of that game's arena):
 *
 *   nodes        Node   [B, M]  node i of game g at nodes[g * M + i] (fields: struct Node)
 *   edges        Edge   [B, E]  game g's edge arena: one block of consecutive edges per
 *                               expanded node, edges_used[g] in use (fields: struct Edge);
 *                               edges_high[g] is the most it used since its last reset
 *   root         int32  [B]     root node id (0 after a reset)
 *   free_list    int32  [B, M]  stack of free node ids, free_count[g] of them, lowest on top
 *   block_owner  int32  [B, M]  expanded nodes in arena order, block_count[g] of them
 *
 * Nodes and edges are arrays of structs rather than of fields because a simulation walks a
 * long path touching every field of a few nodes and edges at each level: one cache line each.
 *
 * A block is ordered [tried edges, in the order they were first selected | untried edges], and
 * its first untried edge is always the best untried one (highest prior, then lowest action).
 * Untried edges share N = 0 and Q = FPU, so PUCT prefers them in exactly that order: selection
 * scans the tried edges plus that one candidate instead of every legal action, and finding the
 * next candidate (one pass over the untried edges) happens only when a new child is made.
 *
 * Node ids are stable for a node's lifetime (callers key positions by them); reclaimed ids go
 * back on the free list. Edges are not tied to positions, so `advance` compacts the arena.
 * Edge statistics outlive the child node: when the reuse budget trims a subtree, the edge keeps
 * its visits and value and the child is re-created (and re-evaluated) if selected again.
 *
 * Every index and value is checked before anything is changed: bad arguments raise, a full
 * buffer only stops that game's search for the current move (counted in `overflows`).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#define ARENA_MMAP 1
#define ARENA_PAGE sysconf(_SC_PAGESIZE)
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../kernels/adaptive_threads.h"

/* Below this many games a parallel region costs more than it saves. */
#define PARALLEL_MIN_GAMES 16
#define NO_NODE (-1)
#define NO_EDGE (-1)
#define MAX_ACTIONS 32767 /* Edge.action is int16 */

enum NodeState {
    NODE_FREE = 0,     /* on the free list */
    NODE_NEW = 1,      /* allocated, never evaluated: a fresh root or a selected leaf */
    NODE_EXPANDED = 2, /* evaluated, owns an edge block */
    NODE_TERMINAL = 3, /* evaluated as a finished game: no edges, value in terminal_value */
    NODE_NO_ROOM = 4,  /* evaluated but the edge arena was full: re-evaluated when reached */
};

typedef struct {
    double value_sum;     /* sum of backed-up values, view of the player to move AT the node */
    int32_t parent;       /* parent node id; NO_NODE at a root and on free nodes */
    int32_t edge;         /* offset of the edge leading here inside the parent's block */
    int32_t first_edge;   /* first edge of the node's block in the arena; NO_EDGE until expanded */
    int32_t num_edges;    /* block length = number of legal actions (0 if not expanded) */
    int32_t tried;        /* edges at the front of the block that have had a child */
    int32_t visits;       /* 1 for the node's own evaluation + 1 per simulation through it */
    int32_t pending;      /* simulations selected through the node and not yet backed up */
    float terminal_value; /* game result of a NODE_TERMINAL node, same view as value_sum */
    int8_t state;         /* enum NodeState */
} Node;

typedef struct {
    double value_sum; /* sum of values, view of the player to move at the PARENT (the one
                         choosing the edge), so Q = value_sum / visits */
    double value_sq_sum; /* sum of the squares of those values: their spread, for the
                            lower confidence bound of play-time move choice (root_arrays) */
    float prior;      /* masked to legal actions, renormalised, stored as float32 (+ noise) */
    int32_t visits;   /* completed simulations through the edge */
    int32_t child;    /* child node id, NO_NODE until first selected (or after trimming) */
    int16_t action;
} Edge;

/* Columns of game_status(), in order; the wrapper names them from STATUS_FIELDS. */
enum StatusField {
    STATUS_ROOT,
    STATUS_SIMULATIONS,
    STATUS_FULL,
    STATUS_NEEDS_EXPANSION,
    STATUS_TERMINAL_ROOT,
    STATUS_NODES_IN_USE,
    STATUS_EDGES_IN_USE,
    STATUS_OVERFLOWS,
    STATUS_COLLISIONS,
    STATUS_PENDING_LEAVES,
    STATUS_COUNT,
};
static const char *const status_names[STATUS_COUNT] = {
    "root",       "simulations", "full",       "needs_expansion", "terminal_root",
    "nodes_in_use", "edges_in_use", "overflows", "collisions",      "pending_leaves",
};

typedef struct {
    PyObject_HEAD
    int32_t batch_size, num_actions, max_nodes, max_edges, reuse_budget;
    int num_threads; /* OpenMP threads over games at most; 1 = none (no barriers to wait on) */
    int adaptive;    /* fall back to one thread while the team stalls (adaptive_threads.h) */
    AdaptStats regions[3]; /* select, expand_and_backup, advance */
    double c_puct, fpu_reduction, virtual_loss;
    double forced_playouts; /* KataGo's k: see select_edge; 0 = off */
    int busy; /* set while a method runs without the GIL: a second thread gets an error */

    Node *nodes; /* [B, M] */
    Edge *edges; /* [B, E] */
    size_t edge_bytes; /* the edge arena's reservation */
    int32_t *root, *free_list, *free_count, *block_owner, *block_count, *edges_used, *edges_high;
    int32_t *simulations;    /* [B] simulations started this move */
    int32_t *pending_leaves; /* [B] leaves returned by select and not yet backed up */
    uint8_t *full;           /* [B] the buffer filled up this move: no more growth */
    int64_t *overflows;      /* [B] moves on which the buffer filled up (cumulative) */
    int64_t *collisions;     /* [B] selections dropped because they hit a pending leaf */

    int32_t *scratch;     /* [B, M] breadth-first queue (advance), leaf order (backup) */
    uint8_t *keep;        /* [B, M] marks of kept nodes during advance; all zero between calls */
    int32_t *leaf_count;  /* [B] leaves found by select per game */
    int32_t *group_start; /* [B + 1] leaves per game in expand_and_backup */
} TreeObject;

enum { REGION_SELECT, REGION_EXPAND, REGION_ADVANCE };

/* Whether regions run on a team or on one thread just now: one decision for the whole module,
 * since contention is the machine's (kernels/adaptive_threads.h). */
static AdaptPolicy policy;

/* for (g = 0; g < batch; g++) body, over games, on the team or one thread as the region kind's
 * record decides (kernels/adaptive_threads.h). Runs without the GIL. */
#define FOR_GAMES(self, kind, worth_it, g, ...)                                                           \
    do {                                                                                                  \
        AdaptRegion region_;                                                                              \
        adapt_begin(&region_, (self)->adaptive ? &policy : NULL, &(self)->regions[kind], (self)->num_threads, \
                    (worth_it));                                                                          \
        _Pragma("omp parallel num_threads(region_.threads) if (region_.threads > 1)")                     \
        {                                                                                                 \
            const double started_ = adapt_thread_start(&region_);                                         \
            _Pragma("omp for schedule(static) nowait")                                                   \
            for (Py_ssize_t g = 0; g < (self)->batch_size; g++) { __VA_ARGS__; }                          \
            adapt_thread_end(&region_, started_);                                                         \
        }                                                                                                 \
        adapt_end(&region_);                                                                              \
    } while (0)

/* Game g's nodes and edge arena, so per-game code reads like single-tree code with local ids. */
typedef struct {
    Node *node;
    Edge *edge;
} GameView;

static GameView game_view(const TreeObject *t, Py_ssize_t g)
{
    GameView v = {t->nodes + g * t->max_nodes, t->edges + g * t->max_edges};
    return v;
}

/* ---------------------------------------------------------------- per-game tree operations */

static void init_node(Node *node, int32_t parent, int32_t edge_offset)
{
    memset(node, 0, sizeof(*node));
    node->parent = parent;
    node->edge = edge_offset;
    node->first_edge = NO_EDGE;
    node->state = NODE_NEW;
}

/* Hand the pages of game g's used edges back to the system (they read as zeros when next
 * touched, and every edge is written when its block is made). Only whole pages inside the
 * game's arena are handed back: its neighbours' edges share the boundary pages. */
static void release_edges(TreeObject *t, Py_ssize_t g)
{
#ifdef ARENA_MMAP
    const uintptr_t page = (uintptr_t)ARENA_PAGE;
    uintptr_t start = (uintptr_t)(t->edges + g * t->max_edges);
    uintptr_t end = (uintptr_t)(t->edges + g * t->max_edges + t->edges_high[g]);
    start = (start + page - 1) & ~(page - 1);
    end &= ~(page - 1);
    if (end > start) madvise((void *)start, end - start, MADV_DONTNEED);
#endif
    t->edges_high[g] = 0;
}

static void reset_game(TreeObject *t, Py_ssize_t g)
{
    GameView v = game_view(t, g);
    const int32_t m = t->max_nodes;
    int32_t *free_list = t->free_list + g * m;
    for (int32_t i = 0; i < m; i++) {
        v.node[i].state = NODE_FREE;
        v.node[i].pending = 0;
    }
    for (int32_t i = 0; i < m - 1; i++) free_list[i] = m - 1 - i; /* node 1 on top */
    t->free_count[g] = m - 1;
    init_node(&v.node[0], NO_NODE, NO_EDGE);
    t->root[g] = 0;
    release_edges(t, g);
    t->edges_used[g] = 0;
    t->block_count[g] = 0;
    t->simulations[g] = 0;
    t->pending_leaves[g] = 0;
    t->full[g] = 0;
}

static void mark_full(TreeObject *t, Py_ssize_t g)
{
    if (!t->full[g]) t->overflows[g]++;
    t->full[g] = 1;
}

/* Add `value` (view of the player to move at `node`) to every node and edge from `node` up to
 * the root, flipping the sign each ply; `in_flight` = 1 also clears the selection's marks. */
static void backup(GameView *v, int32_t node, double value, int32_t in_flight)
{
    for (;;) {
        Node *x = &v->node[node];
        x->visits += 1;
        x->value_sum += value;
        x->pending -= in_flight;
        if (x->parent == NO_NODE) return;
        Edge *e = &v->edge[v->node[x->parent].first_edge + x->edge];
        value = -value; /* the parent's player is the other one */
        e->visits += 1;
        e->value_sum += value;
        e->value_sq_sum += value * value;
        node = x->parent;
    }
}

static void release_path(GameView *v, int32_t node)
{
    for (; node != NO_NODE; node = v->node[node].parent) v->node[node].pending -= 1;
}

/* Swap two untried edges: they have no visits, value or child, so only action and prior move. */
static void swap_untried(Edge *a, Edge *b)
{
    const int16_t action = a->action;
    const float prior = a->prior;
    a->action = b->action;
    a->prior = b->prior;
    b->action = action;
    b->prior = prior;
}

/* Move the best untried edge of `node` (highest prior, then lowest action) to the front of
 * the untried part. */
static void promote_best_untried(GameView *v, const Node *node)
{
    Edge *start = v->edge + node->first_edge + node->tried, *end = v->edge + node->first_edge + node->num_edges;
    if (start >= end) return;
    Edge *best = start;
    for (Edge *e = start + 1; e < end; e++)
        if (e->prior > best->prior || (e->prior == best->prior && e->action < best->action)) best = e;
    swap_untried(best, start);
}

/*
 * PUCT: the edge maximising (score, prior, -action), score = Q + c_puct * P * sqrt(N_parent) /
 * (1 + N_edge), so ties go to the higher prior, then the lower action. N_parent is the node's
 * visit count (its own evaluation included, so the priors already count on the first selection
 * below a fresh node). First-play urgency: an unvisited edge has Q = clamp(Q_parent -
 * fpu_reduction, -1, 1), Q_parent being the node's mean value from the same (chooser's) view.
 * The arithmetic order is part of the contract: the pure-Python reference in tests/ repeats it
 * so both agree exactly. Virtual loss: simulations in flight through an edge (its child's
 * pending count) count as visits that each lost `virtual_loss`; the caller marks the node
 * itself before calling. Only tried edges and the best untried one are scored (see the top).
 */
static inline int better(double score, const Edge *edge, double best_score, const Edge *best)
{
    return score > best_score ||
           (score == best_score &&
            (edge->prior > best->prior || (edge->prior == best->prior && edge->action < best->action)));
}

/*
 * Forced playouts (KataGo, Wu 2019), at a root when forced_playouts k > 0: a tried child whose
 * visits (in flight included) are below sqrt(k * P * N_children) is taken before PUCT is asked,
 * the highest prior first (ties to the lower action), so that moves the noise promotes get
 * looked at; policy targets then subtract those visits again (BatchedMCTS.policy_targets).
 * Untried children are left to PUCT, as KataGo leaves children without a node.
 */
static int32_t forced_edge(const TreeObject *t, const GameView *v, const Node *node)
{
    const Edge *edges = v->edge + node->first_edge;
    const double children = (double)(node->visits - 1 + node->pending - 1);
    int32_t best = -1;
    for (int32_t i = 0; i < node->tried; i++) {
        const Edge *e = &edges[i];
        const int32_t n = e->visits + (e->child == NO_NODE ? 0 : v->node[e->child].pending);
        if ((double)n * (double)n < t->forced_playouts * (double)e->prior * children &&
            (best < 0 || better(0.0, e, 0.0, &edges[best])))
            best = i;
    }
    return best < 0 ? -1 : node->first_edge + best;
}

static int32_t select_edge(const TreeObject *t, const GameView *v, const Node *node, int at_root)
{
    if (at_root && t->forced_playouts > 0.0) {
        const int32_t forced = forced_edge(t, v, node);
        if (forced >= 0) return forced;
    }
    const Edge *edges = v->edge + node->first_edge;
    const int32_t tried = node->tried;
    const int32_t in_flight = node->pending - 1; /* other than the current selection */
    double fpu = node->value_sum / node->visits - t->fpu_reduction;
    if (fpu < -1.0) fpu = -1.0;
    if (fpu > 1.0) fpu = 1.0;
    const double factor = t->c_puct * sqrt((double)(node->visits + in_flight));
    int32_t best = -1;
    double best_score = -INFINITY;
    if (tried < node->num_edges) { /* the best untried edge: N = 0, Q = FPU */
        best = tried;
        best_score = fpu + factor * (double)edges[tried].prior / 1.0;
    }
    for (int32_t i = 0; i < tried; i++) {
        const Edge *e = &edges[i];
        double q;
        int32_t n = e->visits;
        if (in_flight == 0) {
            q = n > 0 ? e->value_sum / n : fpu;
        } else {
            const int32_t virtual_visits = e->child == NO_NODE ? 0 : v->node[e->child].pending;
            n += virtual_visits;
            q = n > 0 ? (e->value_sum - t->virtual_loss * virtual_visits) / n : fpu;
        }
        const double score = q + factor * (double)e->prior / (double)(1 + n);
        if (score >= best_score && (best < 0 || better(score, e, best_score, &edges[best]))) {
            best_score = score;
            best = i;
        }
    }
    return node->first_edge + best;
}

static int32_t find_edge(const GameView *v, const Node *node, int32_t action)
{
    const int32_t end = node->first_edge + node->num_edges;
    for (int32_t e = node->first_edge; e < end; e++)
        if (v->edge[e].action == action) return e;
    return NO_EDGE;
}

/* The root edge of `action` (a legal action of the expanded root, checked by the caller) as
 * the edge a selection takes. An untried edge first swaps places with the untried candidate,
 * so the block stays [tried | untried]
 * and the first try below makes it tried and promotes the best of the rest as usual. */
static int32_t chosen_root_edge(GameView *v, const Node *root, int32_t action)
{
    const int32_t e = find_edge(v, root, action), candidate = root->first_edge + root->tried;
    if (e > candidate) {
        swap_untried(&v->edge[e], &v->edge[candidate]);
        return candidate;
    }
    return e;
}

/* Up to `wanted` selections from game g's root. Leaves needing evaluation are written to the
 * out arrays (returns how many); terminal leaves are backed up at once. `root_action` >= 0
 * sends every selection of this call through that root action (Gumbel root selection, chosen
 * by the caller); -1 lets PUCT (and forced playouts) choose. */
static int32_t select_game(TreeObject *t, Py_ssize_t g, int32_t wanted, int32_t simulation_limit,
                           int32_t root_action, int64_t *out_parent, int64_t *out_action,
                           int64_t *out_node)
{
    GameView v = game_view(t, g);
    int32_t found = 0;
    if (v.node[t->root[g]].state != NODE_EXPANDED) return 0;
    for (int32_t attempt = 0; attempt < wanted; attempt++) {
        if (t->full[g] || t->simulations[g] >= simulation_limit) break;
        int32_t id = t->root[g];
        v.node[id].pending += 1;
        for (;;) {
            Node *node = &v.node[id];
            if (node->state == NODE_TERMINAL) {
                backup(&v, id, node->terminal_value, 1);
                t->simulations[g]++;
                break;
            }
            if (node->state != NODE_EXPANDED) { /* NEW or NO_ROOM: needs an evaluation */
                if (node->pending > 1) {        /* already selected in this call */
                    release_path(&v, id);
                    t->collisions[g]++;
                    break;
                }
                out_parent[found] = node->parent;
                out_action[found] = v.edge[v.node[node->parent].first_edge + node->edge].action;
                out_node[found] = id;
                found++;
                t->simulations[g]++;
                t->pending_leaves[g]++;
                break;
            }
            const int at_root = id == t->root[g];
            const int32_t e = at_root && root_action >= 0 ? chosen_root_edge(&v, node, root_action)
                                                          : select_edge(t, &v, node, at_root);
            int32_t child = v.edge[e].child;
            if (child == NO_NODE) {
                if (t->free_count[g] == 0) {
                    release_path(&v, id);
                    mark_full(t, g);
                    return found;
                }
                child = t->free_list[g * t->max_nodes + --t->free_count[g]];
                const int32_t offset = e - node->first_edge;
                init_node(&v.node[child], id, offset);
                v.edge[e].child = child;
                if (offset == node->tried) { /* a first try: the next candidate moves up */
                    node->tried++;
                    promote_best_untried(&v, node);
                }
            }
            v.node[child].pending += 1;
            id = child;
        }
    }
    return found;
}

/* Evaluate node `id` of game g: make its edge block (or mark it terminal) and back up. The
 * arguments were validated by the caller. */
static void expand_node(TreeObject *t, Py_ssize_t g, GameView *v, int32_t id, const float *priors,
                        const uint8_t *legal, double value, int terminal, int32_t in_flight)
{
    const int32_t num_actions = t->num_actions;
    Node *node = &v->node[id];
    if (terminal) {
        node->state = NODE_TERMINAL;
        node->terminal_value = (float)value;
    } else {
        int32_t count = 0;
        double total = 0.0;
        for (int32_t a = 0; a < num_actions; a++)
            if (legal[a]) {
                count++;
                total += priors[a];
            }
        if ((int64_t)t->edges_used[g] + count > t->max_edges) {
            node->state = NODE_NO_ROOM;
            mark_full(t, g);
        } else {
            const int32_t first = t->edges_used[g];
            const int uniform = !(total > 0.0 && isfinite(total));
            Edge *e = v->edge + first;
            for (int32_t a = 0; a < num_actions; a++) {
                if (!legal[a]) continue;
                e->value_sum = 0.0;
                e->value_sq_sum = 0.0;
                e->prior = uniform ? (float)(1.0 / count) : (float)(priors[a] / total);
                e->visits = 0;
                e->child = NO_NODE;
                e->action = (int16_t)a;
                e++;
            }
            t->edges_used[g] = first + count;
            if (t->edges_used[g] > t->edges_high[g]) t->edges_high[g] = t->edges_used[g];
            t->block_owner[g * t->max_nodes + t->block_count[g]++] = id;
            node->first_edge = first;
            node->num_edges = count;
            node->tried = 0;
            promote_best_untried(v, node);
            node->state = NODE_EXPANDED;
        }
    }
    backup(v, id, value, in_flight);
}

/* Make the child reached by `action` the root of game g (a fresh root if it has no node). Keeps
 * its subtree breadth-first (a node's children in the order they were first tried) up to
 * 1 + reuse_budget nodes, frees the rest and compacts the edge arena. A new root that still
 * needs expanding has no children, so the whole arena is then free for its block. */
static void advance_game(TreeObject *t, Py_ssize_t g, int32_t action)
{
    GameView v = game_view(t, g);
    const int32_t m = t->max_nodes;
    const Node *old_root = &v.node[t->root[g]];
    int32_t child = NO_NODE;
    if (old_root->state == NODE_EXPANDED) {
        const int32_t e = find_edge(&v, old_root, action);
        if (e != NO_EDGE) child = v.edge[e].child;
    }
    if (child == NO_NODE) {
        reset_game(t, g);
        return;
    }
    int32_t *queue = t->scratch + g * m, *free_list = t->free_list + g * m;
    int32_t *owners = t->block_owner + g * m;
    uint8_t *keep = t->keep + g * m;
    int32_t head = 0, tail = 0;
    queue[tail++] = child;
    keep[child] = 1;
    while (head < tail) {
        const Node *x = &v.node[queue[head++]];
        Edge *end = v.edge + x->first_edge + x->tried; /* children exist only on tried edges */
        for (Edge *e = v.edge + x->first_edge; e < end; e++) {
            const int32_t c = e->child;
            if (c == NO_NODE) continue;
            if (tail < 1 + t->reuse_budget) {
                keep[c] = 1;
                queue[tail++] = c;
            } else {
                e->child = NO_NODE; /* trimmed: the edge keeps its statistics */
            }
        }
    }
    int32_t free_count = 0;
    for (int32_t i = m - 1; i >= 0; i--)
        if (!keep[i]) {
            v.node[i].state = NODE_FREE;
            free_list[free_count++] = i;
        }
    t->free_count[g] = free_count;
    int32_t write = 0, blocks = 0;
    for (int32_t b = 0; b < t->block_count[g]; b++) {
        const int32_t x = owners[b];
        if (!keep[x]) continue;
        Node *owner = &v.node[x];
        if (owner->first_edge != write) {
            memmove(v.edge + write, v.edge + owner->first_edge, (size_t)owner->num_edges * sizeof(Edge));
            owner->first_edge = write;
        }
        write += owner->num_edges;
        owners[blocks++] = x;
    }
    t->block_count[g] = blocks;
    t->edges_used[g] = write;
    for (int32_t i = 0; i < tail; i++) keep[queue[i]] = 0;
    v.node[child].parent = NO_NODE;
    v.node[child].edge = NO_EDGE;
    t->root[g] = child;
    t->simulations[g] = 0;
    t->full[g] = 0;
}

static Node *root_node(const TreeObject *t, Py_ssize_t g)
{
    return &t->nodes[g * t->max_nodes + t->root[g]];
}

/* ------------------------------------------------------------------------ argument helpers */

typedef enum { KIND_BOOL, KIND_INT32, KIND_INT64, KIND_FLOAT32, KIND_FLOAT64 } Kind;
static const char *const kind_names[] = {"bool", "int32", "int64", "float32", "float64"};

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

static void release(Buffer *b)
{
    if (b->held) PyBuffer_Release(&b->view);
    b->held = 0;
}

static int format_matches(const char *format, Py_ssize_t itemsize, Kind kind)
{
    if (format == NULL) format = "B";
    if (*format == '@' || *format == '=' || *format == '<') format++;
    if (format[0] == '\0' || format[1] != '\0') return 0;
    const char c = format[0];
    switch (kind) {
    case KIND_BOOL: return itemsize == 1 && (c == '?' || c == 'B' || c == 'b');
    case KIND_INT32: return itemsize == 4 && (c == 'i' || c == 'l');
    case KIND_INT64: return itemsize == 8 && (c == 'q' || c == 'l' || c == 'n');
    case KIND_FLOAT32: return itemsize == 4 && c == 'f';
    case KIND_FLOAT64: return itemsize == 8 && c == 'd';
    }
    return 0;
}

/* Borrow a C-contiguous buffer of `count` items of `kind` (count < 0: any number). */
static int borrow(PyObject *object, Buffer *b, int writable, Kind kind, Py_ssize_t count, const char *what)
{
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, &b->view, flags) < 0) return -1;
    b->held = 1;
    if (!format_matches(b->view.format, b->view.itemsize, kind)) {
        PyErr_Format(PyExc_ValueError, "%s: expected a contiguous %s buffer, got format '%s'", what,
                     kind_names[kind], b->view.format ? b->view.format : "B");
        release(b);
        return -1;
    }
    if (count >= 0 && b->view.len / b->view.itemsize != count) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items, got %zd", what, count,
                     b->view.len / b->view.itemsize);
        release(b);
        return -1;
    }
    return 0;
}

/* Every method runs through GUARDED: while one releases the GIL, a call from another thread
 * raises instead of touching buffers that are being changed; so does a call on an object whose
 * __init__ never ran. */
#define GUARDED(name)                                                                                  \
    static PyObject *name(TreeObject *self, PyObject *args)                                            \
    {                                                                                                  \
        if (self->nodes == NULL) {                                                                     \
            PyErr_SetString(PyExc_RuntimeError, "Tree.__init__ has not run");                         \
            return NULL;                                                                               \
        }                                                                                              \
        if (self->busy) {                                                                              \
            PyErr_SetString(PyExc_RuntimeError, "this search is running a method in another thread"); \
            return NULL;                                                                               \
        }                                                                                              \
        self->busy = 1;                                                                                \
        PyObject *result = name##_unguarded(self, args);                                               \
        self->busy = 0;                                                                                \
        return result;                                                                                 \
    }

static int fail(PyObject *type, const char *format, ...)
{
    va_list vargs;
    va_start(vargs, format);
    PyErr_FormatV(type, format, vargs);
    va_end(vargs);
    return -1;
}

/* PyErr_Format has no %g. */
static const char *show_double(char *text, size_t size, double value)
{
    PyOS_snprintf(text, size, "%.9g", value);
    return text;
}

/* Check priors/legal/value rows before any of them is used: finite non-negative priors, a value
 * in [-1, 1], and at least one legal action unless terminal. */
static int check_evaluations(const TreeObject *t, Py_ssize_t count, const float *priors, const uint8_t *legal,
                             const float *values, const uint8_t *terminal, const char *what)
{
    const Py_ssize_t a_count = t->num_actions;
    for (Py_ssize_t i = 0; i < count; i++) {
        const float value = values[i];
        if (!(value >= -1.0f && value <= 1.0f)) {
            char text[32];
            return fail(PyExc_ValueError, "%s: values[%zd] = %s is not in [-1, 1]", what, i,
                        show_double(text, sizeof(text), value));
        }
        if (terminal[i]) continue;
        int any_legal = 0;
        for (Py_ssize_t a = 0; a < a_count; a++) {
            const float p = priors[i * a_count + a];
            if (!(p >= 0.0f && isfinite(p))) {
                PyErr_Format(PyExc_ValueError, "%s: priors[%zd, %zd] is negative or not finite", what, i, a);
                return -1;
            }
            any_legal |= legal[i * a_count + a] != 0;
        }
        if (!any_legal) {
            PyErr_Format(PyExc_ValueError, "%s: row %zd is not terminal but has no legal action", what, i);
            return -1;
        }
    }
    return 0;
}

/* -------------------------------------------------------------------------------- methods */

static PyObject *tree_reset_unguarded(TreeObject *self, PyObject *args)
{
    PyObject *mask_object;
    Buffer mask = {0};
    if (!PyArg_ParseTuple(args, "O", &mask_object)) return NULL;
    if (borrow(mask_object, &mask, 0, KIND_BOOL, self->batch_size, "games") < 0) return NULL;
    const uint8_t *selected = mask.view.buf;
    for (Py_ssize_t g = 0; g < self->batch_size; g++)
        if (selected[g]) reset_game(self, g);
    release(&mask);
    Py_RETURN_NONE;
}
GUARDED(tree_reset)

/* select(max_leaves, simulation_limit, games, out_game, out_parent, out_action, out_node
 * [, root_actions]) -> (count, active): the leaves are packed at the front of the out arrays
 * (B * max_leaves items each, game-major); `active` counts selected games that can still run
 * simulations. root_actions: int64 [B] or None, see select_game; each chosen game's action
 * must be -1 or a legal action of its expanded root. */
static PyObject *tree_select_unguarded(TreeObject *self, PyObject *args)
{
    int max_leaves, simulation_limit;
    PyObject *objects[5], *root_object = Py_None;
    Buffer mask = {0}, out[4], roots = {0};
    memset(out, 0, sizeof(out));
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "iiOOOOO|O", &max_leaves, &simulation_limit, &objects[0], &objects[1],
                          &objects[2], &objects[3], &objects[4], &root_object))
        return NULL;
    const Py_ssize_t batch = self->batch_size;
    if (max_leaves < 1 || max_leaves > self->max_nodes) {
        PyErr_Format(PyExc_ValueError, "num_leaves_per_game must be in 1..%d, got %d", self->max_nodes,
                     max_leaves);
        return NULL;
    }
    if (borrow(objects[0], &mask, 0, KIND_BOOL, batch, "games") < 0) return NULL;
    static const char *const out_names[4] = {"out_game", "out_parent", "out_action", "out_node"};
    for (int i = 0; i < 4; i++)
        if (borrow(objects[1 + i], &out[i], 1, KIND_INT64, batch * max_leaves, out_names[i]) < 0) goto done;
    const int64_t *root_action = NULL;
    if (root_object != Py_None) {
        if (borrow(root_object, &roots, 0, KIND_INT64, batch, "root_actions") < 0) goto done;
        root_action = roots.view.buf;
    }
    const uint8_t *selected = mask.view.buf;
    for (Py_ssize_t g = 0; g < batch; g++) {
        if (!selected[g]) continue;
        if (self->pending_leaves[g] != 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "game %zd still has %d leaves from the previous select(): pass them to "
                         "expand_and_backup() (or reset the game) first",
                         g, self->pending_leaves[g]);
            goto done;
        }
        const int8_t state = root_node(self, g)->state;
        if (state != NODE_EXPANDED && state != NODE_TERMINAL) {
            PyErr_Format(PyExc_ValueError, "game %zd: the root is not expanded; call expand_roots() first", g);
            goto done;
        }
        if (root_action != NULL && root_action[g] != -1 && state == NODE_EXPANDED) {
            const GameView v = game_view(self, g);
            if (root_action[g] < 0 || root_action[g] >= self->num_actions ||
                find_edge(&v, root_node(self, g), (int32_t)root_action[g]) == NO_EDGE) {
                PyErr_Format(PyExc_ValueError, "game %zd: root action %lld is not a legal action of its root",
                             g, (long long)root_action[g]);
                goto done;
            }
        }
    }
    int64_t *game = out[0].view.buf, *parent = out[1].view.buf, *action = out[2].view.buf,
            *node = out[3].view.buf;
    Py_ssize_t count = 0, active = 0;
    Py_BEGIN_ALLOW_THREADS
    FOR_GAMES(self, REGION_SELECT, batch >= PARALLEL_MIN_GAMES, g, {
        const Py_ssize_t at = g * max_leaves;
        self->leaf_count[g] = selected[g] ? select_game(self, g, max_leaves, simulation_limit,
                                                        root_action ? (int32_t)root_action[g] : -1,
                                                        parent + at, action + at, node + at)
                                          : 0;
    });
    for (Py_ssize_t g = 0; g < batch; g++) {
        const Py_ssize_t at = g * max_leaves;
        for (int32_t i = 0; i < self->leaf_count[g]; i++, count++) {
            game[count] = g;
            parent[count] = parent[at + i];
            action[count] = action[at + i];
            node[count] = node[at + i];
        }
        active += selected[g] && !self->full[g] && self->simulations[g] < simulation_limit &&
                  root_node(self, g)->state == NODE_EXPANDED;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(nn)", count, active);
done:
    for (int i = 0; i < 4; i++) release(&out[i]);
    release(&mask);
    release(&roots);
    return result;
}
GUARDED(tree_select)

/* expand_and_backup(game, node, priors, legal, values, terminal): evaluations of the leaves
 * returned by select, in any order. */
/* Every (game, node) must be a distinct leaf awaiting evaluation (from select(), once);
 * pending is set to -1 while checking to catch duplicates, then restored. 0, or -1 with a
 * ValueError naming the first bad leaf. */
static int check_pending_leaves(TreeObject *self, const int64_t *game, const int64_t *node,
                                Py_ssize_t count)
{
    const Py_ssize_t batch = self->batch_size, m = self->max_nodes;
    Py_ssize_t checked = 0;
    for (; checked < count; checked++) {
        const int64_t g = game[checked], i = node[checked];
        if (g < 0 || g >= batch || i < 0 || i >= m) {
            PyErr_Format(PyExc_ValueError, "leaf %zd: (game %lld, node %lld) is out of range", checked,
                         (long long)g, (long long)i);
            break;
        }
        Node *leaf = &self->nodes[g * m + i];
        if ((leaf->state != NODE_NEW && leaf->state != NODE_NO_ROOM) || leaf->pending != 1 ||
            leaf->parent == NO_NODE) {
            PyErr_Format(PyExc_ValueError,
                         "leaf %zd: node %lld of game %lld is not a leaf awaiting evaluation (from "
                         "select(), once)",
                         checked, (long long)i, (long long)g);
            break;
        }
        leaf->pending = -1;
    }
    for (Py_ssize_t j = 0; j < checked; j++) self->nodes[game[j] * m + node[j]].pending = 1;
    return checked < count ? -1 : 0;
}

static PyObject *tree_expand_and_backup_unguarded(TreeObject *self, PyObject *args)
{
    PyObject *objects[6];
    Buffer game_buffer = {0}, node_buffer = {0}, priors = {0}, legal = {0}, values = {0}, terminal = {0};
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOO", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4],
                          &objects[5]))
        return NULL;
    const Py_ssize_t a_count = self->num_actions, batch = self->batch_size;
    if (borrow(objects[0], &game_buffer, 0, KIND_INT64, -1, "game") < 0) return NULL;
    const Py_ssize_t count = game_buffer.view.len / 8;
    if (borrow(objects[1], &node_buffer, 0, KIND_INT64, count, "node") < 0 ||
        borrow(objects[2], &priors, 0, KIND_FLOAT32, count * a_count, "priors") < 0 ||
        borrow(objects[3], &legal, 0, KIND_BOOL, count * a_count, "legal") < 0 ||
        borrow(objects[4], &values, 0, KIND_FLOAT32, count, "values") < 0 ||
        borrow(objects[5], &terminal, 0, KIND_BOOL, count, "terminal") < 0)
        goto done;
    const int64_t *game = game_buffer.view.buf, *node = node_buffer.view.buf;
    const float *prior = priors.view.buf, *value = values.view.buf;
    const uint8_t *legal_mask = legal.view.buf, *is_terminal = terminal.view.buf;
    if (check_pending_leaves(self, game, node, count) < 0 ||
        check_evaluations(self, count, prior, legal_mask, value, is_terminal, "expand_and_backup") < 0) {
        goto done;
    }
    /* Group the leaves by game (counting sort) so games run in parallel without sharing nodes. */
    int32_t *start = self->group_start, *order = self->scratch;
    Py_BEGIN_ALLOW_THREADS
    memset(start, 0, (size_t)(batch + 1) * sizeof(int32_t));
    for (Py_ssize_t j = 0; j < count; j++) start[game[j] + 1]++;
    for (Py_ssize_t g = 0; g < batch; g++) start[g + 1] += start[g];
    for (Py_ssize_t j = 0; j < count; j++) order[start[game[j]]++] = (int32_t)j;
    for (Py_ssize_t g = batch; g > 0; g--) start[g] = start[g - 1];
    start[0] = 0;
    FOR_GAMES(self, REGION_EXPAND, batch >= PARALLEL_MIN_GAMES && count >= PARALLEL_MIN_GAMES, g, {
        GameView v = game_view(self, g);
        for (int32_t k = start[g]; k < start[g + 1]; k++) {
            const Py_ssize_t j = order[k];
            expand_node(self, g, &v, (int32_t)node[j], prior + j * a_count, legal_mask + j * a_count, value[j],
                        is_terminal[j], 1);
            self->pending_leaves[g]--;
        }
    });
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    release(&terminal);
    release(&values);
    release(&legal);
    release(&priors);
    release(&node_buffer);
    release(&game_buffer);
    return result;
}
GUARDED(tree_expand_and_backup)

/* Undo the selection of pending leaf `id` of game g (its marks are already checked): the path's
 * in-flight marks and the simulation count go back, and a leaf node this selection created
 * (NODE_NEW: nothing else leaves one behind) is unlinked and freed. Undone in the reverse order
 * of selection, the free list and each parent's tried edges come back exactly as they were. */
static void abandon_leaf(TreeObject *t, Py_ssize_t g, int32_t id)
{
    GameView v = game_view(t, g);
    Node *leaf = &v.node[id];
    release_path(&v, id);
    t->simulations[g]--;
    t->pending_leaves[g]--;
    if (leaf->state != NODE_NEW) return; /* NO_ROOM: an old node selected for re-evaluation */
    Node *parent = &v.node[leaf->parent];
    Edge *edge = &v.edge[parent->first_edge + leaf->edge];
    edge->child = NO_NODE;
    /* Its first try moved it into the tried part: give the place back; a root action chosen
     * by the caller need not be the best untried edge, so the candidate is found again (the
     * order of the others does not matter, see the top). */
    if (leaf->edge == parent->tried - 1 && edge->visits == 0) {
        parent->tried--;
        promote_best_untried(&v, parent);
    }
    leaf->state = NODE_FREE;
    leaf->parent = NO_NODE;
    leaf->pending = 0;
    t->free_list[g * t->max_nodes + t->free_count[g]++] = id;
}

/* abandon(game, node): leaves returned by select that will not be evaluated (the evaluator
 * failed); the tree is left as it was before that select, but for terminal leaves it backed up
 * at once, collisions counted and a buffer-full mark. */
static PyObject *tree_abandon_unguarded(TreeObject *self, PyObject *args)
{
    PyObject *objects[2];
    Buffer game_buffer = {0}, node_buffer = {0};
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OO", &objects[0], &objects[1])) return NULL;
    if (borrow(objects[0], &game_buffer, 0, KIND_INT64, -1, "game") < 0) return NULL;
    const Py_ssize_t count = game_buffer.view.len / 8;
    if (borrow(objects[1], &node_buffer, 0, KIND_INT64, count, "node") < 0) goto done;
    const int64_t *game = game_buffer.view.buf, *node = node_buffer.view.buf;
    if (check_pending_leaves(self, game, node, count) < 0) goto done;
    for (Py_ssize_t j = count - 1; j >= 0; j--) abandon_leaf(self, game[j], (int32_t)node[j]);
    result = Py_NewRef(Py_None);
done:
    release(&node_buffer);
    release(&game_buffer);
    return result;
}
GUARDED(tree_abandon)

/* expand_roots(games, priors (B, A), legal (B, A), values (B,), terminal (B,)) */
static PyObject *tree_expand_roots_unguarded(TreeObject *self, PyObject *args)
{
    PyObject *objects[5];
    Buffer mask = {0}, priors = {0}, legal = {0}, values = {0}, terminal = {0};
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOO", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4]))
        return NULL;
    const Py_ssize_t batch = self->batch_size, a_count = self->num_actions;
    if (borrow(objects[0], &mask, 0, KIND_BOOL, batch, "games") < 0 ||
        borrow(objects[1], &priors, 0, KIND_FLOAT32, batch * a_count, "priors") < 0 ||
        borrow(objects[2], &legal, 0, KIND_BOOL, batch * a_count, "legal") < 0 ||
        borrow(objects[3], &values, 0, KIND_FLOAT32, batch, "values") < 0 ||
        borrow(objects[4], &terminal, 0, KIND_BOOL, batch, "terminal") < 0)
        goto done;
    const uint8_t *selected = mask.view.buf, *is_terminal = terminal.view.buf, *legal_mask = legal.view.buf;
    const float *prior = priors.view.buf, *value = values.view.buf;
    for (Py_ssize_t g = 0; g < batch; g++) {
        if (!selected[g]) continue;
        const int8_t state = root_node(self, g)->state;
        if (state != NODE_NEW && state != NODE_NO_ROOM) {
            PyErr_Format(PyExc_ValueError, "game %zd: the root is already expanded", g);
            goto done;
        }
        if (self->pending_leaves[g] != 0) {
            PyErr_Format(PyExc_RuntimeError, "game %zd has leaves awaiting expand_and_backup()", g);
            goto done;
        }
        if (check_evaluations(self, 1, prior + g * a_count, legal_mask + g * a_count, value + g,
                              is_terminal + g, "expand_roots") < 0)
            goto done;
    }
    for (Py_ssize_t g = 0; g < batch; g++) {
        if (!selected[g]) continue;
        GameView v = game_view(self, g);
        expand_node(self, g, &v, self->root[g], prior + g * a_count, legal_mask + g * a_count, value[g],
                    is_terminal[g], 0);
    }
    result = Py_NewRef(Py_None);
done:
    release(&terminal);
    release(&values);
    release(&legal);
    release(&priors);
    release(&mask);
    return result;
}
GUARDED(tree_expand_roots)

/* mix_root_noise(games, noise float64 (B, A), fraction): prior = (1 - f) * prior + f * noise[a]
 * on every edge of each selected root; actions without an edge (illegal) are never touched. */
static PyObject *tree_mix_root_noise_unguarded(TreeObject *self, PyObject *args)
{
    PyObject *mask_object, *noise_object;
    double fraction;
    Buffer mask = {0}, noise = {0};
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOd", &mask_object, &noise_object, &fraction)) return NULL;
    const Py_ssize_t batch = self->batch_size, a_count = self->num_actions;
    if (!(fraction >= 0.0 && fraction <= 1.0)) {
        char text[32];
        fail(PyExc_ValueError, "fraction must be in [0, 1], got %s", show_double(text, sizeof(text), fraction));
        return NULL;
    }
    if (borrow(mask_object, &mask, 0, KIND_BOOL, batch, "games") < 0 ||
        borrow(noise_object, &noise, 0, KIND_FLOAT64, batch * a_count, "noise") < 0)
        goto done;
    const uint8_t *selected = mask.view.buf;
    const double *mix = noise.view.buf;
    for (Py_ssize_t g = 0; g < batch; g++) {
        if (!selected[g]) continue;
        if (root_node(self, g)->state != NODE_EXPANDED) {
            PyErr_Format(PyExc_ValueError, "game %zd: the root is not expanded", g);
            goto done;
        }
        for (Py_ssize_t a = 0; a < a_count; a++)
            if (!(mix[g * a_count + a] >= 0.0 && mix[g * a_count + a] <= 1.0)) {
                PyErr_Format(PyExc_ValueError, "noise[%zd, %zd] is not in [0, 1]", g, a);
                goto done;
            }
    }
    for (Py_ssize_t g = 0; g < batch; g++) {
        if (!selected[g]) continue;
        GameView v = game_view(self, g);
        const Node *root = root_node(self, g);
        Edge *end = v.edge + root->first_edge + root->num_edges;
        for (Edge *e = v.edge + root->first_edge; e < end; e++)
            e->prior = (float)((1.0 - fraction) * (double)e->prior + fraction * mix[g * a_count + e->action]);
        promote_best_untried(&v, root);
    }
    result = Py_NewRef(Py_None);
done:
    release(&noise);
    release(&mask);
    return result;
}
GUARDED(tree_mix_root_noise)

/* advance(games, actions int64 (B,)): subtree reuse after the move actions[g] in each selected game. */
static PyObject *tree_advance_unguarded(TreeObject *self, PyObject *args)
{
    PyObject *mask_object, *actions_object;
    Buffer mask = {0}, actions = {0};
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OO", &mask_object, &actions_object)) return NULL;
    const Py_ssize_t batch = self->batch_size;
    if (borrow(mask_object, &mask, 0, KIND_BOOL, batch, "games") < 0 ||
        borrow(actions_object, &actions, 0, KIND_INT64, batch, "actions") < 0)
        goto done;
    const uint8_t *selected = mask.view.buf;
    const int64_t *action = actions.view.buf;
    for (Py_ssize_t g = 0; g < batch; g++) {
        if (!selected[g]) continue;
        if (action[g] < 0 || action[g] >= self->num_actions) {
            PyErr_Format(PyExc_ValueError, "game %zd: action %lld is out of range 0..%d", g, (long long)action[g],
                         self->num_actions - 1);
            goto done;
        }
        if (self->pending_leaves[g] != 0) {
            PyErr_Format(PyExc_RuntimeError, "game %zd has leaves awaiting expand_and_backup()", g);
            goto done;
        }
        GameView v = game_view(self, g);
        const Node *root = root_node(self, g);
        if (root->state == NODE_TERMINAL) {
            PyErr_Format(PyExc_ValueError, "game %zd: the root is terminal (the game is over); reset it", g);
            goto done;
        }
        if (root->state == NODE_EXPANDED && find_edge(&v, root, (int32_t)action[g]) == NO_EDGE) {
            PyErr_Format(PyExc_ValueError, "game %zd: action %lld is not legal at the root", g, (long long)action[g]);
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    FOR_GAMES(self, REGION_ADVANCE, batch >= PARALLEL_MIN_GAMES, g,
              if (selected[g]) advance_game(self, g, (int32_t)action[g]));
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    release(&actions);
    release(&mask);
    return result;
}
GUARDED(tree_advance)

/* An edge's mean value Q, as root_arrays reports it (float32): Gumbel root selection computes
 * with these same values, so that it chooses as its NumPy formulas over root_arrays do. */
static float edge_q(const Edge *e)
{
    return e->visits > 0 ? (float)(e->value_sum / e->visits) : 0.0f;
}

/* The spread of the values backed up through an edge: their population variance, as
 * root_arrays reports it (float32); 0 while unvisited. */
static float edge_variance(const Edge *e)
{
    if (e->visits <= 0) return 0.0f;
    const double mean = e->value_sum / e->visits;
    const double variance = e->value_sq_sum / e->visits - mean * mean;
    return variance > 0.0 ? (float)variance : 0.0f; /* rounding can go a hair below 0 */
}

/* root_arrays(visits int32 (B, A), q float32 (B, A), priors float32 (B, A), legal bool (B, A),
 * variance float32 (B, A)): dense per-action statistics of every root; zero where there is no
 * edge (and q and variance where unvisited). */
static PyObject *tree_root_arrays_unguarded(TreeObject *self, PyObject *args)
{
    PyObject *objects[5];
    Buffer visits = {0}, q = {0}, priors = {0}, legal = {0}, variance = {0};
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOO", &objects[0], &objects[1], &objects[2], &objects[3],
                          &objects[4]))
        return NULL;
    const Py_ssize_t batch = self->batch_size, a_count = self->num_actions;
    if (borrow(objects[0], &visits, 1, KIND_INT32, batch * a_count, "visits") < 0 ||
        borrow(objects[1], &q, 1, KIND_FLOAT32, batch * a_count, "q") < 0 ||
        borrow(objects[2], &priors, 1, KIND_FLOAT32, batch * a_count, "priors") < 0 ||
        borrow(objects[3], &legal, 1, KIND_BOOL, batch * a_count, "legal") < 0 ||
        borrow(objects[4], &variance, 1, KIND_FLOAT32, batch * a_count, "variance") < 0)
        goto done;
    int32_t *out_visits = visits.view.buf;
    float *out_q = q.view.buf, *out_prior = priors.view.buf, *out_variance = variance.view.buf;
    uint8_t *out_legal = legal.view.buf;
    memset(out_visits, 0, (size_t)(batch * a_count) * sizeof(int32_t));
    memset(out_q, 0, (size_t)(batch * a_count) * sizeof(float));
    memset(out_prior, 0, (size_t)(batch * a_count) * sizeof(float));
    memset(out_legal, 0, (size_t)(batch * a_count));
    memset(out_variance, 0, (size_t)(batch * a_count) * sizeof(float));
    for (Py_ssize_t g = 0; g < batch; g++) {
        GameView v = game_view(self, g);
        const Node *root = root_node(self, g);
        if (root->state != NODE_EXPANDED) continue;
        const Edge *end = v.edge + root->first_edge + root->num_edges;
        for (const Edge *e = v.edge + root->first_edge; e < end; e++) {
            const Py_ssize_t at = g * a_count + e->action;
            out_visits[at] = e->visits;
            out_q[at] = edge_q(e);
            out_prior[at] = e->prior;
            out_legal[at] = 1;
            out_variance[at] = edge_variance(e);
        }
    }
    result = Py_NewRef(Py_None);
done:
    release(&variance);
    release(&legal);
    release(&priors);
    release(&q);
    release(&visits);
    return result;
}
GUARDED(tree_root_arrays)

/* Gumbel root selection's choice for game g's next simulation (py_util/gumbel.py, whose
 * module docstring defines every term; GumbelRoots.root_actions is this, batched in NumPy
 * terms, and tests/test_gumbel.py checks one against the other): among the root's actions
 * whose visits this move equal the halving schedule's target, the one maximising
 * g + log prior + sigma(completed q), ties to the lower action; -1 where none qualifies.
 * The constants c_visit, c_scale and min_prior are gumbel.py's C_VISIT, C_SCALE, MIN_PRIOR. */
typedef struct {
    double c_visit, c_scale, min_prior;
} GumbelConstants;

static int64_t gumbel_root_action(const TreeObject *t, Py_ssize_t g, const double *gumbel,
                                  const int64_t *base_visits, double root_value, const int64_t *table,
                                  int considered, int simulations, GumbelConstants c)
{
    const Node *root = root_node(t, g);
    if (root->state != NODE_EXPANDED || root->num_edges == 0) return -1;
    const int32_t done = t->simulations[g];
    const int m = root->num_edges < considered ? root->num_edges : considered;
    if (done >= simulations || m <= 0) return -1;
    const int64_t target = table[(Py_ssize_t)m * simulations + done];
    const GameView v = game_view(t, g);
    const Edge *first = v.edge + root->first_edge, *end = first + root->num_edges;
    /* The mixed value of unvisited actions, and the range of completed q. */
    double total = 0.0, mass = 0.0, weighted = 0.0;
    int32_t most = 0;
    for (const Edge *e = first; e < end; e++) {
        total += e->visits;
        if (e->visits > most) most = e->visits;
        if (e->visits > 0) {
            /* float32, as NumPy's maximum of the float32 priors and the Python float gives */
            const double p = e->prior > c.min_prior ? e->prior : (float)c.min_prior;
            mass += p;
            weighted += p * (double)edge_q(e);
        }
    }
    const double mixed = (root_value + total * (mass > 0 ? weighted / mass : 0.0)) / (1.0 + total);
    double low = INFINITY, high = -INFINITY;
    for (const Edge *e = first; e < end; e++) {
        const double q = e->visits > 0 ? (double)edge_q(e) : mixed;
        if (q < low) low = q;
        if (q > high) high = q;
    }
    const double scale = high > low ? high - low : 1.0;
    const double weight = (c.c_visit + most) * c.c_scale;
    int64_t best = -1;
    double best_score = -INFINITY;
    for (const Edge *e = first; e < end; e++) {
        const Py_ssize_t at = g * t->num_actions + e->action;
        if (e->visits - base_visits[at] != target) continue;
        const double q = e->visits > 0 ? (double)edge_q(e) : mixed;
        const double prior = e->prior > c.min_prior ? (double)e->prior : c.min_prior;
        const double score = gumbel[at] + log(prior) + weight * ((q - low) / scale);
        if (best < 0 || score > best_score || (score == best_score && e->action < best)) {
            best = e->action;
            best_score = score;
        }
    }
    return best;
}

/* gumbel_root_actions(games bool (B,), gumbel float64 (B, A), base_visits int64 (B, A),
 * root_values float64 (B,), table int64 (considered + 1, simulations), considered,
 * simulations, c_visit, c_scale, min_prior, out int64 (B,)): out[g] = gumbel_root_action for
 * the chosen games, -1 for the others; over games on the thread team. */
static PyObject *tree_gumbel_root_actions_unguarded(TreeObject *self, PyObject *args)
{
    PyObject *objects[6];
    int considered, simulations;
    GumbelConstants constants;
    Buffer mask = {0}, gumbel = {0}, base = {0}, values = {0}, table = {0}, out = {0};
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOiidddO", &objects[0], &objects[1], &objects[2], &objects[3],
                          &objects[4], &considered, &simulations, &constants.c_visit,
                          &constants.c_scale, &constants.min_prior, &objects[5]))
        return NULL;
    const Py_ssize_t batch = self->batch_size, a_count = self->num_actions;
    if (considered < 1 || simulations < 1) {
        PyErr_Format(PyExc_ValueError, "considered and simulations must be >= 1, got %d and %d",
                     considered, simulations);
        return NULL;
    }
    if (borrow(objects[0], &mask, 0, KIND_BOOL, batch, "games") < 0 ||
        borrow(objects[1], &gumbel, 0, KIND_FLOAT64, batch * a_count, "gumbel") < 0 ||
        borrow(objects[2], &base, 0, KIND_INT64, batch * a_count, "base_visits") < 0 ||
        borrow(objects[3], &values, 0, KIND_FLOAT64, batch, "root_values") < 0 ||
        borrow(objects[4], &table, 0, KIND_INT64, (Py_ssize_t)(considered + 1) * simulations, "table") < 0 ||
        borrow(objects[5], &out, 1, KIND_INT64, batch, "out") < 0)
        goto done;
    const uint8_t *chosen = mask.view.buf;
    const double *g_noise = gumbel.view.buf, *root_values = values.view.buf;
    const int64_t *base_visits = base.view.buf, *schedule = table.view.buf;
    int64_t *actions = out.view.buf;
    Py_BEGIN_ALLOW_THREADS
    FOR_GAMES(self, REGION_SELECT, batch >= PARALLEL_MIN_GAMES, g, {
        actions[g] = chosen[g] ? gumbel_root_action(self, g, g_noise, base_visits, root_values[g],
                                                    schedule, considered, simulations, constants)
                               : -1;
    });
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    release(&out);
    release(&table);
    release(&values);
    release(&base);
    release(&gumbel);
    release(&mask);
    return result;
}
GUARDED(tree_gumbel_root_actions)

/* game_status(out int64 (B, STATUS_COUNT)): one row per game, columns as STATUS_FIELDS. */
static PyObject *tree_game_status_unguarded(TreeObject *self, PyObject *args)
{
    PyObject *out_object;
    Buffer out = {0};
    if (!PyArg_ParseTuple(args, "O", &out_object)) return NULL;
    const Py_ssize_t batch = self->batch_size, m = self->max_nodes;
    if (borrow(out_object, &out, 1, KIND_INT64, batch * STATUS_COUNT, "out") < 0) return NULL;
    int64_t *row = out.view.buf;
    for (Py_ssize_t g = 0; g < batch; g++, row += STATUS_COUNT) {
        const int8_t state = root_node(self, g)->state;
        row[STATUS_ROOT] = self->root[g];
        row[STATUS_SIMULATIONS] = self->simulations[g];
        row[STATUS_FULL] = self->full[g];
        row[STATUS_NEEDS_EXPANSION] = state == NODE_NEW || state == NODE_NO_ROOM;
        row[STATUS_TERMINAL_ROOT] = state == NODE_TERMINAL;
        row[STATUS_NODES_IN_USE] = m - self->free_count[g];
        row[STATUS_EDGES_IN_USE] = self->edges_used[g];
        row[STATUS_OVERFLOWS] = self->overflows[g];
        row[STATUS_COLLISIONS] = self->collisions[g];
        row[STATUS_PENDING_LEAVES] = self->pending_leaves[g];
    }
    release(&out);
    Py_RETURN_NONE;
}
GUARDED(tree_game_status)

/* done(games, simulation_limit) -> bool: no selected game with an expanded root can still run a
 * simulation this move (budget reached or buffer full). Unexpanded roots count as not done. */
static PyObject *tree_done_unguarded(TreeObject *self, PyObject *args)
{
    PyObject *mask_object;
    int simulation_limit;
    Buffer mask = {0};
    if (!PyArg_ParseTuple(args, "Oi", &mask_object, &simulation_limit)) return NULL;
    if (borrow(mask_object, &mask, 0, KIND_BOOL, self->batch_size, "games") < 0) return NULL;
    const uint8_t *selected = mask.view.buf;
    int done = 1;
    for (Py_ssize_t g = 0; g < self->batch_size && done; g++) {
        if (!selected[g]) continue;
        const int8_t state = root_node(self, g)->state;
        if (state == NODE_TERMINAL) continue;
        done = state == NODE_EXPANDED && (self->full[g] || self->simulations[g] >= simulation_limit);
    }
    release(&mask);
    return PyBool_FromLong(done);
}
GUARDED(tree_done)

static int check_node(const TreeObject *self, Py_ssize_t g, Py_ssize_t node)
{
    if (g < 0 || g >= self->batch_size || node < 0 || node >= self->max_nodes) {
        PyErr_Format(PyExc_ValueError, "(game %zd, node %zd) is out of range (%d games, %d nodes)", g, node,
                     self->batch_size, self->max_nodes);
        return -1;
    }
    if (self->nodes[g * self->max_nodes + node].state == NODE_FREE) {
        PyErr_Format(PyExc_ValueError, "node %zd of game %zd is not in use", node, g);
        return -1;
    }
    return 0;
}

/* node_info(game, node) -> (state, parent, visits, value_sum, pending, num_edges, terminal_value) */
static PyObject *tree_node_info_unguarded(TreeObject *self, PyObject *args)
{
    Py_ssize_t g, node;
    if (!PyArg_ParseTuple(args, "nn", &g, &node) || check_node(self, g, node) < 0) return NULL;
    const Node *x = &self->nodes[g * self->max_nodes + node];
    return Py_BuildValue("(iiidiid)", x->state, x->parent, x->visits, x->value_sum, x->pending, x->num_edges,
                         (double)x->terminal_value);
}
GUARDED(tree_node_info)

/* node_edges(game, node, actions int64, priors float32, visits int32, value_sums float64,
 * children int64), each of num_actions items: fills the first num_edges and returns that count. */
static PyObject *tree_node_edges_unguarded(TreeObject *self, PyObject *args)
{
    Py_ssize_t g, node;
    PyObject *objects[5];
    Buffer out[5];
    memset(out, 0, sizeof(out));
    static const Kind kinds[5] = {KIND_INT64, KIND_FLOAT32, KIND_INT32, KIND_FLOAT64, KIND_INT64};
    static const char *const names[5] = {"actions", "priors", "visits", "value_sums", "children"};
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "nnOOOOO", &g, &node, &objects[0], &objects[1], &objects[2], &objects[3],
                          &objects[4]) ||
        check_node(self, g, node) < 0)
        return NULL;
    for (int i = 0; i < 5; i++)
        if (borrow(objects[i], &out[i], 1, kinds[i], self->num_actions, names[i]) < 0) goto done;
    const Node *x = &self->nodes[g * self->max_nodes + node];
    const Edge *edges = self->edges + g * self->max_edges + x->first_edge;
    const int32_t count = x->num_edges;
    int64_t *actions = out[0].view.buf, *children = out[4].view.buf;
    float *priors = out[1].view.buf;
    int32_t *visits = out[2].view.buf;
    double *value_sums = out[3].view.buf;
    for (int32_t i = 0; i < count; i++) {
        actions[i] = edges[i].action;
        priors[i] = edges[i].prior;
        visits[i] = edges[i].visits;
        value_sums[i] = edges[i].value_sum;
        children[i] = edges[i].child;
    }
    result = PyLong_FromLong(count);
done:
    for (int i = 0; i < 5; i++) release(&out[i]);
    return result;
}
GUARDED(tree_node_edges)

/* principal_edges(game, node, first, max_length) -> [(action, visits), ...]: from `node` down
 * the most visited edge (ties: the higher prior, then the earlier edge) while one has visits;
 * the first step along `first`'s edge when first >= 0, and [(first, 0)] when the node has no
 * edge for it; at most max_length steps when max_length > 0. Walked here, not in Python: an
 * analysis line holds a variation for every searched move, and walking them node by node
 * through node_edges took most of an analysis' time. */
static int append_edge(PyObject *list, Py_ssize_t action, int32_t visits)
{
    PyObject *step = Py_BuildValue("(ni)", action, (int)visits);
    const int failed = step == NULL || PyList_Append(list, step) < 0;
    Py_XDECREF(step);
    return failed ? -1 : 0;
}

static PyObject *tree_principal_edges_unguarded(TreeObject *self, PyObject *args)
{
    Py_ssize_t g, node, first, max_length;
    if (!PyArg_ParseTuple(args, "nnnn", &g, &node, &first, &max_length) || check_node(self, g, node) < 0)
        return NULL;
    PyObject *found = PyList_New(0);
    if (found == NULL) return NULL;
    const Node *nodes = self->nodes + g * self->max_nodes;
    const Edge *arena = self->edges + g * self->max_edges;
    int32_t at = (int32_t)node;
    while (at != NO_NODE && (max_length <= 0 || PyList_GET_SIZE(found) < max_length)) {
        const Node *x = &nodes[at];
        const Edge *edges = x->num_edges > 0 ? arena + x->first_edge : NULL;
        const int along_first = first >= 0 && PyList_GET_SIZE(found) == 0;
        int32_t best = -1;
        for (int32_t i = 0; i < x->num_edges; i++) {
            if (along_first) {
                if (edges[i].action == first) {
                    best = i;
                    break;
                }
            } else if (edges[i].visits > 0 &&
                       (best < 0 || edges[i].visits > edges[best].visits ||
                        (edges[i].visits == edges[best].visits && edges[i].prior > edges[best].prior))) {
                best = i;
            }
        }
        if (best < 0) {
            if (along_first && append_edge(found, first, 0) < 0) goto fail;
            break;
        }
        if (append_edge(found, edges[best].action, edges[best].visits) < 0) goto fail;
        at = edges[best].child;
    }
    return found;
fail:
    Py_DECREF(found);
    return NULL;
}
GUARDED(tree_principal_edges)

/* ------------------------------------------------------------------- construction, teardown */

/* The edge arena: reserved, zero, mapped page by page on first touch (see the top). */
static void *reserve_arena(size_t bytes)
{
#ifdef ARENA_MMAP
    void *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return memory == MAP_FAILED ? NULL : memory;
#else
    return PyMem_RawCalloc(1, bytes);
#endif
}

static void free_arena(void *memory, size_t bytes)
{
    if (memory == NULL) return;
#ifdef ARENA_MMAP
    munmap(memory, bytes);
#else
    (void)bytes;
    PyMem_RawFree(memory);
#endif
}

static void tree_free_buffers(TreeObject *self)
{
    void **buffers[] = {
        (void **)&self->nodes,          (void **)&self->root,
        (void **)&self->free_list,      (void **)&self->free_count,   (void **)&self->block_owner,
        (void **)&self->block_count,    (void **)&self->edges_used,   (void **)&self->simulations,
        (void **)&self->pending_leaves, (void **)&self->full,         (void **)&self->overflows,
        (void **)&self->collisions,     (void **)&self->scratch,      (void **)&self->keep,
        (void **)&self->leaf_count,     (void **)&self->group_start,  (void **)&self->edges_high,
    };
    for (size_t i = 0; i < sizeof(buffers) / sizeof(buffers[0]); i++) {
        PyMem_RawFree(*buffers[i]);
        *buffers[i] = NULL;
    }
    free_arena(self->edges, self->edge_bytes);
    self->edges = NULL;
}

/* The other buffers are zeroed with memset rather than calloc so that every page is mapped
 * here, once, and not on first touch in the middle of a search: they are small (61 bytes a
 * node) beside the edge arena. */
static int allocate(void *pointer, Py_ssize_t count, size_t itemsize)
{
    void *memory = PyMem_RawMalloc((size_t)count * itemsize);
    *(void **)pointer = memory;
    if (memory == NULL) return -1;
    memset(memory, 0, (size_t)count * itemsize);
    return 0;
}

static int tree_init(TreeObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"batch_size",    "num_actions",  "max_nodes",   "max_edges", "reuse_budget",
                               "c_puct",        "fpu_reduction", "virtual_loss", "num_threads", "adaptive",
                               "forced_playouts", NULL};
    int batch, num_actions, max_nodes, max_edges, reuse_budget, num_threads, adaptive = 1;
    double c_puct, fpu_reduction, virtual_loss, forced_playouts = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iiiiidddi|pd", keywords, &batch, &num_actions, &max_nodes,
                                     &max_edges, &reuse_budget, &c_puct, &fpu_reduction, &virtual_loss,
                                     &num_threads, &adaptive, &forced_playouts))
        return -1;
    if (!(forced_playouts >= 0.0 && isfinite(forced_playouts)))
        return fail(PyExc_ValueError, "forced_playouts must be finite and >= 0, got %g", forced_playouts);
    if (self->nodes != NULL) return fail(PyExc_RuntimeError, "Tree is already initialised");
    if (batch < 1) return fail(PyExc_ValueError, "batch_size must be >= 1, got %d", batch);
    if (num_actions < 1 || num_actions > MAX_ACTIONS)
        return fail(PyExc_ValueError, "num_actions must be in 1..%d, got %d", MAX_ACTIONS, num_actions);
    if (max_nodes < 2) return fail(PyExc_ValueError, "max_nodes must be >= 2, got %d", max_nodes);
    if (max_edges < num_actions)
        return fail(PyExc_ValueError, "max_edges (%d) must be >= num_actions (%d)", max_edges, num_actions);
    if (reuse_budget < 0 || reuse_budget >= max_nodes)
        return fail(PyExc_ValueError, "reuse_budget must be in 0..%d, got %d", max_nodes - 1, reuse_budget);
    if (!(c_puct >= 0.0 && isfinite(c_puct)) || !isfinite(fpu_reduction) ||
        !(virtual_loss >= 0.0 && isfinite(virtual_loss)))
        return fail(PyExc_ValueError, "c_puct and virtual_loss must be finite and >= 0, fpu_reduction finite");
    if (num_threads < 0 || num_threads > 1024)
        return fail(PyExc_ValueError, "num_threads must be in 0..1024 (0: OpenMP's default), got %d", num_threads);
#ifdef _OPENMP
    if (num_threads == 0) num_threads = omp_get_max_threads();
#else
    num_threads = 1;
#endif
    self->batch_size = batch;
    self->num_actions = num_actions;
    self->num_threads = adapt_clamp_threads(num_threads);
    self->adaptive = adaptive;
    memset(self->regions, 0, sizeof(self->regions));
    self->max_nodes = max_nodes;
    self->max_edges = max_edges;
    self->reuse_budget = reuse_budget;
    self->c_puct = c_puct;
    self->fpu_reduction = fpu_reduction;
    self->virtual_loss = virtual_loss;
    self->forced_playouts = forced_playouts;
    const Py_ssize_t nodes = (Py_ssize_t)batch * max_nodes, edges = (Py_ssize_t)batch * max_edges;
    self->edge_bytes = (size_t)edges * sizeof(Edge);
    self->edges = reserve_arena(self->edge_bytes);
    if (self->edges == NULL || allocate(&self->nodes, nodes, sizeof(Node)) ||
        allocate(&self->edges_high, batch, 4) ||
        allocate(&self->root, batch, 4) || allocate(&self->free_list, nodes, 4) ||
        allocate(&self->free_count, batch, 4) || allocate(&self->block_owner, nodes, 4) ||
        allocate(&self->block_count, batch, 4) || allocate(&self->edges_used, batch, 4) ||
        allocate(&self->simulations, batch, 4) || allocate(&self->pending_leaves, batch, 4) ||
        allocate(&self->full, batch, 1) || allocate(&self->overflows, batch, 8) ||
        allocate(&self->collisions, batch, 8) || allocate(&self->scratch, nodes, 4) ||
        allocate(&self->keep, nodes, 1) || allocate(&self->leaf_count, batch, 4) ||
        allocate(&self->group_start, batch + 1, 4)) {
        tree_free_buffers(self);
        PyErr_Format(PyExc_MemoryError, "cannot allocate search buffers for %d games x %d nodes x %d edges", batch,
                     max_nodes, max_edges);
        return -1;
    }
    for (Py_ssize_t g = 0; g < batch; g++) reset_game(self, g);
    return 0;
}

static void tree_dealloc(TreeObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    tree_free_buffers(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *tree_memory_bytes(TreeObject *self, void *closure)
{
    const Py_ssize_t nodes = (Py_ssize_t)self->batch_size * self->max_nodes,
                     edges = (Py_ssize_t)self->batch_size * self->max_edges;
    return PyLong_FromSsize_t(nodes * (Py_ssize_t)(sizeof(Node) + 4 + 4 + 4 + 1) + edges * (Py_ssize_t)sizeof(Edge) +
                              self->batch_size * 53 + 4);
}

static PyObject *tree_num_threads(TreeObject *self, void *closure) { return PyLong_FromLong(self->num_threads); }

/* thread_stats() -> (parallel_runs, serial_runs, failed_runs) over the parallel regions. */
static PyObject *tree_thread_stats(TreeObject *self, PyObject *unused)
{
    long long parallel = 0, serial = 0, failed = 0;
    for (size_t k = 0; k < sizeof(self->regions) / sizeof(self->regions[0]); k++) {
        parallel += self->regions[k].parallel_runs;
        serial += self->regions[k].serial_runs;
        failed += self->regions[k].failed_runs;
    }
    return Py_BuildValue("(LLL)", parallel, serial, failed);
}

static PyGetSetDef tree_getset[] = {
    {"memory_bytes", (getter)tree_memory_bytes, NULL, "Bytes the search buffers reserve (the edge arena's pages are mapped only as searches use them).", NULL},
    {"num_threads", (getter)tree_num_threads, NULL, "OpenMP threads used over games.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef tree_methods[] = {
    {"reset", (PyCFunction)tree_reset, METH_VARARGS, "reset(games bool (B,))"},
    {"thread_stats", (PyCFunction)tree_thread_stats, METH_NOARGS,
     "(parallel_runs, serial_runs, failed_runs) of the parallel regions so far."},
    {"select", (PyCFunction)tree_select, METH_VARARGS,
     "select(max_leaves, simulation_limit, games, out_game, out_parent, out_action, out_node) -> (count, active)"},
    {"expand_and_backup", (PyCFunction)tree_expand_and_backup, METH_VARARGS,
     "expand_and_backup(game int64, node int64, priors float32 (k, A), legal bool (k, A), values float32, "
     "terminal bool)"},
    {"abandon", (PyCFunction)tree_abandon, METH_VARARGS,
     "abandon(game int64, node int64): undo the selection of leaves that will not be evaluated"},
    {"expand_roots", (PyCFunction)tree_expand_roots, METH_VARARGS,
     "expand_roots(games, priors float32 (B, A), legal bool (B, A), values float32 (B,), terminal bool (B,))"},
    {"mix_root_noise", (PyCFunction)tree_mix_root_noise, METH_VARARGS,
     "mix_root_noise(games, noise float64 (B, A), fraction)"},
    {"advance", (PyCFunction)tree_advance, METH_VARARGS, "advance(games, actions int64 (B,))"},
    {"root_arrays", (PyCFunction)tree_root_arrays, METH_VARARGS, "root_arrays(visits, q, priors, legal, variance)"},
    {"gumbel_root_actions", (PyCFunction)tree_gumbel_root_actions, METH_VARARGS,
     "gumbel_root_actions(games, gumbel float64 (B, A), base_visits int64 (B, A), root_values float64 (B,), "
     "table int64 (considered + 1, simulations), considered, simulations, c_visit, c_scale, min_prior, "
     "out int64 (B,))"},
    {"game_status", (PyCFunction)tree_game_status, METH_VARARGS, "game_status(out int64 (B, len(STATUS_FIELDS)))"},
    {"done", (PyCFunction)tree_done, METH_VARARGS, "done(games, simulation_limit) -> bool"},
    {"node_info", (PyCFunction)tree_node_info, METH_VARARGS,
     "node_info(game, node) -> (state, parent, visits, value_sum, pending, num_edges, terminal_value)"},
    {"node_edges", (PyCFunction)tree_node_edges, METH_VARARGS,
     "node_edges(game, node, actions, priors, visits, value_sums, children) -> count"},
    {"principal_edges", (PyCFunction)tree_principal_edges, METH_VARARGS,
     "principal_edges(game, node, first, max_length) -> [(action, visits), ...]"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot tree_slots[] = {
    {Py_tp_doc, "Tree(batch_size, num_actions, max_nodes, max_edges, reuse_budget, c_puct, fpu_reduction, "
                "virtual_loss, num_threads, adaptive=True): one search tree per game in preallocated buffers."},
    {Py_tp_init, tree_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, tree_dealloc},
    {Py_tp_methods, tree_methods},
    {Py_tp_getset, tree_getset},
    {0, NULL},
};

static PyType_Spec tree_spec = {
    .name = "py_util._mcts.Tree",
    .basicsize = sizeof(TreeObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = tree_slots,
};

static int module_exec(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &tree_spec, NULL);
    if (type == NULL) return -1;
    if (PyModule_AddObjectRef(module, "Tree", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    Py_DECREF(type);
    PyObject *fields = PyTuple_New(STATUS_COUNT);
    if (fields == NULL) return -1;
    for (int i = 0; i < STATUS_COUNT; i++) {
        PyObject *name = PyUnicode_FromString(status_names[i]);
        if (name == NULL) {
            Py_DECREF(fields);
            return -1;
        }
        PyTuple_SET_ITEM(fields, i, name);
    }
    if (PyModule_AddObject(module, "STATUS_FIELDS", fields) < 0) {
        Py_DECREF(fields);
        return -1;
    }
    static const struct { const char *name; int value; } constants[] = {
        {"NO_NODE", NO_NODE},           {"NODE_FREE", NODE_FREE},         {"NODE_NEW", NODE_NEW},
        {"NODE_EXPANDED", NODE_EXPANDED}, {"NODE_TERMINAL", NODE_TERMINAL}, {"NODE_NO_ROOM", NODE_NO_ROOM},
        {"MAX_ACTIONS", MAX_ACTIONS},
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
    .m_name = "py_util._mcts",
    .m_doc = "Batched AlphaZero tree search in preallocated per-game buffers (knows nothing about Go).",
    .m_size = 0,
    .m_slots = module_slots,
};

PyMODINIT_FUNC PyInit__mcts(void) { return PyModuleDef_Init(&module_def); }
