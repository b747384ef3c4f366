"""Small reference models shared by the stax tests and benchmarks.

Stable API (the benchmarks import this module too):

    MLP(in_features=64, hidden=128, out_features=64, depth=2)
    GPT2Block(dim=64, n_heads=4, mlp_ratio=4, max_seq=128, use_sdpa=False)
    LlamaBlock(dim=64, n_heads=4, hidden=None, max_seq=128, rope_theta=10000.0,
               eps=1e-6, use_sdpa=False)
    ConvBnRelu(in_channels=3, out_channels=16, kernel_size=3)
    ShardableGPT(dim=512, heads=8, blocks=2)  (blocks with separate q/k/v projections, for
                                      tensor parallelism and FSDP)

    MODEL_NAMES                       ("mlp", "gpt2", "gpt2_sdpa", "llama", "conv_bn_relu")
    make_model(name, dtype=torch.float32, **kwargs) -> nn.Module   (eval mode for
                                      conv_bn_relu, with non-trivial BN statistics)
    make_inputs(name, batch, seq, dtype=torch.float32, *, dim=None, generator=None)
                                   -> tuple of input tensors for model `name`
                                      (sequence models: [batch, seq, dim];
                                       conv_bn_relu: [batch, in_channels, seq, seq])

Everything is plain PyTorch, written the way users write these blocks (explicit
matmuls and masks, slicing + cat for rotate-half), so it exercises the op coverage a
torch.compile backend sees in practice.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["MLP", "GPT2Block", "LlamaBlock", "ConvBnRelu", "RMSNorm", "MODEL_NAMES",
           "DEFAULT_KWARGS", "make_model", "make_inputs", "ShardableGPTBlock", "ShardableGPT"]


class MLP(nn.Module):
    """Linear -> GELU, `depth` times, then a final Linear."""

    def __init__(self, in_features: int = 64, hidden: int = 128, out_features: int = 64,
                 depth: int = 2):
        super().__init__()
        self.in_features = in_features
        layers = []
        d = in_features
        for _ in range(depth):
            layers += [nn.Linear(d, hidden), nn.GELU()]
            d = hidden
        layers.append(nn.Linear(d, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class GPT2Block(nn.Module):
    """Pre-LN GPT-2 block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).

    Attention is causal; with `use_sdpa=False` it is written out (q @ k^T * scale,
    masked_fill of the upper triangle with -inf from a registered tril buffer, softmax,
    @ v), with `use_sdpa=True` it is `F.scaled_dot_product_attention(is_causal=True)`.
    """

    def __init__(self, dim: int = 64, n_heads: int = 4, mlp_ratio: int = 4,
                 max_seq: int = 128, use_sdpa: bool = False):
        super().__init__()
        assert dim % n_heads == 0
        self.dim, self.n_heads, self.head_dim = dim, n_heads, dim // n_heads
        self.use_sdpa = use_sdpa
        self.ln_1 = nn.LayerNorm(dim)
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.c_fc = nn.Linear(dim, mlp_ratio * dim)
        self.mlp_proj = nn.Linear(mlp_ratio * dim, dim)
        self.register_buffer("bias", torch.tril(torch.ones(max_seq, max_seq))
                             .view(1, 1, max_seq, max_seq), persistent=False)

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.dim, dim=2)
        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        if self.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)

    def mlp(self, x):
        return self.mlp_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.type_as(x) * self.weight


def _rotate_half(x):
    h = x.shape[-1] // 2
    x1 = x[..., :h]
    x2 = x[..., h:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    """Llama-style block: RMSNorm, rotary embedding (cos/sin buffers, rotate-half by
    slicing + cat), causal attention, RMSNorm, SwiGLU MLP (silu(gate) * up -> down)."""

    def __init__(self, dim: int = 64, n_heads: int = 4, hidden: int | None = None,
                 max_seq: int = 128, rope_theta: float = 10000.0, eps: float = 1e-6,
                 use_sdpa: bool = False):
        super().__init__()
        assert dim % n_heads == 0 and (dim // n_heads) % 2 == 0
        self.dim, self.n_heads, self.head_dim = dim, n_heads, dim // n_heads
        self.use_sdpa = use_sdpa
        hidden = hidden or 64 * ((int(2 * 4 * dim / 3) + 63) // 64)
        self.input_layernorm = RMSNorm(dim, eps)
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.post_attention_layernorm = RMSNorm(dim, eps)
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)
        inv_freq = 1.0 / (rope_theta ** (torch.arange(0, self.head_dim, 2).float()
                                         / self.head_dim))
        t = torch.arange(max_seq).float()
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def attention(self, x):
        B, T, C = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        cos = self.cos_cached[:T].to(x.dtype)
        sin = self.sin_cached[:T].to(x.dtype)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        if self.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
            i = torch.arange(T, device=x.device)
            causal = i.view(T, 1) >= i.view(1, T)
            scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
            probs = F.softmax(scores.float(), dim=-1).to(q.dtype)
            y = torch.matmul(probs, v)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.o_proj(y)

    def mlp(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    def forward(self, x):
        x = x + self.attention(self.input_layernorm(x))
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x


class ConvBnRelu(nn.Module):
    """Conv2d (padding keeps H, W) -> BatchNorm2d -> ReLU; use in eval mode."""

    def __init__(self, in_channels: int = 3, out_channels: int = 16, kernel_size: int = 3):
        super().__init__()
        self.in_channels = in_channels
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size,
                              padding=kernel_size // 2, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


MODEL_NAMES = ("mlp", "gpt2", "gpt2_sdpa", "llama", "conv_bn_relu")

class ShardableGPTBlock(nn.Module):
    """A GPT-2 style block with separate q/k/v projections, so tensor parallelism can
    shard the heads (a rank's view(B, T, -1, head_dim) holds its share of them): the
    distributed tests and benchmarks/distributed.py."""

    def __init__(self, dim=512, heads=8):
        super().__init__()
        self.head_dim = dim // heads
        self.ln_1 = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.fc_proj = nn.Linear(4 * dim, dim)

    def forward(self, x):
        B, T, _ = x.shape
        h = self.ln_1(x)
        q = self.q(h).view(B, T, -1, self.head_dim).transpose(1, 2)
        k = self.k(h).view(B, T, -1, self.head_dim).transpose(1, 2)
        v = self.v(h).view(B, T, -1, self.head_dim).transpose(1, 2)
        att = (q @ k.transpose(-1, -2)) * (self.head_dim ** -0.5)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, -1)
        x = x + self.proj(y)
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class ShardableGPT(nn.Module):
    """`blocks` ShardableGPTBlocks and a final LayerNorm ([B, T, dim] -> [B, T, dim])."""

    def __init__(self, dim=512, heads=8, blocks=2):
        super().__init__()
        self.blocks = nn.ModuleList([ShardableGPTBlock(dim, heads) for _ in range(blocks)])
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x)


DEFAULT_KWARGS = {
    "mlp": dict(in_features=64, hidden=128, out_features=64),
    "gpt2": dict(dim=64, n_heads=4),
    "gpt2_sdpa": dict(dim=64, n_heads=4, use_sdpa=True),
    "llama": dict(dim=64, n_heads=4),
    "conv_bn_relu": dict(in_channels=3, out_channels=16),
}
_CLASSES = {"mlp": MLP, "gpt2": GPT2Block, "gpt2_sdpa": GPT2Block, "llama": LlamaBlock,
            "conv_bn_relu": ConvBnRelu}


def make_model(name: str, dtype: torch.dtype = torch.float32, **kwargs) -> nn.Module:
    """A freshly initialised model `name` (kwargs override DEFAULT_KWARGS[name]) cast to
    `dtype`. conv_bn_relu comes back in eval mode with random running statistics and
    affine parameters (so BatchNorm is not the identity); the others in train mode."""
    if name not in _CLASSES:
        raise ValueError(f"unknown model {name!r}; expected one of {MODEL_NAMES}")
    m = _CLASSES[name](**{**DEFAULT_KWARGS[name], **kwargs})
    if name == "conv_bn_relu":
        with torch.no_grad():
            n = m.bn.num_features
            m.bn.running_mean.copy_(torch.randn(n) * 0.1)
            m.bn.running_var.copy_(torch.rand(n) + 0.5)
            m.bn.weight.copy_(torch.rand(n) + 0.5)
            m.bn.bias.copy_(torch.randn(n) * 0.1)
        m.eval()
    return m.to(dtype)


def _input_dim(name: str, dim: int | None) -> int:
    if dim is not None:
        return dim
    kw = DEFAULT_KWARGS[name]
    return kw.get("in_features") or kw.get("dim") or kw["in_channels"]


def make_inputs(name: str, batch: int = 2, seq: int = 16, dtype: torch.dtype = torch.float32,
                *, dim: int | None = None, generator: torch.Generator | None = None):
    """Fresh random inputs for model `name` (a tuple, to call `model(*inputs)`).
    `dim` is the model's input width (in_features / dim / in_channels) when it differs
    from DEFAULT_KWARGS; for conv_bn_relu, `seq` is the image height and width."""
    if name not in _CLASSES:
        raise ValueError(f"unknown model {name!r}; expected one of {MODEL_NAMES}")
    d = _input_dim(name, dim)
    shape = (batch, d, seq, seq) if name == "conv_bn_relu" else (batch, seq, d)
    return (torch.randn(shape, generator=generator).to(dtype),)
