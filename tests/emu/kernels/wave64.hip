// Wave64 decode of MQ4G256V2 (qt=44) groups: the section 9 half split, never verified on
// hardware.  64 lanes cover two 256-weight groups per step: lanes 0-31 group 2s, lanes
// 32-63 group 2s+1; within a group lane t reads the payload dword at byte 4t (t = lane % 32).
// The half select is derived from that payload byte offset (bytes 0-63: weights 0-127,
// half 0), never from the lane id; the mutant uses the lane id (lane < 32), the natural
// wave64 misreading of "HALF = 32 on wave64".
// Build with -mwavefrontsize64.  ABI: as the GEMV (W, x, y, M, K), block 64, grid M.
typedef unsigned int u32;
#define KERNEL extern "C" __attribute__((global))

template <bool kLaneSelect>
static __attribute__((device)) void gemv_w64(const unsigned char* W, const float* x, float* y,
                                             int M, int K) {
  const u32 lane = __builtin_amdgcn_workitem_id_x();
  const u32 row = __builtin_amdgcn_workgroup_id_x();
  const u32 t = lane & 31;
  const u32 boff = 4 * t;
  const int groups = K >> 8;
  float acc = 0.0f;
  for (int g0 = 0; g0 < groups; g0 += 2) {
    const int g = g0 + (int)(lane >> 5);
    if (g < groups) {
      const unsigned char* gp = W + ((unsigned long)row * groups + g) * 136;
      const u32 hA = *(const u32*)gp;
      const u32 hB = *(const u32*)(gp + 4);
      const bool half1 = kLaneSelect ? (lane >= 32) : (boff >= 64);
      const u32 hs = half1 ? hB : hA;
      const float sc = (float)__builtin_bit_cast(_Float16, (unsigned short)(hs & 0xffff));
      const float zp = (float)__builtin_bit_cast(_Float16, (unsigned short)(hs >> 16));
      const u32 q = *(const u32*)(gp + 8 + boff);
      const float* xp = x + g * 256 + t * 8;
      for (int i = 0; i < 8; ++i)
        acc = __builtin_fmaf((float)((q >> (4 * i)) & 15) * sc + zp, xp[i], acc);
    }
  }
  __attribute__((shared)) float part[64];
  part[lane] = acc;
  __builtin_amdgcn_s_barrier();
  if (lane == 0) {
    float s = 0.0f;
    for (int i = 0; i < 64; ++i) s += part[i];
    y[row] = s;
  }
}

KERNEL void gemv_w64_offset_select(const unsigned char* W, const float* x, float* y, int M,
                                   int K) {
  gemv_w64<false>(W, x, y, M, K);
}
KERNEL void gemv_w64_lane_select(const unsigned char* W, const float* x, float* y, int M,
                                 int K) {
  gemv_w64<true>(W, x, y, M, K);
}
