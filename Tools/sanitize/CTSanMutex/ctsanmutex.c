// Makes ThreadSanitizer see the ordering of the standard library's `Synchronization.Mutex` on
// Linux. Compiled to nothing unless the build has -fsanitize=thread.
//
// Why: `Mutex.withLock` inlines its fast paths (an acquiring compare-exchange to lock, a releasing
// one to unlock), which TSan instruments. When the lock is contended the inlined code calls
// `_MutexHandle._lockSlow` / `_unlockSlow` in libswiftSynchronization.so, which spins and then
// takes or hands over the lock with the futex system call (FUTEX_LOCK_PI / FUTEX_UNLOCK_PI). That
// library is not instrumented and TSan does not intercept futex, so a lock handed over on the slow
// path creates no happens-before edge for TSan, and every access made under a contended `Mutex`
// is reported as a race ("Swift access race" or "data race") against the previous holder's —
// a static `Mutex`, an instance's, a local one alike (Tools/sanitize/MutexFalsePositive.swift
// reproduces it; an `NSLock`, a pthread mutex TSan intercepts, does not).
//
// How: this object defines the three slow-path symbols, so a TSan build's calls to them, resolved
// at link time within the executable, land here. Each calls the library's own function (found
// with dlsym(RTLD_NEXT)) and tells TSan what it did: `__tsan_acquire` on the lock word after the
// lock is taken (or a try-lock succeeds), `__tsan_release` on it before the lock is handed over.
// That is the edge the fast paths already give; a race with an access made outside the lock is
// still reported. The Swift calling convention passes `self` (the lock word's address) in the
// swiftself register, which clang spells `swift_context` in a `swiftcall` function; the symbols are
// those of Swift 6.3 (`nm -D libswiftSynchronization.so`), and a missing one stops the process at
// its first contended lock with the symbol's name rather than run without the annotations.
#include "ctsanmutex.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void __tsan_acquire(void *address);
void __tsan_release(void *address);

#define SWIFTCALL __attribute__((swiftcall))
#define SELF __attribute__((swift_context))

#define LOCK_SLOW "$s15Synchronization12_MutexHandleV9_lockSlowyys6UInt32VF"
#define TRY_LOCK_SLOW "$s15Synchronization12_MutexHandleV12_tryLockSlowSbyF"
#define UNLOCK_SLOW "$s15Synchronization12_MutexHandleV11_unlockSlowyyF"

typedef SWIFTCALL void (*LockSlow)(uint32_t threadID, void *SELF handle);
typedef SWIFTCALL bool (*TryLockSlow)(void *SELF handle);
typedef SWIFTCALL void (*UnlockSlow)(void *SELF handle);

/// The library's function `name`, looked up once (an atomic pointer: the first contended locks
/// can come from several threads at once).
static void *library_function(void **cache, const char *name) {
    void *function = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (function) return function;
    function = dlsym(RTLD_NEXT, name);
    if (!function) {
        fprintf(stderr, "ctsanmutex: %s is not in libswiftSynchronization.so (another Swift version?)\n", name);
        abort();
    }
    __atomic_store_n(cache, function, __ATOMIC_RELEASE);
    return function;
}

static void *lock_slow, *try_lock_slow, *unlock_slow;

SWIFTCALL void ctsanmutex_lock_slow(uint32_t threadID, void *SELF handle) __asm__(LOCK_SLOW);
SWIFTCALL void ctsanmutex_lock_slow(uint32_t threadID, void *SELF handle) {
    ((LockSlow)library_function(&lock_slow, LOCK_SLOW))(threadID, handle);
    __tsan_acquire(handle);
}

SWIFTCALL bool ctsanmutex_try_lock_slow(void *SELF handle) __asm__(TRY_LOCK_SLOW);
SWIFTCALL bool ctsanmutex_try_lock_slow(void *SELF handle) {
    bool locked = ((TryLockSlow)library_function(&try_lock_slow, TRY_LOCK_SLOW))(handle);
    if (locked) __tsan_acquire(handle);
    return locked;
}

SWIFTCALL void ctsanmutex_unlock_slow(void *SELF handle) __asm__(UNLOCK_SLOW);
SWIFTCALL void ctsanmutex_unlock_slow(void *SELF handle) {
    __tsan_release(handle);
    ((UnlockSlow)library_function(&unlock_slow, UNLOCK_SLOW))(handle);
}

#endif
#endif
