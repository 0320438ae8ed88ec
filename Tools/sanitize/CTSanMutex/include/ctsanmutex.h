#ifndef CTSANMUTEX_H
#define CTSANMUTEX_H

/// Nothing to call: under ThreadSanitizer (`swift build --sanitize=thread`) this target's object
/// replaces the slow paths of the standard library's `Mutex` with ones that tell TSan about the
/// lock (see ctsanmutex.c); in any other build it is empty. The test binary and the executables
/// the tests start depend on it (Package.swift), nothing that ships does.

#endif
