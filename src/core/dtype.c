/*
 * dtype.c — dtype names and sizes, and host-side element access for the reference engine:
 * IEEE half and bfloat16 conversions with round-to-nearest-even (NaN stays NaN, overflow
 * goes to infinity), and load/store of any float dtype through double.
 */
#include <math.h>
#include <string.h>

#include "core/internal.h"

const char *frost_dtype_name(frost_dtype t)
{
    switch (t) {
    case FROST_F32: return "f32";
    case FROST_F16: return "f16";
    case FROST_BF16: return "bf16";
    case FROST_F64: return "f64";
    case FROST_I32: return "i32";
    case FROST_I64: return "i64";
    case FROST_U8: return "u8";
    case FROST_FP8_E4M3: return "fp8_e4m3";
    case FROST_FP8_E5M2: return "fp8_e5m2";
    case FROST_DTYPE_INVALID: break;
    }
    return "invalid";
}

size_t frost_dtype_size(frost_dtype t)
{
    switch (t) {
    case FROST_F32: case FROST_I32: return 4;
    case FROST_F16: case FROST_BF16: return 2;
    case FROST_F64: case FROST_I64: return 8;
    case FROST_U8: case FROST_FP8_E4M3: case FROST_FP8_E5M2: return 1;
    case FROST_DTYPE_INVALID: break;
    }
    return 0;
}

int frost__dtype_is_float(frost_dtype t)
{
    return t == FROST_F32 || t == FROST_F16 || t == FROST_BF16 || t == FROST_F64;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t frost__f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and a NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float frost__bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t frost__f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (abs >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        /* value = abs_float; subnormal half unit is 2^-24 */
        float a = bits_f32(abs);
        float scaled = a * 16777216.0f; /* / 2^-24 */
        /* round to nearest even integer */
        float r = nearbyintf(scaled);
        return (uint16_t)(sign | (uint32_t)r);
    }
    uint32_t exp = ((abs >> 23) - 127 + 15);
    uint32_t mant = abs & 0x7fffffu;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

float frost__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        float v = (float)mant / 16777216.0f;
        return sign ? -v : v;
    }
    if (exp == 31)
        return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

double frost__load_elem(const void *base, int64_t index, frost_dtype t)
{
    switch (t) {
    case FROST_F32: return ((const float *)base)[index];
    case FROST_F64: return ((const double *)base)[index];
    case FROST_F16: return frost__f16_to_f32(((const uint16_t *)base)[index]);
    case FROST_BF16: return frost__bf16_to_f32(((const uint16_t *)base)[index]);
    case FROST_I32: return ((const int32_t *)base)[index];
    case FROST_I64: return (double)((const int64_t *)base)[index];
    case FROST_U8: return ((const uint8_t *)base)[index];
    default: return NAN;
    }
}

void frost__store_elem(void *base, int64_t index, frost_dtype t, double v)
{
    switch (t) {
    case FROST_F32: ((float *)base)[index] = (float)v; break;
    case FROST_F64: ((double *)base)[index] = v; break;
    case FROST_F16: ((uint16_t *)base)[index] = frost__f32_to_f16((float)v); break;
    case FROST_BF16: ((uint16_t *)base)[index] = frost__f32_to_bf16((float)v); break;
    case FROST_I32: ((int32_t *)base)[index] = (int32_t)v; break;
    case FROST_I64: ((int64_t *)base)[index] = (int64_t)v; break;
    case FROST_U8: ((uint8_t *)base)[index] = (uint8_t)v; break;
    default: break;
    }
}
