/*
 * adaptive_threads.h: OpenMP regions that fall back to one thread while other programs keep
 * the cores busy. Shared by kernels/go_cpu.c and py_util/mcts.c.
 *
 * Why. A parallel region ends at a barrier: it lasts as long as its slowest thread. When
 * another busy process shares a core with one of our threads, that thread is off the CPU
 * for whole scheduler slices (milliseconds) while our regions last 20-300 microseconds, so
 * nearly every region waits for it: on the 2-core development machine the rules engine and
 * the tree kept 30-41% of their quiet speed beside one busy process, less than one thread
 * alone does (56-76% of the team's quiet speed). Passive waiting (OMP_WAIT_POLICY=passive)
 * does not fix it: a region still waits for the descheduled thread, and waking sleeping
 * workers at every region cost 43-68% of the quiet rate (benchmarks/README.md has the figures).
 *
 * What. A parallel run times itself: the wall time of the whole region, and for each thread
 * the time from its own start to the end of its share of the loop (a thread that starts late
 * because it was off the CPU is late by its wait, not busy). With T threads sharing the work
 * evenly (static schedule), one thread alone would have needed about T times the fastest
 * thread's busy time. A descheduled worker cannot hide in that estimate: it either starts
 * late (the wall time grows, its busy time does not) or is preempted mid-share (its busy time
 * grows, the fastest thread's does not). `AdaptPolicy`, one per extension module (contention
 * is the machine's, not a call's), sums both over the recent team runs, stalls included,
 * with exponential decay over ADAPT_HORIZON_S of region time:
 *     speedup = sum(T * fastest_busy) / sum(wall).
 * When the speedup falls below ADAPT_MIN_SPEEDUP, every region of the module runs on one
 * thread for a back-off period, then the team is tried again from fresh sums, judged once
 * they hold ADAPT_PROBE_S of region time. The period doubles at each back-off (from
 * ADAPT_BACKOFF_MIN_S up to ADAPT_BACKOFF_MAX_S) and starts again from the minimum after a
 * long good spell. So the choice weighs what the stalls cost against what the second thread
 * saves, over enough regions to see both: a hiccup (another process' 4 ms slice every 100 ms
 * or so, seen under the other engineers' load) does not send a fast team to one thread, and
 * on a busy machine the team is tried about once a second, at a cost of ~20 ms.
 * The first team run of a process and the first after a back-off are not judged: they start
 * or wake the workers. The next few are slow too (the worker ran 2-3x slower than the master
 * for ~5 regions after a back-off on the development VM: a cold or down-clocked core), which
 * is why a try lasts ADAPT_PROBE_S and not a few regions. Regions shorter than
 * ADAPT_MIN_WALL_S are not judged: their speedup is all fork-and-join overhead.
 *
 * The records are plain data updated without locks: two Python threads running regions at
 * once (neither holds the GIL inside) can only blur a timing, never the results, which do
 * not depend on the thread count.
 */
#ifndef ADAPTIVE_THREADS_H
#define ADAPTIVE_THREADS_H

#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define ADAPT_MAX_THREADS 64
#define ADAPT_MIN_SPEEDUP 1.1
#define ADAPT_MIN_WALL_S 20e-6
#define ADAPT_HORIZON_S 0.1
#define ADAPT_PROBE_S 0.02
#define ADAPT_BACKOFF_MIN_S 0.002
#define ADAPT_BACKOFF_MAX_S 1.0

/* The decision, shared by all regions of an extension module. */
typedef struct {
    double serial_until; /* monotonic seconds: run on one thread until then */
    double backoff;      /* seconds on one thread at the next back-off */
    double last_backoff; /* when the last back-off started */
    double wall, serial; /* decayed sums over recent team runs: wall time, one-thread estimate */
    int warm;            /* 0: the next team run is not judged (it starts or wakes the workers) */
} AdaptPolicy;

/* Counts per kind of region, for tests and benchmarks. */
typedef struct {
    long long parallel_runs, serial_runs, failed_runs; /* failed: runs that started a back-off */
} AdaptStats;

/* One region's timing, on the caller's stack. */
typedef struct {
    AdaptPolicy *policy; /* NULL: not adaptive, the team always runs */
    AdaptStats *stats;
    int threads; /* team size asked for; 1 = the region runs serially (no timing) */
    int team;    /* team size OpenMP gave */
    double start;
    double busy[ADAPT_MAX_THREADS];
} AdaptRegion;

static inline double adapt_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline int adapt_clamp_threads(int threads)
{
    return threads < 1 ? 1 : threads > ADAPT_MAX_THREADS ? ADAPT_MAX_THREADS : threads;
}

/* Start a region of up to `max_threads` threads; `worth_it` is the caller's static test (enough
 * work for a team at all); `policy` NULL keeps the team always (the old behaviour). */
static inline void adapt_begin(AdaptRegion *r, AdaptPolicy *policy, AdaptStats *stats, int max_threads,
                               int worth_it)
{
    r->policy = policy;
    r->stats = stats;
    r->team = 1;
    r->threads = 1;
    if (max_threads <= 1 || !worth_it) return;
    r->start = adapt_now();
    if (policy != NULL && r->start < policy->serial_until) {
        stats->serial_runs++;
        return;
    }
    stats->parallel_runs++;
    r->threads = max_threads;
    r->team = max_threads;
    for (int i = 0; i < max_threads; i++) r->busy[i] = 0.0;
}

/* Inside the parallel region, around each thread's share of the loop. */
static inline double adapt_thread_start(const AdaptRegion *r) { return r->threads > 1 ? adapt_now() : 0.0; }

static inline void adapt_thread_end(AdaptRegion *r, double started)
{
    if (r->threads <= 1) return;
#ifdef _OPENMP
    const int id = omp_get_thread_num();
    if (id == 0) r->team = omp_get_num_threads();
    if (id < ADAPT_MAX_THREADS) r->busy[id] = adapt_now() - started;
#endif
}

/* After the region: add its timing to the policy's sums and decide the next regions' threads. */
static inline void adapt_end(AdaptRegion *r)
{
    AdaptPolicy *p = r->policy;
    if (r->threads <= 1 || p == NULL || r->team <= 1) return;
    const double now = adapt_now(), wall = now - r->start;
    if (wall < ADAPT_MIN_WALL_S) return;
    if (!p->warm) {
        p->warm = 1;
        return;
    }
    double fastest = r->busy[0];
    for (int i = 1; i < r->team && i < ADAPT_MAX_THREADS; i++)
        if (r->busy[i] < fastest) fastest = r->busy[i];
    /* exp(-wall / horizon) to first order: regions last well under the horizon. */
    const double decay = wall < ADAPT_HORIZON_S ? 1.0 - wall / ADAPT_HORIZON_S : 0.0;
    p->wall = p->wall * decay + wall;
    p->serial = p->serial * decay + r->team * fastest;
    if (p->wall >= ADAPT_PROBE_S && p->serial < ADAPT_MIN_SPEEDUP * p->wall) {
        r->stats->failed_runs++;
        if (p->backoff < ADAPT_BACKOFF_MIN_S || now - p->last_backoff > 10 * ADAPT_BACKOFF_MAX_S)
            p->backoff = ADAPT_BACKOFF_MIN_S;
        p->serial_until = now + p->backoff;
        p->last_backoff = now;
        p->backoff = p->backoff * 2 > ADAPT_BACKOFF_MAX_S ? ADAPT_BACKOFF_MAX_S : p->backoff * 2;
        p->wall = p->serial = 0.0;
        p->warm = 0;
    }
}

#endif /* ADAPTIVE_THREADS_H */
