#include "cfutex.h"

#include <errno.h>
#include <limits.h>
#include <time.h>

#if defined(__linux__)
#include <sys/vfs.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

uint32_t cfutex_load(const uint32_t *word) {
    return __atomic_load_n(word, __ATOMIC_SEQ_CST);
}

uint32_t cfutex_add(uint32_t *word, uint32_t delta) {
    return __atomic_add_fetch(word, delta, __ATOMIC_SEQ_CST);
}

void cfutex_decrement_saturating(uint32_t *word) {
    uint32_t value = __atomic_load_n(word, __ATOMIC_SEQ_CST);
    // Bounded: each failed exchange means another thread changed the word meanwhile.
    while (value != 0 &&
           !__atomic_compare_exchange_n(word, &value, value - 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
}

void cfutex_store(uint32_t *word, uint32_t value) {
    __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
}

int cfutex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_nanoseconds) {
    struct timespec timeout;
#if defined(__linux__)
    timeout.tv_sec = (time_t)(timeout_nanoseconds / 1000000000u);
    timeout.tv_nsec = (long)(timeout_nanoseconds % 1000000000u);
    if (syscall(SYS_futex, word, FUTEX_WAIT, expected, &timeout, NULL, 0) == 0) return 0;
    // EAGAIN (the word moved), EINTR and ETIMEDOUT mean "look again", as a wake-up does.
    int code = errno;
    return (code == EAGAIN || code == EINTR || code == ETIMEDOUT) ? 0 : code;
#else
    (void)word;
    (void)expected;
    uint64_t pause = timeout_nanoseconds < 100000u ? timeout_nanoseconds : 100000u;
    timeout.tv_sec = 0;
    timeout.tv_nsec = (long)pause;
    (void)nanosleep(&timeout, NULL);
    return 0;
#endif
}

void cfutex_wake_all(uint32_t *word) {
#if defined(__linux__)
    (void)syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
#endif
}

uint64_t cfutex_file_system_magic(const char *path) {
#if defined(__linux__)
    struct statfs info;
    if (statfs(path, &info) != 0) return 0;
    return (uint64_t)info.f_type;
#else
    (void)path;
    return 0;
#endif
}
