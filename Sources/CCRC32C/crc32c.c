// CRC32C (Castagnoli). The hardware path uses the SSE4.2 crc32 instruction through a function
// attribute, so the package needs no -msse4.2 flag (SwiftPM refuses unsafeFlags in dependencies);
// the CPU is checked once at run time. The portable path is slicing-by-8.
#include "ccrc32c.h"

#include <string.h>

#include <pthread.h>

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static int hardware = -1;

static void build_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++) {
            crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
        }
        table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = table[0][n];
        for (int k = 1; k < 8; k++) {
            crc = table[0][crc & 0xFF] ^ (crc >> 8);
            table[k][n] = crc;
        }
    }
}

uint32_t ccrc32c_extend_portable(uint32_t crc, const void *bytes, size_t count) {
    pthread_once(&table_once, build_table);
    const uint8_t *p = (const uint8_t *)bytes;
    uint32_t c = ~crc;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, p, 8); // little-endian hosts only (x86-64, arm64)
        uint32_t lo = (uint32_t)word ^ c;
        uint32_t hi = (uint32_t)(word >> 32);
        c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^
            table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
            table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        count -= 8;
    }
    while (count > 0) {
        c = table[0][(c ^ *p) & 0xFF] ^ (c >> 8);
        p++;
        count--;
    }
    return ~c;
}

#if defined(__x86_64__)
#include <cpuid.h>

__attribute__((target("sse4.2")))
static uint32_t extend_sse42(uint32_t crc, const void *bytes, size_t count) {
    const uint8_t *p = (const uint8_t *)bytes;
    uint64_t c = ~crc;
    while (count > 0 && ((uintptr_t)p & 7) != 0) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p);
        p++;
        count--;
    }
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8;
        count -= 8;
    }
    while (count > 0) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p);
        p++;
        count--;
    }
    return ~(uint32_t)c;
}

static int detect_hardware(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        return 0;
    }
    return (ecx & bit_SSE4_2) != 0;
}
#endif

int ccrc32c_hardware_available(void) {
#if defined(__x86_64__)
    int h = __atomic_load_n(&hardware, __ATOMIC_RELAXED);
    if (h < 0) {
        h = detect_hardware();
        __atomic_store_n(&hardware, h, __ATOMIC_RELAXED);
    }
    return h;
#else
    return 0;
#endif
}

uint32_t ccrc32c_extend(uint32_t crc, const void *bytes, size_t count) {
#if defined(__x86_64__)
    if (ccrc32c_hardware_available()) {
        return extend_sse42(crc, bytes, count);
    }
#endif
    return ccrc32c_extend_portable(crc, bytes, count);
}
