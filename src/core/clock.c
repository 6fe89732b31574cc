/* clock.c - the monotonic clock (clock.h). */
#include "core/clock.h"

#include <time.h>

double mxl_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
