// Kernels written against the HIP API that both ROCm's headers and hqval's compatibility
// headers can build without device libraries (-nogpulib): work-item and block ids come
// from the amdgcn builtins (ROCm 5.2's threadIdx/blockIdx call into its device library),
// and so does __syncthreads), everything else is HIP: __launch_bounds__, __shfl_down,
// __shfl_xor, __half conversions, float4, __ldg, fmaf, fmaxf, sqrtf, fabsf.
// tests/kernels/test_prelude.py compares the machine code of the two builds.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

static __device__ __forceinline__ int lane_id() { return __builtin_amdgcn_workitem_id_x(); }
static __device__ __forceinline__ int block_id() { return __builtin_amdgcn_workgroup_id_x(); }

// One wave per row: fp16 (scale, zero) header, eight nibbles per lane, shuffle reduction.
__launch_bounds__(32, 16)
extern "C" __global__ void probe_gemv_f16_header(const char* __restrict__ W,
                                                 const float* __restrict__ x,
                                                 float* __restrict__ y, int M, int K) {
    const int row = block_id();
    if (row >= M) return;
    const int lane = lane_id();
    const int groups = K / 256;
    const char* wrow = W + (long long)row * groups * 136;
    float acc = 0.0f;
    for (int g = 0; g < groups; ++g) {
        const char* gp = wrow + g * 136;
        const unsigned int h0 = *(const unsigned int*)gp;
        const unsigned int h1 = *(const unsigned int*)(gp + 4);
        const unsigned int h = (lane * 4 < 64) ? h0 : h1;
        const float sc = __half2float(__ushort_as_half((unsigned short)(h & 0xFFFFu)));
        const float zp = __half2float(__ushort_as_half((unsigned short)(h >> 16)));
        const unsigned int pk = *(const unsigned int*)(gp + 8 + lane * 4);
        const float4 xa = __ldg(reinterpret_cast<const float4*>(x + g * 256 + lane * 8));
        const float4 xb = __ldg(reinterpret_cast<const float4*>(x + g * 256 + lane * 8 + 4));
        acc += (sc * (float)(pk & 0xFu) + zp) * xa.x + (sc * (float)((pk >> 4) & 0xFu) + zp) * xa.y
             + (sc * (float)((pk >> 8) & 0xFu) + zp) * xa.z + (sc * (float)((pk >> 12) & 0xFu) + zp) * xa.w
             + (sc * (float)((pk >> 16) & 0xFu) + zp) * xb.x + (sc * (float)((pk >> 20) & 0xFu) + zp) * xb.y
             + (sc * (float)((pk >> 24) & 0xFu) + zp) * xb.z + (sc * (float)((pk >> 28) & 0xFu) + zp) * xb.w;
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down(acc, off);
    if (lane == 0) y[row] = acc;
}

// Block of 128: four waves, butterfly reductions, float math.
__launch_bounds__(128)
extern "C" __global__ void probe_wave_reduce(const float* __restrict__ x, float* __restrict__ y,
                                             int n) {
    const int t = lane_id();
    const int i = block_id() * 128 + t;
    float v = i < n ? fabsf(x[i]) : 0.0f;
    v = fmaxf(v, sqrtf(v + 1.0f));
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor(v, off);
    if ((t & 31) == 0) y[block_id() * 4 + (t >> 5)] = fmaf(v, 0.5f, 1.0f);
}
