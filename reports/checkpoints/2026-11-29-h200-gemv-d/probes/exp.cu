// Load-only probes of the R=8 access pattern: lane (g, t) reads row g's group words as the
// tensor-core kernel does (4 x 8 B payload + 8 B header per group), D groups ahead.
#ifndef D
#define D 1
#endif
#ifndef WORK
#define WORK 0
#endif
__device__ __forceinline__ uint2 ld64(const unsigned char* p) {
    uint2 r; asm volatile("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p)); return r;
}
struct G5 { uint2 w[5]; };
__device__ __forceinline__ G5 ldg(const unsigned char* gp, unsigned t) {
    G5 r; const unsigned char* pp = gp + 8 + 8 * t;
    r.w[0] = ld64(gp); r.w[1] = ld64(pp); r.w[2] = ld64(pp + 32); r.w[3] = ld64(pp + 64); r.w[4] = ld64(pp + 96);
    return r;
}
extern "C" __global__ void __launch_bounds__(32) ldonly(const unsigned char* __restrict__ W, const float* __restrict__ x,
                                                        float* __restrict__ y, int M, int K) {
    const unsigned lane = threadIdx.x, t = lane & 3, g = lane >> 2;
    const int groups = K >> 8;
    int row = blockIdx.x * 8 + g; row = row < M ? row : M - 1;
    const unsigned char* wr = W + (size_t)row * groups * 136;
    G5 buf[D];
    #pragma unroll
    for (int d = 0; d < D; ++d) buf[d] = ldg(wr + d * 136, t);
    unsigned acc = 0; float facc = 0.f;
    for (int gi = 0; gi < groups; gi += D) {
        #pragma unroll
        for (int d = 0; d < D; ++d) {
            G5 c = buf[d];
            int nx = gi + d + D; nx = nx < groups ? nx : groups - 1;
            buf[d] = ldg(wr + nx * 136, t);
            #pragma unroll
            for (int k = 0; k < 5; ++k) acc ^= c.w[k].x + c.w[k].y;
            #pragma unroll
            for (int k = 0; k < WORK; ++k) facc = __uint_as_float(acc + k) * facc + 1.0f;
        }
    }
    if ((acc ^ __float_as_uint(facc)) == 0x12345678u) y[0] = 1.0f;
}

// ABI-shaped streaming read: one-warp blocks, block b reads its 8 rows (one contiguous span
// of 8 * row_bytes) with coalesced 16-byte loads, RD loads in flight per lane.
#ifndef RD
#define RD 4
#endif
extern "C" __global__ void __launch_bounds__(32) rdwarp(const unsigned char* __restrict__ W, const float* __restrict__ x,
                                                        float* __restrict__ y, int M, int K) {
    const unsigned lane = threadIdx.x;
    const size_t row_bytes = (size_t)(K >> 8) * 136;
    const int rows = min(8, M - (int)blockIdx.x * 8);
    const uint4* p = reinterpret_cast<const uint4*>(W + (size_t)blockIdx.x * 8 * row_bytes);
    const int n = (int)(rows * row_bytes / 16);
    unsigned acc = 0;
    int i = lane;
    for (; i + 32 * (RD - 1) < n; i += 32 * RD) {
        uint4 v[RD];
        #pragma unroll
        for (int k = 0; k < RD; ++k) v[k] = __ldcs(p + i + 32 * k);
        #pragma unroll
        for (int k = 0; k < RD; ++k) acc ^= v[k].x + v[k].y + v[k].z + v[k].w;
    }
    for (; i < n; i += 32) { uint4 v = __ldcs(p + i); acc ^= v.x + v.y + v.z + v.w; }
    if (acc == 0x12345678u) y[0] = 1.0f;
}
