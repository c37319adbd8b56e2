#!/usr/bin/env python3
"""PyTorch parity for train_gpt --model=llama (issue 41).

An independent Llama written here from the equations of docs/model.md
("Llama"): RMSNorm, rotary positions in Hugging Face's rotate-half pairing,
grouped-query causal attention, SwiGLU, an untied head, mean cross-entropy;
AdamW with decoupled weight decay. It starts from the same weights as
train_gpt (written by this script as init.safetensors in LlamaForCausalLM's
names and shapes), trains on the same batches (train_gpt's token-file windows,
fsdp/data/token_file.h and batcher.h), and compares per-step losses (within
1e-5 relative) and the exported weights after the last step, for no_shard and
full_shard at 2 ranks.

Needs torch (CPU is enough) and a built train_gpt:
  bazel build -c opt //examples:train_gpt //examples:tokenize
  bazel-bin/examples/tokenize --input=/usr/share/games/fortunes/fortunes \
      --vocab=300 --out=/tmp/fortunes
  python3 examples/pytorch_reference/llama_parity.py \
      --train_gpt=bazel-bin/examples/train_gpt --data=/tmp/fortunes_train.bin \
      --vocab=300 --workdir=/tmp/llama_parity
Exit status 0 when every check passes; each failure is printed.
"""

import argparse
import json
import math
import os
import struct
import subprocess
import sys

import torch

# The model and run, shared by both sides.
CONFIG = dict(layers=2, d_model=64, heads=4, kv_heads=2, ffn_hidden=96, seq_len=32,
              rope_theta=10000.0, norm_eps=1e-5)
RUN = dict(global_batch=8, steps=5, lr=1e-3, weight_decay=0.1, beta1=0.9, beta2=0.999,
           eps=1e-8)


def param_specs(c, vocab):
    """LlamaUnitSpecs' parameters in order: (name, shape)."""
    C, F = c["d_model"], c["ffn_hidden"]
    kv = c["kv_heads"] * (C // c["heads"])
    specs = [("model.embed_tokens.weight", [vocab, C])]
    for l in range(c["layers"]):
        p = f"model.layers.{l}."
        specs += [(p + "input_layernorm.weight", [C]),
                  (p + "self_attn.q_proj.weight", [C, C]),
                  (p + "self_attn.k_proj.weight", [kv, C]),
                  (p + "self_attn.v_proj.weight", [kv, C]),
                  (p + "self_attn.o_proj.weight", [C, C]),
                  (p + "post_attention_layernorm.weight", [C]),
                  (p + "mlp.gate_proj.weight", [F, C]),
                  (p + "mlp.up_proj.weight", [F, C]),
                  (p + "mlp.down_proj.weight", [C, F])]
    specs += [("model.norm.weight", [C]), ("lm_head.weight", [vocab, C])]
    return specs


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        blob = struct.pack(f"<{t.numel()}f", *t.detach().to(torch.float32).flatten().tolist())
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", (name, entry["dtype"])
        begin, end = entry["data_offsets"]
        values = struct.unpack(f"<{(end - begin) // 4}f", raw[8 + n + begin:8 + n + end])
        out[name] = torch.tensor(values, dtype=torch.float64).reshape(entry["shape"])
    return out


def read_tokens(path):
    with open(path, "rb") as f:
        raw = f.read()
    header = struct.unpack("<256i", raw[:1024])
    assert header[0] == 20240520 and header[1] == 1, "not an llm.c token file"
    n = header[2]
    return torch.tensor(struct.unpack(f"<{n}H", raw[1024:1024 + 2 * n]), dtype=torch.long)


def batch(tokens, step, global_batch, seq_len):
    """Global step `step` (0-based): sequence i is the window at (i mod W) L."""
    windows = (tokens.numel() - 1) // seq_len
    rows = []
    for i in range(step * global_batch, (step + 1) * global_batch):
        start = (i % windows) * seq_len
        rows.append(tokens[start:start + seq_len + 1])
    rows = torch.stack(rows)
    return rows[:, :-1], rows[:, 1:]


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate(x, theta):
    """x (B, heads, T, hs): the rotate-half pairing of channel i and i + hs/2."""
    T, hs = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos = torch.cat([angle.cos(), angle.cos()], -1).to(x.dtype)
    sin = torch.cat([angle.sin(), angle.sin()], -1).to(x.dtype)
    half = hs // 2
    rotated_half = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated_half * sin


def loss_fn(p, c, inputs, targets):
    H, KV = c["heads"], c["kv_heads"]
    C = c["d_model"]
    hs = C // H
    B, T = inputs.shape
    x = p["model.embed_tokens.weight"][inputs]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(c["layers"]):
        q_ = f"model.layers.{l}."
        h = rms_norm(x, p[q_ + "input_layernorm.weight"], c["norm_eps"])
        q = (h @ p[q_ + "self_attn.q_proj.weight"].T).view(B, T, H, hs).transpose(1, 2)
        k = (h @ p[q_ + "self_attn.k_proj.weight"].T).view(B, T, KV, hs).transpose(1, 2)
        v = (h @ p[q_ + "self_attn.v_proj.weight"].T).view(B, T, KV, hs).transpose(1, 2)
        q, k = rotate(q, c["rope_theta"]), rotate(k, c["rope_theta"])
        k = k.repeat_interleave(H // KV, dim=1)  # query head j reads kv head j // group
        v = v.repeat_interleave(H // KV, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(hs)
        scores = scores.masked_fill(~mask, float("-inf"))
        att = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + att @ p[q_ + "self_attn.o_proj.weight"].T
        h = rms_norm(x, p[q_ + "post_attention_layernorm.weight"], c["norm_eps"])
        gate = h @ p[q_ + "mlp.gate_proj.weight"].T
        up = h @ p[q_ + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ p[q_ + "mlp.down_proj.weight"].T
    logits = rms_norm(x, p["model.norm.weight"], c["norm_eps"]) @ p["lm_head.weight"].T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1))


def reference_run(init, tokens):
    """RUN["steps"] AdamW steps in float64 from `init`: (losses, final weights)."""
    p = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    opt = torch.optim.AdamW(list(p.values()), lr=RUN["lr"], betas=(RUN["beta1"], RUN["beta2"]),
                            eps=RUN["eps"], weight_decay=RUN["weight_decay"])
    losses = []
    for step in range(RUN["steps"]):
        inputs, targets = batch(tokens, step, RUN["global_batch"], CONFIG["seq_len"])
        opt.zero_grad()
        loss = loss_fn(p, CONFIG, inputs, targets)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach() for k, v in p.items()}


def train_gpt_run(args, strategy, init_path):
    metrics = os.path.join(args.workdir, f"{strategy}.jsonl")
    export = os.path.join(args.workdir, f"{strategy}.safetensors")
    if os.path.exists(metrics):
        os.remove(metrics)
    c = CONFIG
    cmd = [args.train_gpt, "--model=llama", "--nproc=2", f"--strategy={strategy}",
           f"--layers={c['layers']}", f"--d_model={c['d_model']}", f"--heads={c['heads']}",
           f"--kv_heads={c['kv_heads']}", f"--ffn_hidden={c['ffn_hidden']}",
           f"--seq_len={c['seq_len']}", f"--rope_theta={c['rope_theta']}",
           f"--norm_eps={c['norm_eps']}", f"--vocab={args.vocab}", f"--data={args.data}",
           f"--global_batch={RUN['global_batch']}", f"--steps={RUN['steps']}",
           "--warmup_steps=0", "--lr_decay=constant", f"--lr={RUN['lr']}",
           f"--weight_decay={RUN['weight_decay']}", "--grad_clip=0", "--optimizer=adamw",
           "--precision=fp32", f"--init_from={init_path}", f"--export={export}",
           f"--metrics_out={metrics}"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"train_gpt failed ({strategy}):\n{done.stdout}\n{done.stderr}")
    losses = []
    with open(metrics) as f:
        for line in f:
            record = json.loads(line)
            if not record.get("final") and "loss" in record:
                losses.append(record["loss"])
    return losses, read_safetensors(export)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train_gpt", required=True)
    parser.add_argument("--data", required=True, help="llm.c token file")
    parser.add_argument("--vocab", type=int, required=True)
    parser.add_argument("--workdir", default="/tmp/llama_parity")
    parser.add_argument("--weight_atol", type=float, default=1e-5,
                        help="largest |train_gpt - torch| of a trained weight")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.manual_seed(0)

    # The same starting weights for both sides, rounded to fp32 as the file holds them.
    init = {}
    for name, shape in param_specs(CONFIG, args.vocab):
        if len(shape) == 1:
            init[name] = torch.ones(shape, dtype=torch.float64)
        else:
            init[name] = (torch.randn(shape, dtype=torch.float64) * 0.02).float().double()
    init_path = os.path.join(args.workdir, "init.safetensors")
    write_safetensors(init_path, init)

    tokens = read_tokens(args.data)
    assert int(tokens.max()) < args.vocab, "a token outside --vocab"
    want_losses, want_weights = reference_run(init, tokens)

    failures = 0
    for strategy in ("no_shard", "full_shard"):
        losses, weights = train_gpt_run(args, strategy, init_path)
        if len(losses) != RUN["steps"]:
            print(f"{strategy}: {len(losses)} losses, expected {RUN['steps']}")
            failures += 1
            continue
        for step, (got, want) in enumerate(zip(losses, want_losses), start=1):
            relative = abs(got - want) / abs(want)
            ok = relative <= 1e-5
            failures += not ok
            print(f"{strategy} step {step}: train_gpt {got:.8f} torch {want:.8f} "
                  f"relative {relative:.2e} {'ok' if ok else 'FAIL'}")
        if set(weights) != set(want_weights):
            print(f"{strategy}: exported tensors differ: "
                  f"{sorted(set(weights) ^ set(want_weights))}")
            failures += 1
            continue
        worst = max((weights[k] - want_weights[k]).abs().max().item() for k in weights)
        ok = worst <= args.weight_atol
        failures += not ok
        print(f"{strategy}: trained weights, largest difference {worst:.3e} "
              f"(tolerance {args.weight_atol:g}) {'ok' if ok else 'FAIL'}")
    print("PASS" if failures == 0 else f"FAIL: {failures} check(s)")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
