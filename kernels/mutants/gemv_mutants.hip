// DELIBERATELY BROKEN decode GEMV kernels: the mutation kill matrix (`hqval mutants`) proves the
// checks and audit rules catch each of these.  Never dispatch them.  Each mutant is the
// real body (hq4_gemv.h) instantiated with one wrong header decoder; what it breaks and
// what should kill it are in kernels/mutants/mutants.yaml.
#include "hq4_gemv.h"

// Half select from the lane id with the wrong split (lane < 8): lanes 8..15 apply half 1's
// header to half 0's weights.  The layout rule is "payload byte offset >= 64".
struct MutLaneHalf : HdrMq4v2 {
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int, float& sc, float& zp) {
        const unsigned int hs = (hq_lane() < 8u) ? h.a : h.b;
        sc = hq_half_to_float(static_cast<unsigned short>(hs & 0xFFFFu));
        zp = hq_half_to_float(static_cast<unsigned short>(hs >> 16));
    }
};

// Halves swapped: weights 0..127 get the [4..8) header.
struct MutHalvesSwapped : HdrMq4v2 {
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int boff, float& sc, float& zp) {
        HdrMq4v2::decode(Hq4Raw{h.b, h.a}, boff, sc, zp);
    }
};

// Scale and zero swapped inside the packed fp16 pair.
struct MutScaleZeroSwapped : HdrMq4v2 {
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int boff, float& sc, float& zp) {
        HdrMq4v2::decode(h, boff, zp, sc);
    }
};

// v2 bytes read as v1's f32 scale and f32 zero.
struct MutF32HeaderInV2 : HdrHfq4v1 {};

// Lane-dependent header address: numerically right, but the two scalar loads become one
// vector load per lane.  Only the ISA audit's rule (a) can see it.
struct MutLaneHeaderAddress : HdrMq4v2 {
    static HQ_DEVICE Hq4Raw load(const unsigned char* __restrict__ gp, unsigned int boff) {
        const unsigned int hs = hq_load_u32(gp + (boff < 64u ? 0u : 4u));
        return Hq4Raw{hs, hs};
    }
};

// Retired 132 B compact geometry read through qt=45's decoder: payload at +4 ...
struct MutMq4cPayloadAt4 : HdrMq4c {
    static constexpr unsigned int kPayloadOffset = 4;
};
// ... and the 132 B group stride.
struct MutMq4cStride132 : HdrMq4c {
    static constexpr unsigned int kGroupBytes = 132;
};
// qt=44 with its payload read at +4.
struct MutV2PayloadAt4 : HdrMq4v2 {
    static constexpr unsigned int kPayloadOffset = 4;
};

// Extra work: the right numbers after 24 opaque, value-preserving fmas per group (a kernel
// the timing gate and the VALU-delta rule should both reject).
struct MutExtraWork : HdrMq4v2 {
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int boff, float& sc, float& zp) {
        HdrMq4v2::decode(h, boff, sc, zp);
        float one = 1.0f, zero = 0.0f;
        HQ_OPAQUE(one);
        HQ_OPAQUE(zero);
        #pragma unroll
        for (int i = 0; i < 24; ++i) {
            sc = sc * one + zero;  // exact: sc*1+0 == sc for the non-negative scales
            HQ_OPAQUE(sc);
        }
    }
};

HQ_GEMV(gemv_mut_lane_half_r1, MutLaneHalf, 1, false)
HQ_GEMV(gemv_mut_halves_swapped_r1, MutHalvesSwapped, 1, false)
HQ_GEMV(gemv_mut_scale_zero_swapped_r1, MutScaleZeroSwapped, 1, false)
HQ_GEMV(gemv_mut_f32_header_v2_r1, MutF32HeaderInV2, 1, false)
HQ_GEMV(gemv_mut_lane_header_address_r1, MutLaneHeaderAddress, 1, false)
HQ_GEMV(gemv_mut_mq4c_payload_at4_r1, MutMq4cPayloadAt4, 1, false)
HQ_GEMV(gemv_mut_mq4c_stride132_r1, MutMq4cStride132, 1, false)
HQ_GEMV(gemv_mut_v2_payload_at4_r2, MutV2PayloadAt4, 2, false)
HQ_GEMV(gemv_mut_extra_work_r1, MutExtraWork, 1, false)
// The three-matrix fused projection: the wrong half, a payload at +4, K and V swapped
// (Wv's rows computed into yk and Wk's into yv); qt=45: a payload at +4, K and V swapped.
#define MUT_GEMV_QKV_SWAPPED(NAME, HDR, R)                                                  \
    HQ_GLOBAL void HQ_GEMV_BOUNDS NAME(                                                     \
        const unsigned char* __restrict__ Wq, const unsigned char* __restrict__ Wk,         \
        const unsigned char* __restrict__ Wv, const float* __restrict__ x,                  \
        float* __restrict__ yq, float* __restrict__ yk, float* __restrict__ yv,             \
        int Mq, int Mk, int Mv, int K) {                                                    \
        gemv_qkv<HDR, R>(Wq, Wv, Wk, x, yq, yk, yv, Mq, Mk, Mv, K);                          \
    }
HQ_GEMV_QKV(gemv_mut_qkv_lane_half_r1, MutLaneHalf, 1)
HQ_GEMV_QKV(gemv_mut_qkv_payload_at4_r1, MutV2PayloadAt4, 1)
MUT_GEMV_QKV_SWAPPED(gemv_mut_qkv_swapped_r1, HdrMq4v2, 1)
HQ_GEMV_QKV(gemv_mut_mq4c_qkv_payload_at4_r1, MutMq4cPayloadAt4, 1)
MUT_GEMV_QKV_SWAPPED(gemv_mut_mq4c_qkv_swapped_r1, HdrMq4c, 1)
// Missing residual accumulate: a residual symbol that overwrites y instead of adding.
HQ_GEMV(gemv_mut_no_residual_r1, HdrMq4v2, 1, false)
