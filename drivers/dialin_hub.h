/*
 * drivers/dialin_hub.h -- drivers/' own: one listening socket shared by the
 * dial-in buses of one ADDR:PORT (dialin_hub.c), and the registry of such
 * sockets the gateway owns (driver_dialin_ports_t, driver.h). dialin.c is
 * its only caller: a bus's driver joins its port's hub as a member, and
 * takes from it the connections that registered as its DTU's.
 */
#ifndef RTUGW_DRIVERS_DIALIN_HUB_H
#define RTUGW_DRIVERS_DIALIN_HUB_H

#include "drivers/driver.h"

typedef struct dialin_member dialin_member_t;

/* Joins cfg's ADDR:PORT in ports (NULL: a hub of its own), creating the
 * hub at the first member; d is the member's driver (its counters). NULL
 * with err: a registration that the port's others make ambiguous (none, or
 * one a prefix of another's), or out of memory. */
dialin_member_t *dialin_hub_join(driver_dialin_ports_t *ports, const driver_dialin_config_t *cfg, driver_t *d,
                                 char *err, size_t errcap);
/* Leaves: a connection registered and not taken is closed; the last
 * member out closes the hub. Any thread. */
void dialin_hub_leave(dialin_member_t *m);
/* Listens, if the hub does not yet: 0, or -errno with err. */
int dialin_hub_listen(dialin_member_t *m, char *err, size_t errcap);
/* The fds a member's owner polls: the hub's (readable when the hub has work:
 * a connection to accept, registration bytes, a registration's deadline
 * passed) and the member's bell (readable when a connection registered as
 * its own waits to be taken). */
int dialin_hub_fd(const dialin_member_t *m);
int dialin_member_bell(const dialin_member_t *m);
/* The hub's work (accept, read registrations, expire the slow ones), then
 * the connection registered as m's, if any: its fd (m's from now on), or -1. */
int dialin_hub_take(dialin_member_t *m);
/* Whether a connection registered as m's waits (after the hub's work). */
bool dialin_hub_waiting(dialin_member_t *m);
/* "listen ADDR:PORT" and, on a shared port, how many buses share it. */
int dialin_hub_describe(const dialin_member_t *m, char *buf, size_t cap);

#endif
