// SDWA probe: byte/word selects, sign extension and sub-dword compares, which clang-19
// emits as *_sdwa on gfx10 (tests/emu/test_vector.py checks every slot against numpy).
#define KERNEL extern "C" __attribute__((global))
#define SLOTS 12
KERNEL void sdwa_probe(unsigned* o, const unsigned* a, const unsigned* b) {
  const int i = __builtin_amdgcn_workitem_id_x();
  const unsigned x = a[i], y = b[i];
  unsigned* r = o + i * SLOTS;
  r[0] = ((x >> 8) & 0xff) * ((y >> 8) & 0xff);                                  // BYTE_1 x BYTE_1
  r[1] = ((x >> 16) & 0xffff) * ((y >> 16) & 0xffff);                            // WORD_1 x WORD_1
  r[2] = (unsigned)((int)(signed char)(x >> 24) * (int)(signed char)(y >> 16));  // sext bytes
  r[3] = __builtin_bit_cast(unsigned, (float)(long long)(int)x);                // i64 -> f32
  unsigned short lo = (unsigned short)(x + y), hi = (unsigned short)((x >> 16) + (y >> 16));
  r[4] = (unsigned)lo | ((unsigned)hi << 16);                                    // 16-bit adds packed
  unsigned char c0 = (unsigned char)(x) + (unsigned char)(y >> 8);
  unsigned char c1 = (unsigned char)(x >> 8) ^ (unsigned char)(y);
  r[5] = (unsigned)c0 | ((unsigned)c1 << 8) | ((x & 0xffff0000u));               // byte ops into place
  r[6] = ((x >> 8) & 0xff) > ((y >> 24) & 0xff) ? 7u : 9u;                       // compare bytes
  r[7] = (signed char)(x >> 16) < (signed char)(y) ? 11u : 13u;                  // signed byte compare
  r[8] = (unsigned)((short)(x >> 16) * (short)y);                                // sext words
  r[9] = (unsigned)__builtin_clrsb((int)(x ^ y));
  const float fx = (float)(x & 0xff), fy = (float)((y >> 16) & 0xff);            // cvt from bytes
  r[10] = __builtin_bit_cast(unsigned, fx * 0.5f + fy);
  r[11] = (unsigned)(long long)(-(float)(int)(x >> 12));                         // f32 -> i64
}
