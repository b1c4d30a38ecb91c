// Group header decoders for the 136 B / 256-weight family (design note sections 1b, 2, 4).
//
// Every format keeps the 128 nibble bytes at [8..136) of the group; only the 8 header
// bytes differ.  Each decoder is a policy the kernel bodies are instantiated with, so the
// qt=6, qt=44 and qt=45 kernels of one family share every other instruction and, with
// equal half headers, qt=44/45 reproduce qt=6 bit for bit.
//
// Interface (all static):
//   kGroupBytes, kPayloadOffset   group stride and nibble payload offset in bytes
//   kDwords                       header dwords the decoder reads (1 or 2)
//   Raw load(gp, boff)            read the header of the group at gp; gp is lane-invariant
//                                 and the addresses below never involve boff, so the loads
//                                 are scalar (s_load) -- boff is only there for decoders
//                                 that are deliberately wrong (kernels/mutants/)
//   void decode(raw, boff, sc, zp)  scale and zero for the weights at payload byte boff
#ifndef HQ4_HEADER_H
#define HQ4_HEADER_H

#include "hqval_prelude.h"

struct Hq4Raw {
    unsigned int a;  // header dword at group byte +0
    unsigned int b;  // header dword at group byte +4
};

// qt=6 HFQ4-G256 (also qt=13 MQ4-G256: same bytes, FWHT-rotated activations):
// [0..4) f32 scale, [4..8) f32 zero, one pair for all 256 weights.
struct HdrHfq4v1 {
    static constexpr unsigned int kGroupBytes = 136;
    static constexpr unsigned int kPayloadOffset = 8;
    static constexpr int kDwords = 2;
    static HQ_DEVICE Hq4Raw load(const unsigned char* __restrict__ gp, unsigned int) {
        return Hq4Raw{hq_load_u32(gp), hq_load_u32(gp + 4)};
    }
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int, float& sc, float& zp) {
        sc = hq_u32_as_float(h.a);
        zp = hq_u32_as_float(h.b);
    }
};

// qt=44 MQ4G256V2: [0..4) fp16 (scale, zero) of weights 0..127, [4..8) of 128..255.
struct HdrMq4v2 {
    static constexpr unsigned int kGroupBytes = 136;
    static constexpr unsigned int kPayloadOffset = 8;
    static constexpr int kDwords = 2;
    static HQ_DEVICE Hq4Raw load(const unsigned char* __restrict__ gp, unsigned int) {
        return Hq4Raw{hq_load_u32(gp), hq_load_u32(gp + 4)};  // addresses lane-invariant
    }
    // Half rule (section 4): weights 0..127 are payload bytes 0..63, so the half is
    // "payload byte offset >= 64", taken from the caller's own nibble address.
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int boff, float& sc, float& zp) {
        const unsigned int hs = (boff < 64u) ? h.a : h.b;
        sc = hq_half_to_float(static_cast<unsigned short>(hs & 0xFFFFu));
        zp = hq_half_to_float(static_cast<unsigned short>(hs >> 16));
    }
};

// qt=45 MQ4CG256 (padded compat, v1.5): [0..2) fp16 scale, [2..4) fp16 zero for all 256
// weights, [4..8) zero pad that is never read, payload still at +8.
struct HdrMq4c {
    static constexpr unsigned int kGroupBytes = 136;
    static constexpr unsigned int kPayloadOffset = 8;
    static constexpr int kDwords = 1;
    static HQ_DEVICE Hq4Raw load(const unsigned char* __restrict__ gp, unsigned int) {
        return Hq4Raw{hq_load_u32(gp), 0u};
    }
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int, float& sc, float& zp) {
        sc = hq_half_to_float(static_cast<unsigned short>(h.a & 0xFFFFu));
        zp = hq_half_to_float(static_cast<unsigned short>(h.a >> 16));
    }
};

// Dequantize-and-dot of eight weights packed in one payload dword (weight 8t+j is nibble
// j, low nibble first) against x[0..7].  Written q * sc + zp so it contracts to one fma,
// which the numpy oracle mirrors as fma(q, scale, zero) rounded once.
static HQ_DEVICE float hq4_dot8(unsigned int q, float sc, float zp, hq_float4 x0, hq_float4 x1,
                                float acc) {
    const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
        const float w = static_cast<float>((q >> (4 * j)) & 0xFu) * sc + zp;
        acc = w * xs[j] + acc;
    }
    return acc;
}

#endif  // HQ4_HEADER_H
