// Engine-style decode GEMVs whose group loop runs four groups a pass through an inner loop
// of a constant four trips (hqval test tree, written for the suite): the v1 sibling keeps
// the inner loop rolled, the v2 one unrolls it fully, so their group loops are different
// loop nests; the static VALU rule multiplies the rolled inner body by its trip count
// (read from the CFG: an s_cmp of an induction SGPR against a constant) and compares.
//   EW_V2 0: qt=6 f32 header, inner loop rolled; 1: qt=44, inner loop unrolled
//   EW_EXTRA 1: the v2 kernel does ten more VALU per group (a broken copy)
// K is a multiple of 1024 (k_multiple: 1024).
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

#ifndef EW_V2
#define EW_V2 1
#endif
#ifndef EW_EXTRA
#define EW_EXTRA 0
#endif

__launch_bounds__(32, 16)
extern "C" __global__ void EW_NAME(const char* __restrict__ W, const float* __restrict__ x,
                                   float* __restrict__ y, int M, int K) {
    const int row = blockIdx.x;
    if (row >= M) return;
    const int lane = threadIdx.x;
    const int boff = lane * 4;
    const int groups = K / 256;
    const char* wrow = W + (long long)row * EW_ROW_BYTES(groups);
    float acc = 0.0f;
    for (int g0 = 0; g0 < groups; g0 += 4) {
#if EW_V2
#pragma unroll
#else
#pragma nounroll
#endif
        for (int j = 0; j < 4; ++j) {
            const char* gp = wrow + (g0 + j) * EW_GROUP_BYTES;
#if EW_V2
            const unsigned int h0 = EW_LOAD_HDR(gp);
            const unsigned int h1 = EW_LOAD_HDR(gp + 4);
            const unsigned int h = (boff < 64) ? h0 : h1;
            const float sc = __half2float(__ushort_as_half((unsigned short)(h & 0xFFFFu)));
            float zp = __half2float(__ushort_as_half((unsigned short)(h >> 16)));
#if EW_EXTRA
#pragma unroll
            for (int e = 0; e < 10; ++e) zp = zp * 1.0000001f + 1e-30f;
#endif
#else
            const float sc = __uint_as_float(EW_LOAD_HDR(gp));
            const float zp = __uint_as_float(EW_LOAD_HDR(gp + 4));
#endif
            const unsigned int pk = EW_LOAD_PK(gp + 8 + boff);
            const float* xg = x + (g0 + j) * 256 + lane * 8;
#pragma unroll
            for (int i = 0; i < 8; ++i) acc += (sc * (float)((pk >> (4 * i)) & 0xFu) + zp) * xg[i];
        }
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor(acc, off);
    if (lane == 0) y[row] = acc;
}
