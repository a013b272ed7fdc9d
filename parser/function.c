/*
 * parser/function.c -- what a request does to a slave: the one classifier of
 * function codes. Read-only mode refuses what may change a slave
 * (RTU_FN_CHANGES), a TLS role is granted classes (READ, WRITE,
 * DIAGNOSTICS, FILE, USER), and only what every slave can act on unasked
 * may be broadcast (RTU_FN_BROADCAST). Before this file each of those
 * policies kept its own list (the TCP front end, the TLS roles, the serial
 * slave front end and the bus), and a fifth list would have been one more
 * chance for them to disagree.
 *
 * CHANGES is an allow-list turned round: everything may change a slave
 * except what is known to only read. So diagnostics (8) change it unless
 * they are sub-function 0 (return query data: an echo); an encapsulated
 * interface (43) unless it is MEI 14 (read device identification); file
 * records (21), user-defined and unknown functions always may.
 */
#include "parser/rtu.h"

unsigned rtu_function_class(const uint8_t *pdu, size_t len)
{
    if (!pdu || len < 1)
        return RTU_FN_CHANGES;
    switch (pdu[0]) {
    case 1: case 2: case 3: case 4: case 24:
        return RTU_FN_READ;
    case 5: case 6: case 15: case 16: case 22:
        return RTU_FN_WRITE | RTU_FN_CHANGES | RTU_FN_BROADCAST;
    case 23:
        return RTU_FN_READ | RTU_FN_WRITE | RTU_FN_CHANGES;
    case 7: case 11: case 12: case 17:
        return RTU_FN_DIAGNOSTICS;
    case 8:   /* sub-function 0, return query data, only reads */
        return RTU_FN_DIAGNOSTICS | (len >= 3 && pdu[1] == 0 && pdu[2] == 0 ? 0 : RTU_FN_CHANGES);
    case 43:  /* MEI 14, read device identification; other MEI types are no class */
        return len >= 2 && pdu[1] == 14 ? RTU_FN_DIAGNOSTICS : RTU_FN_CHANGES;
    case 20:
        return RTU_FN_FILE;
    case 21:
        return RTU_FN_FILE | RTU_FN_CHANGES;
    default:
        return ((pdu[0] >= 65 && pdu[0] <= 72) || (pdu[0] >= 100 && pdu[0] <= 110) ? RTU_FN_USER : 0) |
               RTU_FN_CHANGES;
    }
}
