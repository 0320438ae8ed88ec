#ifndef CFUTEX_H
#define CFUTEX_H

#include <stdint.h>

/// Waking a process that waits for a lock another process holds (FORMAT.md §10.2, `WAKE`): 32-bit
/// words in a file mapped shared by every process that has the store open, waited on with the
/// futex system call. The words only say "look again": whoever holds a lock is decided by `flock`,
/// never by them, so any value (a dead process's, a hostile file's) costs at most a wasted wake-up.

/// Reads `*word` (sequentially consistent).
uint32_t cfutex_load(const uint32_t *word);

/// Adds `delta` to `*word` (wrapping; sequentially consistent) and returns the new value.
uint32_t cfutex_add(uint32_t *word, uint32_t delta);

/// Subtracts 1 from `*word` unless it is 0 (sequentially consistent): a count zeroed under a
/// thread that still had itself counted stays at 0 instead of wrapping.
void cfutex_decrement_saturating(uint32_t *word);

/// Sets `*word` (sequentially consistent).
void cfutex_store(uint32_t *word, uint32_t value);

/// Sleeps while `*word == expected`, for at most `timeout_nanoseconds`: returns at once when the
/// word differs, on a wake-up, on a signal and at the timeout (all the same to the caller, who
/// looks again), and then returns 0. Not a private futex: the word is in a mapping shared between
/// processes. Returns the `errno` of a futex call that failed otherwise (`ENOSYS`, or `EPERM`
/// under a seccomp filter): it did not sleep, and the caller must sleep some other way. Where
/// there is no futex (not Linux) it sleeps min(timeout, 100 µs) and returns 0.
int cfutex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_nanoseconds);

/// Wakes every thread of any process sleeping in `cfutex_wait` on `word`. Nothing where there is
/// no futex.
void cfutex_wake_all(uint32_t *word);

/// The magic number of the file system holding `path` (`statfs`'s `f_type`), or 0 when it cannot
/// be learnt (not Linux, or `statfs` failed). The coordination file's slots are read through a
/// mapping only on local file systems whose mapped pages and `pwrite`s are one page cache.
uint64_t cfutex_file_system_magic(const char *path);

#endif
