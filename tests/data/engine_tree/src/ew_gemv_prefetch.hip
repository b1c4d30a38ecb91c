// Engine-style decode GEMV, qt=44, with a gfx12 soft prefetch of the next group (hqval test
// tree, written for the suite): correct source that a clang without the target builtin
// (__builtin_amdgcn_s_prefetch_data is LLVM 20's) cannot build for gfx12.  EW_BAD_IDENT
// calls an identifier nothing declares instead: the kernel's own compile error.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

__launch_bounds__(32, 16)
extern "C" __global__ void EW_NAME(const char* __restrict__ W, const float* __restrict__ x,
                                   float* __restrict__ y, int M, int K) {
    const int row = blockIdx.x;
    if (row >= M) return;
    const int lane = threadIdx.x;
    const int groups = K / 256;
    const char* wrow = W + (long long)row * EW_ROW_BYTES(groups);
    const int boff = lane * 4;
    float acc_even = 0.0f, acc_odd = 0.0f;  // the v1 sibling's order (bit identity)
    for (int g = 0; g < groups; ++g) {
        const char* gp = wrow + g * EW_GROUP_BYTES;
#if defined(EW_BAD_IDENT)
        ew_prefetch_next_group(gp + EW_GROUP_BYTES);
#elif defined(__gfx1200__) || defined(__gfx1201__)
        if (g + 1 < groups) __builtin_amdgcn_s_prefetch_data((const void*)(gp + EW_GROUP_BYTES), 0);
#endif
        const unsigned int h0 = EW_LOAD_HDR(gp);
        const unsigned int h1 = EW_LOAD_HDR(gp + 4);
        const unsigned int h = (boff < 64) ? h0 : h1;
        const float sc = __half2float(__ushort_as_half((unsigned short)(h & 0xFFFFu)));
        const float zp = __half2float(__ushort_as_half((unsigned short)(h >> 16)));
        const unsigned int pk = EW_LOAD_PK(gp + 8 + boff);
        const float4 xa = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8);
        const float4 xb = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8 + 4);
        float part = (sc * (float)(pk & 0xFu) + zp) * xa.x;
        part += (sc * (float)((pk >> 4) & 0xFu) + zp) * xa.y;
        part += (sc * (float)((pk >> 8) & 0xFu) + zp) * xa.z;
        part += (sc * (float)((pk >> 12) & 0xFu) + zp) * xa.w;
        part += (sc * (float)((pk >> 16) & 0xFu) + zp) * xb.x;
        part += (sc * (float)((pk >> 20) & 0xFu) + zp) * xb.y;
        part += (sc * (float)((pk >> 24) & 0xFu) + zp) * xb.z;
        part += (sc * (float)((pk >> 28) & 0xFu) + zp) * xb.w;
        if (g & 1) acc_odd += part; else acc_even += part;
    }
    float acc = acc_even + acc_odd;
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor(acc, off);
    if (lane == 0) y[row] = acc;
}
