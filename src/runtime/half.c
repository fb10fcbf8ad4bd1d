/* half.c - fp16 (IEEE binary16) and bf16 (the upper half of a float) on the
 * host: rounding to nearest even as vstore_half and the device's bf16
 * stores do, so that files and devices agree bit for bit. */
#include "runtime/internal.h"

float nncl__f16_to_f32(unsigned h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t ex = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    float f;
    if (ex == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal half: normalise into a float exponent */
            ex = 127 - 15 + 1;
            while (!(man & 0x400u)) {
                man <<= 1;
                ex--;
            }
            bits = sign | (ex << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (ex == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((ex + 112) << 23) | (man << 13);
    }
    memcpy(&f, &bits, 4);
    return f;
}

/* Rounds the 24-bit significand to 11 bits (fewer for half's subnormals),
 * ties to even; above 65504 (after rounding) Inf; NaN stays a quiet NaN. */
unsigned nncl__f32_to_f16(float f) {
    uint32_t x, sign, ax, man, shift, half_bits, rest, halfway;
    int ex;
    memcpy(&x, &f, 4);
    sign = (x >> 16) & 0x8000u;
    ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u);
    ex = (int)(ax >> 23) - 127;
    if (ex > 15) return sign | 0x7c00u;
    if (ex >= -14) { /* normal half: drop 13 bits */
        rest = ax & 0x1fffu;
        half_bits = ((uint32_t)(ex + 15) << 10) | ((ax >> 13) & 0x3ffu);
        if (rest > 0x1000u || (rest == 0x1000u && (half_bits & 1u))) half_bits++; /* may carry into Inf: right */
        return sign | half_bits;
    }
    if (ex < -25) return sign; /* below half the smallest subnormal */
    man = (ax & 0x7fffffu) | 0x800000u;
    shift = (uint32_t)(-14 - ex) + 13; /* 14..24 */
    half_bits = man >> shift;
    rest = man & ((1u << shift) - 1u);
    halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half_bits & 1u))) half_bits++;
    return sign | half_bits;
}

/* The upper 16 bits, rounded to nearest even; NaN stays a quiet NaN. */
unsigned nncl__f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

float nncl__bf16_to_f32(unsigned h) {
    uint32_t x = (uint32_t)(h & 0xffffu) << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
