/*
 * daemon/internal.h -- what gw.c and control.c share, and nothing else.
 */
#ifndef RTUGW_DAEMON_INTERNAL_H
#define RTUGW_DAEMON_INTERNAL_H

#include "daemon/daemon.h"
#include "front/front.h"
#include "gateway/wiring.h"
#include "web/web.h"

/* control.c: signals, reload, graceful stop (I/O thread) */
int control_start(gw_t *gw);
void control_stop(gw_t *gw);

#endif
