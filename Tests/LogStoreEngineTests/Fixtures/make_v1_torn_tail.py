# Builds a format-version-1 store by hand from docs/FORMAT.md (revision 2): three data records,
# a fourth whose payload was torn (CRC mismatch), and a fifth that checks out after it, ending
# well within 4 MiB: a version-1 reader can only judge this tail by the 4 MiB rule (torn tail).
import struct, uuid, sys
T = []
for n in range(256):
    c = n
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
def crc(b):
    c = 0xFFFFFFFF
    for x in b: c = T[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
assert crc(b"123456789") == 0xE3069283
sid = uuid.UUID("6C6F6773-746F-7265-2D76-312D66697874").bytes
def fixed(magic, value):
    b = magic + struct.pack("<II", 1, 64) + sid + struct.pack("<Q", value) + bytes(20)
    return b + struct.pack("<I", crc(b))
meta = fixed(b"LOGSTMET", 1_795_400_000_000_000)
def record(offset, payload, typ=1):
    h = struct.pack("<IQIIBBHI", crc(payload), offset, len(payload), len(payload), typ, 0, 0, 0)
    return struct.pack("<I", crc(h)) + h + payload
seg = fixed(b"LOGSTSEG", 0)
off = 0
records = []
for p in [b"alpha", b"beta", b"gamma", b"delta-torn", b"epsilon"]:
    r = record(off, p)
    records.append((off, r))
    seg += r
    off += len(r)
# Tear the fourth record: its payload's last byte never reached the disk as written.
d_off, d = records[3]
pos = 64 + d_off + len(d) - 1
seg = seg[:pos] + bytes([seg[pos] ^ 0x5A]) + seg[pos + 1:]
seg += bytes(100)  # preallocated zeros
out = sys.argv[1]
open(out + "/store.meta", "wb").write(meta)
open(out + "/00000000000000000000.log", "wb").write(seg)
print([o for o, _ in records], off)
