/*
 * actor/runq.h -- a worker's run queue: a bounded lock-free multi-producer,
 * multi-consumer FIFO of runnable actors (the sequence-numbered ring of
 * Dmitry Vyukov's bounded MPMC queue, written here from its description).
 * Internal to actor/.
 *
 * Producers: the owning worker (a newly runnable actor pushed out of its
 * LIFO slot, an actor rescheduled after its batch) and threads that are not
 * workers (the inject path). Consumers: the owner, and thieves.
 *
 * Invariants:
 *  R1. Cell i holds seq == pos when free for the enqueue at position pos,
 *      seq == pos + 1 when it holds the item enqueued at pos, and seq ==
 *      pos + capacity after that item was dequeued (free for the next lap).
 *      A producer claims pos by CAS on enq_pos only when seq == pos; a
 *      consumer claims pos by CAS on deq_pos only when seq == pos + 1. So a
 *      cell is written by one producer, then read by one consumer, in turn.
 *  R2. Capacity >= the number of actor slots. An actor is on at most one
 *      queue at a time (mailbox invariant M3), so a push never finds the
 *      queue full; a full queue is a broken invariant and aborts.
 *  R3. enq_pos != deq_pos means an item is queued or being queued: a worker
 *      that sees this does not park (see the parking protocol in sched.c).
 *
 * Memory orders: the seq store that publishes an item is release (data
 * before seq), the consumer's seq load is acquire; the seq store that frees
 * a cell is release (the consumer read data before). The CASes on the
 * positions are seq_cst: enq_pos's CAS and the parking worker's loads of
 * enq_pos/deq_pos take part in the seq_cst order the no-lost-wake-up
 * argument uses (sched.c). Position loads inside the retry loops are relaxed:
 * a stale value only makes the CAS fail.
 */
#ifndef RTUGW_ACTOR_RUNQ_H
#define RTUGW_ACTOR_RUNQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

struct actor;

typedef struct runq_cell {
    _Atomic size_t seq;
    struct actor *item;
} runq_cell_t;

typedef struct runq {
    _Alignas(64) _Atomic size_t enq_pos;
    _Alignas(64) _Atomic size_t deq_pos;
    _Alignas(64) runq_cell_t *cells;
    size_t mask;
} runq_t;

/* capacity: a power of two. */
static inline int runq_init(runq_t *q, size_t capacity)
{
    q->cells = calloc(capacity, sizeof *q->cells);
    if (!q->cells)
        return -1;
    q->mask = capacity - 1;
    for (size_t i = 0; i < capacity; i++)
        atomic_store_explicit(&q->cells[i].seq, i, memory_order_relaxed);
    atomic_store_explicit(&q->enq_pos, 0, memory_order_relaxed);
    atomic_store_explicit(&q->deq_pos, 0, memory_order_relaxed);
    return 0;
}

static inline void runq_free(runq_t *q)
{
    free(q->cells);
    q->cells = NULL;
}

static inline void runq_push(runq_t *q, struct actor *a)
{
    size_t pos = atomic_load_explicit(&q->enq_pos, memory_order_relaxed);
    runq_cell_t *c;

    for (;;) {
        c = &q->cells[pos & q->mask];
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)pos;
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->enq_pos, &pos, pos + 1,
                                                      memory_order_seq_cst,
                                                      memory_order_relaxed))
                break;
        } else if (dif < 0) {
            abort(); /* R2 broken: more queued actors than slots */
        } else {
            pos = atomic_load_explicit(&q->enq_pos, memory_order_relaxed);
        }
    }
    c->item = a;
    atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
}

/* NULL if empty (or the item at the head is still being published). */
static inline struct actor *runq_pop(runq_t *q)
{
    size_t pos = atomic_load_explicit(&q->deq_pos, memory_order_relaxed);
    runq_cell_t *c;

    for (;;) {
        c = &q->cells[pos & q->mask];
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)(pos + 1);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->deq_pos, &pos, pos + 1,
                                                      memory_order_seq_cst,
                                                      memory_order_relaxed))
                break;
        } else if (dif < 0) {
            return NULL;
        } else {
            pos = atomic_load_explicit(&q->deq_pos, memory_order_relaxed);
        }
    }
    struct actor *a = c->item;
    atomic_store_explicit(&c->seq, pos + q->mask + 1, memory_order_release);
    return a;
}

/* R3: seq_cst loads, part of the parking protocol's total order. */
static inline bool runq_maybe_nonempty(runq_t *q)
{
    size_t d = atomic_load_explicit(&q->deq_pos, memory_order_seq_cst);
    size_t e = atomic_load_explicit(&q->enq_pos, memory_order_seq_cst);
    return e != d;
}

#endif
