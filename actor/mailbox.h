/*
 * actor/mailbox.h -- the mailbox: an intrusive lock-free multi-producer,
 * single-consumer queue of messages with an "empty" bit (the idea of the Pony
 * runtime's message queue and of Vyukov's intrusive MPSC queue; written
 * here from the description, not copied). Internal to actor/.
 *
 * Layout: `head` is the producers' end (the last message pushed, with bit 0
 * = EMPTY); `tail` is the consumer's end: the last message consumed (or the
 * initial stub), whose `next` is the first pending message.
 *
 * Invariants:
 *  M1. A pending message (pushed, not yet popped) is reachable only from its
 *      mailbox: from tail->next along next links, or it is `head` while its
 *      predecessor's link is still being written. No run queue, timer or
 *      other structure holds it.
 *  M2. EMPTY is set in head only by the consumer (mb_mark_empty), and only
 *      when head == tail, i.e. no push has happened since the consumer last
 *      found the queue drained. Every push clears it (exchange writes a
 *      pointer without the bit).
 *  M3. Exactly one push sees EMPTY in the previous head (the exchange is a
 *      single atomic read-modify-write, so only one producer receives the
 *      tagged value); that producer, and no one else, schedules the actor.
 *  With M2 and M3 an actor is in exactly one place at any moment: on one run
 *  queue (or a worker's LIFO slot), running on one worker, or idle with
 *  EMPTY set. The consumer gives the actor up only by a successful
 *  mb_mark_empty; if that fails (a push came in) it reschedules the actor
 *  itself, so no push is ever left without an actor that will pop it.
 *
 * Memory orders:
 *  - push: the exchange is acq_rel: release publishes the message's header
 *    and payload to the consumer that later reads the link; acquire, when
 *    EMPTY was seen, makes the consumer's last writes to the actor's state
 *    (released by mb_mark_empty's CAS) visible to the scheduler path that
 *    follows. The link store is release: the consumer's acquire load of
 *    `next` then sees the payload.
 *  - pop: acquire load of tail->next (pairs with the link store).
 *  - mark_empty: CAS acq_rel on success (release: see above), relaxed on
 *    failure (nothing is read through the failed value).
 */
#ifndef RTUGW_ACTOR_MAILBOX_H
#define RTUGW_ACTOR_MAILBOX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct amsg;

#define MB_EMPTY ((uintptr_t)1)

typedef struct mb_head {
    _Atomic uintptr_t head;
} mb_head_t;

/* The consumer side lives in the actor's consumer cache line. */
typedef struct mb_tail {
    struct amsg *tail;
} mb_tail_t;

/* A message: the link the mailbox threads through it, then its header. */
typedef struct amsg {
    _Atomic(struct amsg *) next;
    uint32_t type;
    uint16_t len;
    uint8_t cls;  /* size class in the pool */
    uint8_t kind; /* AMSG_USER, AMSG_STOP */
    /* Aligned as malloc's memory is, so a handler may read a payload struct
     * in place: on 32-bit targets the header alone is 12 bytes, which would
     * leave a uint64_t member misaligned (ARM EABI wants 8). */
    _Alignas(max_align_t) unsigned char data[];
} amsg_t;

enum { AMSG_USER = 0, AMSG_STOP = 1 };

/* Starts empty (EMPTY set) with `stub` as the consumed end. Not concurrent
 * with anything: the slot is not reachable by senders while this runs. */
static inline void mb_init(mb_head_t *h, mb_tail_t *t, amsg_t *stub)
{
    atomic_store_explicit(&stub->next, NULL, memory_order_relaxed);
    t->tail = stub;
    /* release: a sender that acquires head sees the stub's link reset. */
    atomic_store_explicit(&h->head, (uintptr_t)stub | MB_EMPTY, memory_order_release);
}

/* Any thread. Returns true if the mailbox was EMPTY: the caller must now
 * schedule the actor (M3). */
static inline bool mb_push(mb_head_t *h, amsg_t *m)
{
    atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
    uintptr_t prev = atomic_exchange_explicit(&h->head, (uintptr_t)m, memory_order_acq_rel);
    amsg_t *p = (amsg_t *)(prev & ~MB_EMPTY);
    atomic_store_explicit(&p->next, m, memory_order_release);
    return (prev & MB_EMPTY) != 0;
}

/* Consumer only. Returns the next message or NULL; on success *consumed is
 * the previous tail, which no one references any more: the caller frees it.
 * The returned message stays the tail (stub) until the next pop. */
static inline amsg_t *mb_pop(mb_tail_t *t, amsg_t **consumed)
{
    amsg_t *tail = t->tail;
    amsg_t *next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (!next)
        return NULL;
    t->tail = next;
    *consumed = tail;
    return next;
}

/* Consumer only, after mb_pop returned NULL. true: the mailbox is now EMPTY
 * and the actor idle; the caller must not touch the actor again. false: a
 * push is in progress or done; the caller keeps the actor scheduled. */
static inline bool mb_mark_empty(mb_head_t *h, const mb_tail_t *t)
{
    uintptr_t expect = (uintptr_t)t->tail;
    return atomic_compare_exchange_strong_explicit(&h->head, &expect, expect | MB_EMPTY,
                                                   memory_order_acq_rel, memory_order_relaxed);
}

/* Any thread: a snapshot, true if idle with EMPTY set. */
static inline bool mb_is_idle(mb_head_t *h)
{
    return (atomic_load_explicit(&h->head, memory_order_acquire) & MB_EMPTY) != 0;
}

#endif
