/* clock.h - the monotonic clock the engine, the server and the REPL time things with (prefill and
 * decode milliseconds, deadlines, stream pacing). */
#ifndef MXL_CORE_CLOCK_H
#define MXL_CORE_CLOCK_H

/* Milliseconds on CLOCK_MONOTONIC: only differences mean anything. */
double mxl_now_ms(void);

#endif
