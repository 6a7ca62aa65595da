"""The low-precision weight formats of the official DeepSeek-V4 checkpoints, both directions.

- FP8: float8 e4m3 values with one power-of-two scale (ue8m0: an 8-bit exponent, stored as
  torch.float8_e8m0fnu) per 128 x 128 block of the weight matrix. Used for most linear layers.
- FP4: e2m1 values (sign, 2 exponent bits, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6), two per
  int8 byte (element 2i in the low nibble, 2i+1 in the high nibble), one ue8m0 scale per 32 values
  along the input dimension. Used for the routed experts.

Scales are powers of two chosen so the largest magnitude of a block fits the format's largest finite
value (448 for e4m3, 6 for e2m1); dequantized weight = value * scale. T-Rex trains in BF16, so the
loader dequantizes; the quantizers exist to build test checkpoints in the released format.
"""

from __future__ import annotations

import torch

FP8_BLOCK = 128
FP8_MAX = 448.0
FP4_GROUP = 32
FP4_MAX = 6.0
# e2m1 magnitudes by 3-bit code (exponent bits, mantissa bit)
FP4_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def _power_of_two_scale(amax: torch.Tensor, largest: float) -> torch.Tensor:
    # smallest power of two s with amax / s <= largest (exponent kept inside ue8m0's range)
    ratio = (amax.float() / largest).clamp_min(2.0**-126)
    return torch.exp2(torch.ceil(torch.log2(ratio)))


def quantize_fp8_blockwise(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[out, in] -> (float8_e4m3fn [out, in], float8_e8m0fnu [ceil(out/128), ceil(in/128)])."""
    out_features, in_features = weight.shape
    rows, cols = -(-out_features // FP8_BLOCK), -(-in_features // FP8_BLOCK)
    padded = torch.zeros(rows * FP8_BLOCK, cols * FP8_BLOCK, dtype=torch.float32)
    padded[:out_features, :in_features] = weight.float()
    blocks = padded.view(rows, FP8_BLOCK, cols, FP8_BLOCK)
    scale = _power_of_two_scale(blocks.abs().amax(dim=(1, 3)), FP8_MAX)  # [rows, cols]
    values = (blocks / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    values = values.view(rows * FP8_BLOCK, cols * FP8_BLOCK)[:out_features, :in_features].contiguous()
    return values, scale.to(torch.float8_e8m0fnu)


def dequantize_fp8_blockwise(values: torch.Tensor, scale: torch.Tensor, dtype=torch.bfloat16) -> torch.Tensor:
    out_features, in_features = values.shape
    expanded = scale.float().repeat_interleave(FP8_BLOCK, 0).repeat_interleave(FP8_BLOCK, 1)
    expanded = expanded[:out_features, :in_features]
    if expanded.shape != values.shape:
        raise ValueError(f"FP8 scale {tuple(scale.shape)} does not cover a weight of shape {tuple(values.shape)}")
    return (values.float() * expanded).to(dtype)


def quantize_fp4(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[out, in] (in a multiple of 32) -> (int8 [out, in/2] packed e2m1 codes, float8_e8m0fnu [out, in/32])."""
    out_features, in_features = weight.shape
    if in_features % FP4_GROUP:
        raise ValueError(f"FP4 needs the input dimension to be a multiple of {FP4_GROUP}, got {in_features}")
    groups = weight.float().view(out_features, in_features // FP4_GROUP, FP4_GROUP)
    scale = _power_of_two_scale(groups.abs().amax(dim=-1), FP4_MAX)
    scaled = (groups / scale.unsqueeze(-1)).view(out_features, in_features)
    # nearest e2m1 magnitude (ties go to the smaller code); the sign goes to bit 3
    magnitude_code = (scaled.abs().unsqueeze(-1) - FP4_VALUES).abs().argmin(dim=-1)
    codes = magnitude_code | ((scaled < 0) & (magnitude_code > 0)).long() << 3
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8)
    return packed.view(torch.int8), scale.to(torch.float8_e8m0fnu)


def dequantize_fp4(packed: torch.Tensor, scale: torch.Tensor, dtype=torch.bfloat16) -> torch.Tensor:
    codes = packed.contiguous().view(torch.uint8).long()
    out_features = codes.shape[0]
    unpacked = torch.stack([codes & 0x0F, codes >> 4], dim=-1).view(out_features, -1)
    magnitude = FP4_VALUES[unpacked & 0x7]
    values = torch.where((unpacked & 0x8) > 0, -magnitude, magnitude)
    groups = values.view(out_features, -1, FP4_GROUP)
    if groups.shape[1] != scale.shape[-1]:
        raise ValueError(f"FP4 scale {tuple(scale.shape)} does not cover a packed weight of shape {tuple(packed.shape)}")
    return (groups * scale.float().unsqueeze(-1)).view(out_features, -1).to(dtype)


def dequantize(values: torch.Tensor, scale: torch.Tensor, dtype=torch.bfloat16) -> torch.Tensor:
    """Dequantize an official weight by its storage type: float8 e4m3 (block FP8) or packed FP4."""
    if values.dtype == torch.float8_e4m3fn:
        return dequantize_fp8_blockwise(values, scale, dtype)
    if values.dtype in (torch.int8, torch.uint8) or values.dtype == getattr(torch, "float4_e2m1fn_x2", None):
        return dequantize_fp4(values.view(torch.uint8), scale, dtype)
    raise ValueError(f"a weight with a scale must be float8_e4m3fn or packed FP4 (int8), got {values.dtype}")
