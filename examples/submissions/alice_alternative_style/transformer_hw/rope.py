"""Part 4: rotary position embeddings on interleaved pairs, via complex multiplication."""

import torch


def _even_width(d_head, name="d_head"):
    if isinstance(d_head, bool) or not isinstance(d_head, int):
        raise ValueError(f"{name} must be an int, got {d_head!r}")
    if d_head < 2 or d_head % 2:
        raise ValueError(f"{name} must be a positive even number, got {name}={d_head}")
    return d_head


def rope_angles(positions, d_head, base=10000.0, dtype=None):
    """angle[t, i] = positions[t] * base ** (-2 i / d_head): (T, d_head // 2) in ``dtype``."""
    d_head = _even_width(d_head)
    if not isinstance(positions, torch.Tensor):
        positions = torch.as_tensor(positions)
    if dtype is None:
        dtype = torch.get_default_dtype()
    # Work in float64 (where the device has it) and round once at the end.
    work = torch.float32 if positions.device.type == "mps" else torch.float64
    pair = torch.arange(0, d_head, 2, device=positions.device, dtype=work)  # 2i
    inverse_freq = torch.exp(-(pair / d_head) * torch.log(torch.tensor(float(base), dtype=work, device=positions.device)))
    angles = torch.outer(positions.reshape(-1).to(work), inverse_freq)  # (T, d/2)
    return angles.reshape(*positions.shape, d_head // 2).to(dtype)


def apply_rope(x, positions=None, base=10000.0):
    """Rotate each interleaved pair (x[2i], x[2i+1]) of x (..., T, d_head) by its angle."""
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        raise ValueError(f"x must have shape (..., T, d_head), got {tuple(getattr(x, 'shape', ()))}")
    steps, width = x.shape[-2], x.shape[-1]
    if width % 2:
        raise ValueError(f"d_head={width} (last dim of x, shape {tuple(x.shape)}) must be even")
    if positions is None:
        positions = torch.arange(steps, device=x.device)
    elif not isinstance(positions, torch.Tensor):
        positions = torch.as_tensor(positions)
    if tuple(positions.shape) != (steps,):
        raise ValueError(
            f"positions must have shape (T,) = ({steps},), got {tuple(positions.shape)}"
        )
    positions = positions.to(x.device)
    real = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    theta = rope_angles(positions, width, base, dtype=real)  # (T, d/2), at x's precision
    spin = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}, complex64/complex128
    pairs = x.to(real).reshape(*x.shape[:-1], width // 2, 2).contiguous()  # (..., T, d/2, 2)
    turned = torch.view_as_complex(pairs) * spin  # (a + ib) e^{i theta}
    return torch.view_as_real(turned).flatten(-2).to(x.dtype)  # (..., T, d)
