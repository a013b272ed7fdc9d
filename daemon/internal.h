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
/* gw.c: [http] on a reload, enabled turned on or off included; what could
 * not apply is named in restart (http.port ...), its first reason in err */
void gw_http_reload(gw_t *gw, const config_t *fresh, char *restart, size_t cap, char *err, size_t errcap);

#endif
