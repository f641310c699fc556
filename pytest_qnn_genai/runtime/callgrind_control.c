/* Callgrind's client requests as functions a Python process can call through ctypes: the work
 * probe (runtime/work_probe.py) counts instructions only inside a program's execute calls. Built
 * by runtime/work.py with the C compiler and valgrind's own header (Debian package valgrind). */
#include <valgrind/callgrind.h>

void work_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void work_stop(const char *tag) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT(tag); }
int work_under_valgrind(void) { return RUNNING_ON_VALGRIND; }
