// Runtime probe of the compatibility headers' amd_mixed_dot overloads and lrintf family:
// tests/kernels/test_prelude.py runs it on the emulator for every arch (the dot
// instructions on gfx10.3/11/12, the headers' portable sums on gfx1010) and checks each
// word against sums it computes itself.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

#define SLOTS 12

__launch_bounds__(32)
extern "C" __global__ void hipcompat_dots(const int* __restrict__ a, const int* __restrict__ b,
                                          const int* __restrict__ c, const __half2* __restrict__ h,
                                          const float* __restrict__ f, int* __restrict__ out) {
    const int i = threadIdx.x;
    int* o = out + i * SLOTS;
    const int x = a[i], y = b[i], z = c[i];
    o[0] = amd_mixed_dot(reinterpret_cast<const short2*>(a)[i], reinterpret_cast<const short2*>(b)[i], z, false);
    o[1] = amd_mixed_dot(reinterpret_cast<const short2*>(a)[i], reinterpret_cast<const short2*>(b)[i], z, true);
    o[2] = (int)amd_mixed_dot(reinterpret_cast<const ushort2*>(a)[i], reinterpret_cast<const ushort2*>(b)[i],
                              (unsigned)z, true);
    o[3] = amd_mixed_dot(reinterpret_cast<const char4*>(a)[i], reinterpret_cast<const char4*>(b)[i], z, false);
    o[4] = amd_mixed_dot(reinterpret_cast<const char4*>(a)[i], reinterpret_cast<const char4*>(b)[i], z, true);
    o[5] = (int)amd_mixed_dot(reinterpret_cast<const uchar4*>(a)[i], reinterpret_cast<const uchar4*>(b)[i],
                              (unsigned)z, false);
    o[6] = amd_mixed_dot(x, y, z, true);
    o[7] = (int)amd_mixed_dot((unsigned)x, (unsigned)y, (unsigned)z, false);
    o[8] = __builtin_bit_cast(int, amd_mixed_dot(make_half2(h[i].x, h[i].y), h[i + 32], f[i], false));
    o[9] = (int)lrintf(f[i + 32]);
    o[10] = (int)lroundf(f[i + 32]);
    o[11] = (int)llrintf(f[i + 32] * 3.0f);
}
