/*
 * drivers/resolve.c -- a host name resolved without blocking its caller,
 * for the network backends (tcp.c, udp.c).
 *
 * getaddrinfo blocks, so a detached thread of its own asks it. The caller
 * gets the read end of a pipe whose write end that thread closes when it
 * has the answer: the caller's wait on that fd (for reading or writing)
 * wakes on the hang-up, since epoll and poll report it whatever was
 * asked. Then resolve_done() is true and resolve_result() gives the
 * address. A caller that gives up first (a close, a timeout) drops the job
 * and the thread finishes alone: the job is shared by reference count, and
 * the last one frees it. Only IPv4 is asked for (the ports take IPv4).
 */
#include "drivers/internal.h"

#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct driver_resolve {
    atomic_int refs;
    atomic_bool done;
    char host[DRIVER_TCP_HOST_MAX];
    char service[8];
    int socktype;
    int wfd;                        /* the thread closes it when done */
    int gai;                        /* getaddrinfo's answer: 0 or EAI_* */
    struct sockaddr_in addr;
};

static void release(driver_resolve_t *job)
{
    if (atomic_fetch_sub(&job->refs, 1) == 1)
        free(job);
}

static void *resolve_thread(void *arg)
{
    driver_resolve_t *job = arg;
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = job->socktype }, *res = NULL;
    job->gai = getaddrinfo(job->host, job->service, &hints, &res);
    if (job->gai == 0 && res && res->ai_addrlen == sizeof job->addr)
        memcpy(&job->addr, res->ai_addr, sizeof job->addr);
    else if (job->gai == 0)
        job->gai = EAI_FAMILY;
    if (res)
        freeaddrinfo(res);
    atomic_store(&job->done, true);
    close(job->wfd);   /* the hang-up wakes the owner */
    release(job);
    return NULL;
}

driver_resolve_t *resolve_start(const char *host, unsigned port, int socktype, int *fd, int *error)
{
    int p[2];
    driver_resolve_t *job = calloc(1, sizeof *job);
    if (!job || pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
        *error = job ? errno : ENOMEM;
        free(job);
        return NULL;
    }
    snprintf(job->host, sizeof job->host, "%s", host);
    snprintf(job->service, sizeof job->service, "%u", port);
    job->socktype = socktype;
    job->wfd = p[1];
    atomic_init(&job->refs, 2);
    atomic_init(&job->done, false);
    pthread_attr_t attr;
    pthread_t th;
    int e = pthread_attr_init(&attr);
    if (e == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        e = pthread_create(&th, &attr, resolve_thread, job);
        pthread_attr_destroy(&attr);
    }
    if (e != 0) {
        close(p[0]);
        close(p[1]);
        free(job);
        *error = e;
        return NULL;
    }
    *fd = p[0];
    return job;
}

bool resolve_done(const driver_resolve_t *job)
{
    return atomic_load(&job->done);
}

int resolve_result(const driver_resolve_t *job, struct sockaddr_in *addr)
{
    *addr = job->addr;
    return job->gai;
}

void resolve_drop(driver_resolve_t *job, int fd)
{
    if (fd >= 0)
        close(fd);
    if (job)
        release(job);
}
