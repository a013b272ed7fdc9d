/*
 * parser/length.c -- how long a frame will be, from its first bytes, and
 * how long the line must be quiet before a frame is over.
 */
#include "parser/internal.h"

int rtu_response_length(const uint8_t *buf, size_t have)
{
    if (have < 2)
        return 0;
    uint8_t fc = buf[1];
    if (fc & 0x80)
        return 5;
    if (rtu_is_bit_read(fc) || rtu_is_register_read(fc))
        return have < 3 ? 0 : 5 + buf[2];
    if (fc == 5 || fc == 6 || fc == 15 || fc == 16)
        return 8;
    if (fc == 22)
        return 10;
    return -1;
}

int rtu_request_length(const uint8_t *buf, size_t have)
{
    if (have < 2)
        return 0;
    uint8_t fc = buf[1];
    if (fc >= 1 && fc <= 6)
        return 8;
    if (fc == 15 || fc == 16)
        return have < 7 ? 0 : 9 + buf[6];
    if (fc == 22)
        return 10;
    if (fc == 23)
        return have < 11 ? 0 : 13 + buf[10];
    return -1;
}

unsigned rtu_char_bits(unsigned data_bits, char parity, unsigned stop_bits)
{
    unsigned parity_bits = (parity == 'N' || parity == 'n' || parity == 0) ? 0 : 1;

    return 1 + data_bits + parity_bits + stop_bits;
}

/* Character times to nanoseconds, rounded up so a gap is never judged short. */
static uint64_t char_times_ns(unsigned halves, unsigned baud, unsigned char_bits)
{
    if (char_bits == 0)
        char_bits = 11;
    uint64_t num = (uint64_t)halves * char_bits * 1000000000ull;
    uint64_t den = 2ull * baud;
    return (num + den - 1) / den;
}

uint64_t rtu_t15_ns(unsigned baud, unsigned char_bits)
{
    if (baud == 0)
        return 0;
    return baud > 19200 ? 750000ull : char_times_ns(3, baud, char_bits);
}

uint64_t rtu_t35_ns(unsigned baud, unsigned char_bits)
{
    if (baud == 0)
        return 0;
    return baud > 19200 ? 1750000ull : char_times_ns(7, baud, char_bits);
}
