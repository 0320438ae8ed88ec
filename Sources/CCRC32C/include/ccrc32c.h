#ifndef CCRC32C_H
#define CCRC32C_H

#include <stddef.h>
#include <stdint.h>

/// Extends a CRC32C (Castagnoli, reflected polynomial 0x82F63B78) over `count` bytes.
/// `crc` is the value returned by a previous call, or 0 to start. Uses the SSE4.2 `crc32`
/// instruction when the CPU has it (checked once at run time), slicing-by-8 otherwise.
uint32_t ccrc32c_extend(uint32_t crc, const void *bytes, size_t count);

/// The portable slicing-by-8 implementation, exposed so tests can compare both paths.
uint32_t ccrc32c_extend_portable(uint32_t crc, const void *bytes, size_t count);

/// 1 when the hardware path is in use, 0 otherwise.
int ccrc32c_hardware_available(void);

#endif
