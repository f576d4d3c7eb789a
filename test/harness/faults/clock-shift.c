/*
 * clock-shift: an LD_PRELOAD shim that moves one process's wall clock (and only it) by an offset
 * in milliseconds read from a file, changeable while the process runs. The fault harness uses it
 * to give one real redis-server (or one node process) a wall clock that jumps, while the other
 * processes on the machine keep the true time (test/harness/faults/clock-shift.ts builds it).
 *
 *   LD_PRELOAD=/path/clock-shift.so CLOCK_SHIFT_FILE=/path/offset redis-server ...
 *
 * The file holds a signed integer: the offset in ms (`30000`, `-30000`, `0`). A missing file
 * means 0; a file that does not parse leaves the previous offset (writers should replace it
 * atomically: write a temp file, then rename). Without CLOCK_SHIFT_FILE the shim changes nothing.
 *
 * Shifted: clock_gettime on the realtime clocks (CLOCK_REALTIME, CLOCK_REALTIME_COARSE, and the
 * clocks that a real wall-clock step also moves: CLOCK_REALTIME_ALARM, CLOCK_TAI), gettimeofday,
 * time, timespec_get(TIME_UTC). CLOCK_MONOTONIC, CLOCK_BOOTTIME and the CPU-time clocks are
 * passed through unchanged: a wall-clock step never moves them either.
 *
 * Why it is written this way:
 *
 * - It never allocates and never calls dlsym. libfaketime hangs Debian's redis-server: redis is
 *   linked with jemalloc, whose first allocation calls clock_gettime, and a shim that resolves the
 *   real function with dlsym on that first call allocates inside jemalloc's initialisation. This
 *   shim gets the real time straight from the kernel with syscall(SYS_clock_gettime), so the
 *   wrappers need nothing resolved, nothing initialised and no lock: any call, from any thread,
 *   at any point of the process's life (before main, inside malloc, in a signal handler) works.
 *   The cost is a real system call instead of the vDSO: about 150 ns per call against 25 ns,
 *   measured on the CI machine; harmless for a test server.
 * - The file is read with raw open/read/close system calls (no stdio FILE*, which allocates; no
 *   libc open/read, which are cancellation points and may be wrapped by other preloaded code),
 *   and at most once per millisecond of monotonic time: reading it on every clock call would
 *   triple the cost of each call. So a new offset is seen by every clock read that starts more
 *   than 1 ms after the file was replaced (the TS helper waits that long before it reports the
 *   shift as applied).
 * - errno is preserved across the file read: a successful clock_gettime must not change it.
 * - Shared state is a few integers updated with atomic builtins. Two threads that race to re-read
 *   the file are sorted out with an atomic flag: one reads, the other uses the cached offset.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define NS_PER_SEC 1000000000LL
#define NS_PER_MS 1000000LL
/* How long a read offset is trusted before the file is read again (monotonic time). */
#define REFRESH_NS NS_PER_MS
/* |offset| at most 100 years: keeps every sum below far from overflowing 64 bits. */
#define MAX_OFFSET_MS (100LL * 366 * 24 * 3600 * 1000)

/* 0: CLOCK_SHIFT_FILE not looked up yet, 1: being looked up, 2: no file, 3: `path` is set. */
static int path_state;
static char path[4096];
/* The offset in ns, and the monotonic time (ns) after which the file is read again. */
static long long offset_ns;
static long long next_read_ns = INT64_MIN;
static int reading;

static long raw_clock_gettime(clockid_t id, struct timespec *ts) {
  return syscall(SYS_clock_gettime, id, ts);
}

/* Copies CLOCK_SHIFT_FILE into `path` once. getenv neither allocates nor reads a clock. */
static int shift_file_known(void) {
  int state = __atomic_load_n(&path_state, __ATOMIC_ACQUIRE);
  if (state >= 2) return state == 3;
  int expected = 0;
  if (!__atomic_compare_exchange_n(&path_state, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    /* Another thread is copying it (a few instructions): wait for it. */
    while ((state = __atomic_load_n(&path_state, __ATOMIC_ACQUIRE)) < 2) {
    }
    return state == 3;
  }
  const char *from = getenv("CLOCK_SHIFT_FILE");
  size_t n = 0;
  if (from) {
    while (from[n] && n < sizeof path - 1) {
      path[n] = from[n];
      n++;
    }
    /* A path too long for the buffer is not silently truncated into another file's name. */
    if (from[n]) n = 0;
  }
  path[n] = '\0';
  __atomic_store_n(&path_state, n > 0 ? 3 : 2, __ATOMIC_RELEASE);
  return n > 0;
}

/* Parses `[space][+|-]digits[space]`; returns 0 when the text is anything else. */
static int parse_ms(const char *s, long n, long long *out) {
  long i = 0;
  while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
  int negative = 0;
  if (i < n && (s[i] == '-' || s[i] == '+')) negative = s[i++] == '-';
  long digits = 0;
  long long v = 0;
  while (i < n && s[i] >= '0' && s[i] <= '9') {
    v = v * 10 + (s[i++] - '0');
    if (v > MAX_OFFSET_MS) return 0;
    digits++;
  }
  while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
  if (digits == 0 || i != n) return 0;
  *out = negative ? -v : v;
  return 1;
}

/* Reads the file into offset_ns if the cached value is older than REFRESH_NS. */
static void refresh_offset(void) {
  struct timespec mono;
  if (raw_clock_gettime(CLOCK_MONOTONIC, &mono) != 0) return;
  long long now = mono.tv_sec * NS_PER_SEC + mono.tv_nsec;
  if (now < __atomic_load_n(&next_read_ns, __ATOMIC_ACQUIRE)) return;
  if (__atomic_exchange_n(&reading, 1, __ATOMIC_ACQ_REL)) return;
  long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd >= 0) {
    char buf[64];
    long n = 0;
    for (;;) {
      long r = syscall(SYS_read, (int)fd, buf + n, sizeof buf - (size_t)n);
      if (r > 0 && n + r < (long)sizeof buf) {
        n += r;
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      /* r == 0: end of file. r < 0, or a file as long as the buffer: not an offset. */
      long long ms;
      if (r == 0 && parse_ms(buf, n, &ms))
        __atomic_store_n(&offset_ns, ms * NS_PER_MS, __ATOMIC_RELEASE);
      break;
    }
    syscall(SYS_close, (int)fd);
  } else if (errno == ENOENT) {
    __atomic_store_n(&offset_ns, 0, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&next_read_ns, now + REFRESH_NS, __ATOMIC_RELEASE);
  __atomic_store_n(&reading, 0, __ATOMIC_RELEASE);
}

/* The current offset in ns (0 without CLOCK_SHIFT_FILE). */
static long long current_offset_ns(void) {
  if (!shift_file_known()) return 0;
  int saved = errno;
  refresh_offset();
  errno = saved;
  return __atomic_load_n(&offset_ns, __ATOMIC_ACQUIRE);
}

static void shift(struct timespec *ts) {
  long long off = current_offset_ns();
  if (off == 0) return;
  long long nsec = (long long)ts->tv_nsec + off % NS_PER_SEC;
  long long sec = (long long)ts->tv_sec + off / NS_PER_SEC;
  if (nsec < 0) {
    nsec += NS_PER_SEC;
    sec--;
  } else if (nsec >= NS_PER_SEC) {
    nsec -= NS_PER_SEC;
    sec++;
  }
  ts->tv_sec = (time_t)sec;
  ts->tv_nsec = (long)nsec;
}

static int is_wall_clock(clockid_t id) {
  return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_REALTIME_ALARM ||
         id == CLOCK_TAI;
}

EXPORT int clock_gettime(clockid_t id, struct timespec *ts) {
  /* syscall() returns -1 with errno set on failure, which is clock_gettime's contract too. */
  if (raw_clock_gettime(id, ts) != 0) return -1;
  if (is_wall_clock(id)) shift(ts);
  return 0;
}

EXPORT int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  struct timespec ts;
  if (raw_clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
  shift(&ts);
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  /* What glibc does with the obsolete timezone argument. */
  if (tz) {
    struct timezone *z = tz;
    z->tz_minuteswest = 0;
    z->tz_dsttime = 0;
  }
  return 0;
}

EXPORT time_t time(time_t *out) {
  struct timespec ts;
  if (raw_clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  shift(&ts);
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}

EXPORT int timespec_get(struct timespec *ts, int base) {
  if (base != TIME_UTC || raw_clock_gettime(CLOCK_REALTIME, ts) != 0) return 0;
  shift(ts);
  return base;
}
