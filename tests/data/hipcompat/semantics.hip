// Runtime probe of hqval's HIP compatibility headers: every output word has a value the
// test computes independently (tests/kernels/test_prelude.py runs it on the emulator).
// Launched as grid (3, 2, 1) x block (64, 1, 1): two waves per block.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

#define SLOTS 16

__launch_bounds__(64)
extern "C" __global__ void hipcompat_semantics(const float* __restrict__ x, float* __restrict__ out,
                                               unsigned int* __restrict__ counter) {
    __shared__ float stage[64];
    const unsigned int t = threadIdx.x;
    const unsigned int block = blockIdx.x + gridDim.x * blockIdx.y;
    const unsigned int g = block * blockDim.x + t;
    float* o = out + (size_t)g * SLOTS;
    const float v = x[g];
    o[0] = (float)threadIdx.x;
    o[1] = (float)blockIdx.x + 100.0f * (float)blockIdx.y;
    o[2] = (float)blockDim.x + 1000.0f * (float)gridDim.x + 100000.0f * (float)gridDim.y;
    o[3] = __shfl_down(v, 3u);            // lane+3 within the wave, else own
    o[4] = __shfl_up(v, 5u);              // lane-5 within the wave, else own
    o[5] = __shfl_xor(v, 9);
    o[6] = __shfl(v, 7);                  // lane 7 of this wave
    o[7] = __shfl(v, 2, 8);               // lane 2 of this 8-lane segment
    const unsigned long long b = __ballot(v > 0.0f);
    o[8] = (float)(unsigned int)(b & 0xFFFFFFFFu);
    o[9] = (float)(__any(v > 2.5f) + 2 * __all(v > -100.0f) + 4 * __all(v > 0.0f));
    stage[t] = v;
    __syncthreads();
    o[10] = stage[(t + 37) & 63];         // another wave's value, after the barrier
    const __half2 h = __halves2half2(__float2half(v), __float2half(0.5f));
    const __half2 r = __hfma2(h, h, __float2half2_rn(1.0f));
    o[11] = __low2float(r) + 10.0f * __high2float(r);
    o[12] = tanhf(v) ;
    o[13] = expf(v * 0.25f);
    o[14] = rsqrtf(fabsf(v) + 1.0f);
    atomicAdd(counter, 1u);
    o[15] = (float)warpSize;
}
