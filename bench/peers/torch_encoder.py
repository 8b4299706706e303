#!/usr/bin/env python3
"""PyTorch CPU peer of bench_encoder: one training step of the same encoder classifiers.

The models of bench/bench_encoder.cpp (kattn::nn, float32) written in torch, float32:

  input        fashion: 28×28 images → 7×7 patches (16 tokens, raster order) → Linear(49, d)
               + fixed sinusoidal positions; sst2: nn.Embedding(15000, d, padding_idx=0)
               + sinusoidal positions
  encoder      2 post-LN layers: h = LN(x + Drop(Attn(x))), y = LN(h + Drop(FFN(h))),
               FFN = Linear(d, 256)–ReLU–Drop–Linear(256, d), dropout 0.1
  pooling      masked mean over the valid tokens; head Linear(d, classes)
  step         F.cross_entropy (+ λ·KL for FSKA); zero_grad; backward;
               clip_grad_norm_(1.0); lr = warm-up + cosine (set per step); AdamW(lr 1e-3,
               weight decay 1e-4 on weight matrices and the embedding, none on biases, norms
               and flows: kattn's split); argmax accuracy count (one .item())

Attention modules:
  transformer  nn.TransformerEncoderLayer(batch_first, norm_first=False) — post-LN with
               nn.MultiheadAttention (fused QKV in_proj, SDPA); its attention-probability
               dropout is set to 0 because kattn's softmax_mha has none (the residual and FFN
               dropouts stay). Text batches pass src_key_padding_mask (all False here, as a
               real training loop would pass it).
  fska         per head h (dh = d/H): Q = K = x_h (no projection); V = x·W_V with W_V a fixed
               orthogonal d×d buffer (QR of a Gaussian); per-head RealNVP flow on R^{2dh}:
               3 affine couplings, masks b_j = [(j + l) even], s and t each
               Linear(2dh, 4dh)–ReLU–Linear(4dh, 2dh) (last Linear zero-initialised, as kattn);
               each step draws z ~ N(0, I) and takes ω = F(z) (reparameterised) for 64 pairs
               (ω₁, ω₂) per head; φ(x) = (4m)^{-1/2}[cos Ω₁x + cos Ω₂x; sin Ω₁x + sin Ω₂x],
               φ⁺ = ELU(φ) + 1; linear attention Σ_j φ⁺(q_i)ᵀφ⁺(k_j) v_j / Σ_j φ⁺(q_i)ᵀφ⁺(k_j)
               (padded keys' features zeroed, denominator clamped at 1e-6); output Linear(d, d).
               Regulariser λ·Σ_h KL(p_θh ‖ p_NGSM), λ = 1e-3, Monte-Carlo with 64 fresh draws per
               flow: KL ≈ mean[log N(z) − log|det J_F(z)| − log p_NGSM(F(z))]; p_NGSM a fixed
               10-component diagonal Gaussian mixture on R^{2dh} (means N(0, 1), variances 1,
               equal weights; one per layer, as kattn). The H flows are evaluated batched
               (torch.baddbmm over a head dimension), and the 64 attention draws and the 64 KL
               draws go through the flow in one pass of 128 rows (rows are independent, so this
               is the same function and gradient as kattn's two passes). --flow masked (default)
               is the usual RealNVP code: s, t see b⊙x (all D inputs) and produce all D
               outputs; --flow compressed computes the same function on the b_j = 1 input
               columns and the b_j = 0 output columns only (half the FLOPs), as kattn's
               batched couplings (samplers/detail/coupling.hpp) do. Flows are float32 here;
               kattn keeps flow parameters and flow arithmetic in double.
  performer    learned Q/K/V (one fused Linear(d, 3d): the same parameters and FLOPs as three),
               favor features φ(x) = exp(ω·x̂ − |x̂|²/2 − c)/√m, x̂ = dh^{-1/4} x, m = 64 columns
               of a fixed orthogonal Gaussian Ω (dh × 64, rows of each dh-block orthogonal,
               norms χ_dh), shared by the heads (kattn's num_features semantics); stabiliser c:
               the row max for queries, the per-(batch, head) max for keys (detached); linear
               attention as above; output Linear(d, d).

Timing as bench_encoder: one seeded random batch built before timing; --warmup untimed steps,
then the median (and minimum) of --repeats timed steps. torch.set_num_threads(N) for each
thread count, 1 inter-op thread. Records: {impl, config, model, threads, step_seconds,
step_seconds_min, tokens_per_second, samples, params, first_loss, ...}.

Memory: base_rss_bytes is the resident set before the case's model and batch are built (torch
already imported), peak_rss_bytes the process's high-water mark (VmHWM) after the timed steps,
as bench_encoder records them; run one case per process when memory matters.

usage: torch_encoder.py --threads 1,2 [--configs fashion,sst2,lra] [--models transformer,fska,performer]
                        [--lengths 1024,4096] [--batch B]
                        [--warmup 3] [--repeats 10] [--optimizer default|foreach|fused] [--flow masked|compressed]
                        [--json out.json]
"""

import argparse
import json
import math
import statistics
import sys
import time

from procfs import proc_status_bytes

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except Exception as e:  # noqa: BLE001 - any import failure means: no peer here
    print(f"torch_encoder: torch is not available ({e.__class__.__name__}: {e})", file=sys.stderr)
    sys.exit(3)

CONFIGS = {
    "fashion": dict(images=True, batch=128, length=16, dim=64, heads=4, layers=2, ffn=256, classes=10, vocab=0),
    "sst2": dict(images=False, batch=64, length=32, dim=128, heads=2, layers=2, ffn=256, classes=2, vocab=15000),
    # Long Range Arena's efficiency model (its byte-level text classifier), bench_encoder's lra
    "lra": dict(images=False, batch=8, length=1024, dim=256, heads=4, layers=4, ffn=1024, classes=2, vocab=256),
}
DROPOUT = 0.1


# ------------------------------------------------------------------------- inputs

def sinusoidal(length, dim):
    pe = torch.zeros(length, dim, dtype=torch.float64)
    t = torch.arange(length, dtype=torch.float64)[:, None]
    i = torch.arange(0, dim, 2, dtype=torch.float64)
    ang = t / torch.pow(10000.0, i / dim)
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang[:, : dim // 2])
    return pe.float()


class PatchInput(nn.Module):
    def __init__(self, dim, patch=7, side=28):
        super().__init__()
        self.patch, self.side = patch, side
        self.n = side // patch
        self.proj = nn.Linear(patch * patch, dim)
        self.register_buffer("pe", sinusoidal(self.n * self.n, dim))

    def forward(self, pixels):  # [B, 784] → [B, 16, d]
        B, p, n = pixels.shape[0], self.patch, self.n
        x = pixels.view(B, n, p, n, p).permute(0, 1, 3, 2, 4).reshape(B, n * n, p * p)
        return self.proj(x) + self.pe


class TokenInput(nn.Module):
    def __init__(self, vocab, dim, max_length):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        self.register_buffer("pe", sinusoidal(max_length, dim))

    def forward(self, ids):  # [B, L] → [B, L, d]
        return self.emb(ids) + self.pe[: ids.shape[1]]


# ------------------------------------------------------------------------- attention

def linear_attention(phi_q, phi_k, v, key_mask, eps=1e-6):
    """phi_* [B, H, L, F], v [B, H, L, dv], key_mask [B, L] (1 valid) or None."""
    if key_mask is not None:
        phi_k = phi_k * key_mask[:, None, :, None]
    ones = torch.ones(v.shape[:-1] + (1,), dtype=v.dtype)
    kv = phi_k.transpose(-2, -1) @ torch.cat([v, ones], -1)  # [B, H, F, dv + 1]
    nd = phi_q @ kv
    return nd[..., :-1] / nd[..., -1:].clamp_min(eps)


def heads(x, H):  # [B, L, D] → [B, H, L, D/H]
    B, L, D = x.shape
    return x.view(B, L, H, D // H).transpose(1, 2)


def merge(x):  # [B, H, L, dh] → [B, L, H·dh]
    B, H, L, dh = x.shape
    return x.transpose(1, 2).reshape(B, L, H * dh)


def orthogonal_gaussian(d, m, gen):
    blocks = []
    for _ in range((m + d - 1) // d):
        qm, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
        blocks.append(qm.T)
    w = torch.cat(blocks, 0)[:m]
    norms = torch.randn(m, d, generator=gen, dtype=torch.float64).norm(dim=1, keepdim=True)
    return (w * norms).T.contiguous().float()  # d × m


class Performer(nn.Module):
    def __init__(self, dim, H, m, gen):
        super().__init__()
        self.H, self.dh, self.m = H, dim // H, m
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.register_buffer("omega", orthogonal_gaussian(self.dh, m, gen))

    def features(self, x, is_query):
        xs = x * self.dh ** -0.25
        u = xs @ self.omega  # [B, H, L, m]
        sq = 0.5 * (xs * xs).sum(-1, keepdim=True)
        c = u.amax(-1, keepdim=True) if is_query else u.amax(dim=(-2, -1), keepdim=True)
        return torch.exp(u - sq - c.detach()) * self.m ** -0.5

    def forward(self, x, key_mask):
        q, k, v = self.qkv(x).chunk(3, -1)
        q, k, v = heads(q, self.H), heads(k, self.H), heads(v, self.H)
        o = linear_attention(self.features(q, True), self.features(k, False), v, key_mask)
        return self.out(merge(o))

    def regularization(self):
        return None


class FlowBank(nn.Module):
    """H independent RealNVP flows on R^D, evaluated batched over the head dimension."""

    def __init__(self, H, D, hidden, layers, compressed=False):
        super().__init__()
        self.D, self.layers, self.compressed = D, layers, compressed
        bound = 1.0 / math.sqrt(D)

        def uni(*shape):
            return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))

        # per layer, nets s and t: W1 [H, D, hidden] (x @ W1), b1 [H, 1, hidden], W2 [H, hidden, D], b2 [H, 1, D]
        self.w1 = nn.ParameterList([uni(H, D, hidden) for _ in range(2 * layers)])
        self.b1 = nn.ParameterList([uni(H, 1, hidden) for _ in range(2 * layers)])
        self.w2 = nn.ParameterList([nn.Parameter(torch.zeros(H, hidden, D)) for _ in range(2 * layers)])
        self.b2 = nn.ParameterList([nn.Parameter(torch.zeros(H, 1, D)) for _ in range(2 * layers)])
        masks = torch.tensor([[1.0 if (j + l) % 2 == 0 else 0.0 for j in range(D)] for l in range(layers)])
        self.register_buffer("masks", masks)
        # compressed: the b_j = 1 (pass) and b_j = 0 (transformed) column indices of each layer
        self.pidx = [torch.nonzero(masks[l] == 1).flatten() for l in range(layers)]
        self.midx = [torch.nonzero(masks[l] == 0).flatten() for l in range(layers)]

    def net(self, k, xm):
        h = torch.relu(torch.baddbmm(self.b1[k], xm, self.w1[k]))
        return torch.baddbmm(self.b2[k], h, self.w2[k])

    def forward(self, z):  # z [H, n, D] → ω [H, n, D], log|det J| [H, n]
        if self.compressed:
            return self.forward_compressed(z)
        x, logdet = z, 0.0
        for l in range(self.layers):
            b = self.masks[l]
            xm = x * b
            s, t = self.net(2 * l, xm), self.net(2 * l + 1, xm)
            x = xm + (1 - b) * (x * torch.exp(s) + t)
            logdet = logdet + ((1 - b) * s).sum(-1)
        return x, logdet

    def forward_compressed(self, z):
        """The same function on compressed operands: only the Dp pass-through columns feed
        the nets (both first Linears in one bmm) and only the Dm transformed columns of ŝ, t
        are computed (half the FLOPs of the masked form; same parameters and gradients)."""
        x, logdet = z, 0.0
        for l in range(self.layers):
            p, m = self.pidx[l], self.midx[l]
            ks, kt = 2 * l, 2 * l + 1
            xc = x.index_select(-1, p)
            w1 = torch.cat([self.w1[ks].index_select(1, p), self.w1[kt].index_select(1, p)], -1)
            h = torch.relu(torch.baddbmm(torch.cat([self.b1[ks], self.b1[kt]], -1), xc, w1))
            hs, ht = h.chunk(2, -1)
            s = torch.baddbmm(self.b2[ks].index_select(-1, m), hs, self.w2[ks].index_select(-1, m))
            t = torch.baddbmm(self.b2[kt].index_select(-1, m), ht, self.w2[kt].index_select(-1, m))
            x = x.index_copy(-1, m, x.index_select(-1, m) * torch.exp(s) + t)
            logdet = logdet + s.sum(-1)
        return x, logdet


class FSKA(nn.Module):
    def __init__(self, dim, H, m, gen, flow_layers=3, kl_weight=1e-3, kl_samples=64, Q=10, scale=1.0,
                 compressed_flow=False):
        super().__init__()
        self.H, self.dh, self.m = H, dim // H, m
        self.kl_weight, self.kl_samples, self.scale = kl_weight, kl_samples, scale
        D = 2 * self.dh
        self.flows = FlowBank(H, D, 2 * D, flow_layers, compressed_flow)
        wv, _ = torch.linalg.qr(torch.randn(dim, dim, generator=gen, dtype=torch.float64))
        self.register_buffer("wv", wv.float())  # fixed orthogonal V
        self.out = nn.Linear(dim, dim)
        self.register_buffer("prior_mu", torch.randn(Q, D, generator=gen))
        self.register_buffer("prior_var", torch.ones(Q, D))
        self.register_buffer("prior_logw", torch.full((Q,), -math.log(Q)))
        self._reg = None

    def log_prior(self, w):  # w [H, n, D] → [H, n]
        diff = w[:, :, None, :] - self.prior_mu  # [H, n, Q, D]
        lp = -0.5 * (diff * diff / self.prior_var).sum(-1) - 0.5 * torch.log(2 * math.pi * self.prior_var).sum(-1)
        return torch.logsumexp(lp + self.prior_logw, -1)

    def forward(self, x, key_mask):
        H, dh, m, n = self.H, self.dh, self.m, self.kl_samples
        D = 2 * dh
        z = torch.randn(H, m + n, D)  # attention draws and KL draws, one pass
        w, logdet = self.flows(z)
        # KL(p_θ ‖ p_NGSM) per head, Monte-Carlo over the n KL draws
        zk, wk, ldk = z[:, m:], w[:, m:], logdet[:, m:]
        log_q = -0.5 * (zk * zk).sum(-1) - 0.5 * D * math.log(2 * math.pi) - ldk
        self._reg = self.kl_weight * (log_q - self.log_prior(wk)).mean(-1).sum()
        # features: Ω_h as [H, dh, 2m], columns ω₁ then ω₂
        om = w[:, :m]  # [H, m, 2dh]: row k = (ω₁ₖ, ω₂ₖ)
        omega = torch.cat([om[..., :dh], om[..., dh:]], 1).transpose(1, 2)  # [H, dh, 2m]
        xh = heads(x, H)  # [B, H, L, dh]
        u = xh @ omega  # [B, H, L, 2m]
        cu, su = torch.cos(u), torch.sin(u)
        c = (4 * m) ** -0.5
        phi = c * torch.cat([cu[..., :m] + cu[..., m:], su[..., :m] + su[..., m:]], -1)
        phi = F.elu(self.scale * phi) + 1
        v = heads(x @ self.wv, H)
        o = linear_attention(phi, phi, v, key_mask)
        return self.out(merge(o))

    def regularization(self):
        return self._reg


# ------------------------------------------------------------------------- model

class EncoderLayer(nn.Module):
    """Post-LN encoder layer around any attention module attn(x, key_mask)."""

    def __init__(self, dim, ffn, attn):
        super().__init__()
        self.attn = attn
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, ffn), nn.Linear(ffn, dim)

    def forward(self, x, key_mask, pad_mask):
        h = self.ln1(x + F.dropout(self.attn(x, key_mask), DROPOUT, self.training))
        f = self.fc2(F.dropout(F.relu(self.fc1(h)), DROPOUT, self.training))
        return self.ln2(h + F.dropout(f, DROPOUT, self.training))


class TorchLayer(nn.Module):
    """nn.TransformerEncoderLayer without attention-probability dropout (kattn has none)."""

    def __init__(self, dim, H, ffn):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(dim, H, dim_feedforward=ffn, dropout=DROPOUT, activation="relu",
                                                batch_first=True, norm_first=False)
        self.layer.self_attn.dropout = 0.0

    def forward(self, x, key_mask, pad_mask):
        return self.layer(x, src_key_padding_mask=pad_mask)


class Classifier(nn.Module):
    def __init__(self, cfg, model, gen, compressed_flow=False):
        super().__init__()
        d, H = cfg["dim"], cfg["heads"]
        self.images = cfg["images"]
        self.input = PatchInput(d) if self.images else TokenInput(cfg["vocab"], d, cfg["length"])
        layers = []
        for _ in range(cfg["layers"]):
            if model == "transformer":
                layers.append(TorchLayer(d, H, cfg["ffn"]))
            elif model == "fska":
                layers.append(EncoderLayer(d, cfg["ffn"], FSKA(d, H, 64, gen, compressed_flow=compressed_flow)))
            elif model == "performer":
                layers.append(EncoderLayer(d, cfg["ffn"], Performer(d, H, 64, gen)))
            else:
                raise ValueError(f"unknown model '{model}' (expected transformer, fska or performer)")
        self.layers = nn.ModuleList(layers)
        self.head = nn.Linear(d, cfg["classes"])

    def forward(self, x, lengths):
        h = self.input(x)
        B, L, _ = h.shape
        if lengths is None:
            key_mask = pad_mask = None
        else:
            key_mask = (torch.arange(L)[None, :] < lengths[:, None]).float()
            pad_mask = key_mask == 0
        for layer in self.layers:
            h = layer(h, key_mask, pad_mask)
        pooled = h.mean(1) if key_mask is None else (h * key_mask[..., None]).sum(1) / lengths[:, None]
        reg = None
        for layer in self.layers:
            if isinstance(layer, EncoderLayer):
                r = layer.attn.regularization()
                if r is not None:
                    reg = r if reg is None else reg + r
        return self.head(pooled), reg


def param_groups(model):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if ".flows." in name or name.endswith("bias") or p.dim() < 2 or ".ln" in name or "norm" in name:
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": decay, "weight_decay": 1e-4}, {"params": no_decay, "weight_decay": 0.0}]


def warmup_cosine(step, total, base=1e-3, warmup_fraction=0.05):
    w = round(warmup_fraction * total)
    if step < w:
        return base * (step + 1) / w
    if step >= total:
        return 0.0
    p = (step - w) / (total - w)
    return 0.5 * base * (1 + math.cos(math.pi * p))


def random_batch(cfg, gen):
    B = cfg["batch"]
    if cfg["images"]:
        x = torch.rand(B, 28 * 28, generator=gen)
        lengths = None
    else:
        x = torch.randint(2, cfg["vocab"], (B, cfg["length"]), generator=gen)
        lengths = torch.full((B,), cfg["length"], dtype=torch.long)
    y = torch.randint(0, cfg["classes"], (B,), generator=gen)
    return x, lengths, y


def time_steps(cfg, model_name, a):
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    model = Classifier(cfg, model_name, gen, compressed_flow=a.flow == "compressed")
    model.train()
    x, lengths, y = random_batch(cfg, gen)
    params = [p for p in model.parameters() if p.requires_grad]
    kw = {} if a.optimizer == "default" else {a.optimizer: True}
    opt = torch.optim.AdamW(param_groups(model), lr=1e-3, **kw)
    total = a.warmup + a.repeats
    samples, first_loss, correct = [], math.nan, 0
    for s in range(total):
        t0 = time.perf_counter()
        logits, reg = model(x, lengths)
        loss = F.cross_entropy(logits, y)
        if reg is not None:
            loss = loss + reg
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        lr = warmup_cosine(s, total)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        correct += int((logits.detach().argmax(1) == y).sum().item())
        dt = time.perf_counter() - t0
        if s == 0:
            first_loss = float(loss.detach())
        if s >= a.warmup:
            samples.append(dt)
    return {"step_seconds": statistics.median(samples), "step_seconds_min": min(samples),
            "step_seconds_max": max(samples), "samples": samples,
            "params": sum(p.numel() for p in params), "first_loss": first_loss}


def strs(s):
    return [x for x in s.split(",") if x]


def ints(s):
    return [int(x) for x in s.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=ints, default=[0], help="0 = torch's default")
    ap.add_argument("--configs", type=strs, default=["fashion", "sst2"])
    ap.add_argument("--models", type=strs, default=["transformer", "fska", "performer"])
    ap.add_argument("--lengths", type=ints, default=[], help="token configs: sequence lengths (default: the config's)")
    ap.add_argument("--batch", type=int, default=0, help="batch size (default: the config's)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--optimizer", choices=["default", "foreach", "fused"], default="default",
                    help="AdamW implementation (default: torch's choice for CPU tensors)")
    ap.add_argument("--flow", choices=["masked", "compressed"], default="masked",
                    help="FSKA coupling layers: the usual masked form, or on compressed operands (half the FLOPs)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    for c in a.configs:
        if c not in CONFIGS:
            ap.error(f"unknown config '{c}' (expected {', '.join(CONFIGS)})")

    torch.set_num_interop_threads(1)
    default_threads = torch.get_num_threads()
    print(f"# torch {torch.__version__}, {default_threads} threads by default, AdamW {a.optimizer}, FSKA flow {a.flow}; "
          f"median of {a.repeats} after {a.warmup} warm-up", flush=True)
    print(f"{'config':<8} {'model':<12} {'L':>6} {'threads':>7} {'params':>9} {'step_ms':>12} {'min_ms':>12} "
          f"{'tokens/s':>12} {'loss0':>10} {'peak_MiB':>9}", flush=True)
    records = []
    for threads in a.threads:
        t = threads if threads > 0 else default_threads
        torch.set_num_threads(t)
        cases = []
        for cname in a.configs:
            cfg = dict(CONFIGS[cname])
            if a.batch > 0:
                cfg["batch"] = a.batch
            for length in (a.lengths if a.lengths and not cfg["images"] else [cfg["length"]]):
                cases.append((cname, dict(cfg, length=length)))
        for cname, cfg in cases:
            for m in a.models:
                base = proc_status_bytes("VmRSS")
                r = time_steps(cfg, m, a)
                tps = cfg["batch"] * cfg["length"] / r["step_seconds"]
                rec = {"impl": "torch", "config": cname, "model": m, "threads": t,
                       "step_seconds": r["step_seconds"], "step_seconds_min": r["step_seconds_min"],
                       "step_seconds_max": r["step_seconds_max"], "layers": cfg["layers"], "ffn": cfg["ffn"],
                       "base_rss_bytes": base, "peak_rss_bytes": proc_status_bytes("VmHWM"),
                       "tokens_per_second": tps, "samples": r["samples"], "warmup": a.warmup,
                       "repeats": a.repeats, "batch": cfg["batch"], "length": cfg["length"], "dim": cfg["dim"],
                       "heads": cfg["heads"], "params": r["params"], "first_loss": r["first_loss"],
                       "optimizer": a.optimizer, "flow": a.flow}
                records.append(rec)
                print(f"{cname:<8} {m:<12} {cfg['length']:>6} {t:>7} {r['params']:>9} {1e3 * r['step_seconds']:>12.2f} "
                      f"{1e3 * r['step_seconds_min']:>12.2f} {tps:>12.0f} {r['first_loss']:>10.4f} "
                      f"{rec['peak_rss_bytes'] / 2**20:>9.0f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"impl": "torch", "torch_version": torch.__version__,
                       "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
                       "records": records}, f, indent=2)
        print(f"# wrote {a.json}", flush=True)


if __name__ == "__main__":
    main()
