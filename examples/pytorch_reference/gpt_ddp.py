#!/usr/bin/python3
"""The same GPT in PyTorch, trained with DDP over gloo: the reference figures for
//examples:speed_bench, measured in the same sitting on the same machine.

    /usr/bin/python3 examples/pytorch_reference/gpt_ddp.py                 # fp32, 2 ranks x 1 thread
    /usr/bin/python3 examples/pytorch_reference/gpt_ddp.py --bf16          # torch.autocast("cpu", bfloat16)
    /usr/bin/python3 examples/pytorch_reference/gpt_ddp.py --nproc=1 --threads=2 --micro_batch=8

PyTorch at its best on this machine with Debian's packages (issue 40), unless
--untuned: the process re-executes itself once with tcmalloc preloaded (when
libtcmalloc-minimal4 is installed), ATen's AVX-512 kernels (when the CPU has
them; Debian's build picks AVX2 by default) and OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS set to --threads (the pthread OpenBLAS that Debian's
torch loads through libblas.so.3 otherwise starts a thread per core in every
rank). Each lifted the figures (docs/compute-log.md, 2026-12-08); jemalloc
and AdamW's foreach form did not. The causal mask is a buffer, as nanoGPT
writes it. Prints one "loaded:" line saying what it ran with.

Architecture as fsdp/nn/gpt_model.h: learned token and position embeddings,
pre-norm blocks (LayerNorm, causal multi-head attention with a fused qkv
projection, residual; LayerNorm, 4x MLP with tanh GELU, residual), a final
LayerNorm and an untied head; AdamW, gradient clipping at 1.0. Random tokens:
the speed does not depend on the data. Prints tokens/s over the steps after
the first and each rank's peak RSS. Needs Debian's python3-torch (1.13).
"""
import argparse
import ctypes
import math
import os
import resource
import signal
import sys
import time

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
TUNED_MARK = "GPT_DDP_TUNED"


def cpu_has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        return False
    return all(f in flags for f in ("avx512f", "avx512bw", "avx512vl", "avx512dq"))


def threads_from_argv(argv):
    for i, a in enumerate(argv):
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
    return "1"


def tune_environment():
    """Re-executes this script once with the environment PyTorch runs best in
    here (the module docstring says which and why); the libraries read it when
    they load, before any Python code of ours could set it."""
    if "--untuned" in sys.argv or os.environ.get(TUNED_MARK) == "1":
        return
    env = dict(os.environ, **{TUNED_MARK: "1"})
    threads = threads_from_argv(sys.argv)
    env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = threads
    if cpu_has_avx512():
        env.setdefault("ATEN_CPU_CAPABILITY", "avx512")
    if os.path.exists(TCMALLOC):
        env["LD_PRELOAD"] = " ".join(filter(None, [env.get("LD_PRELOAD"), TCMALLOC]))
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


if __name__ == "__main__":
    tune_environment()

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, heads, seq_len):
        super().__init__()
        self.heads = heads
        causal = torch.ones(seq_len, seq_len).tril()  # float: gloo broadcasts no bool buffer
        self.register_buffer("causal", causal.view(1, 1, seq_len, seq_len), persistent=False)
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        shape = (b, t, self.heads, c // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        scores = scores.masked_fill(self.causal[:, :, :t, :t] == 0, float("-inf"))
        att = scores.softmax(dim=-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, c, heads, vocab, seq_len):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(seq_len, c)
        self.blocks = nn.ModuleList(Block(c, heads, seq_len) for _ in range(layers))
        self.lnf = nn.LayerNorm(c)
        self.head = nn.Linear(c, vocab, bias=False)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.lnf(x))


def die_with_parent():
    """A rank dies with the launching process (Linux PR_SET_PDEATHSIG): when a
    caller's timeout kills it, no rank is left holding the rendezvous port."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def loaded_line(args):
    """What this process computes with: the figures mean little without it."""
    config = torch.__config__.show()
    capability = next((l.split(":", 1)[1].strip() for l in config.splitlines()
                       if "CPU capability usage" in l), "?")
    onednn = next((l.strip().lstrip("- ") for l in config.splitlines() if "MKL-DNN" in l), "none")
    with open("/proc/self/maps") as f:
        libs = sorted({l.split()[-1] for l in f if ".so" in l})
    blas = [l for l in libs if "blas" in os.path.basename(l)]
    blas_text = os.path.realpath(blas[0]) if blas else "none"
    for path in blas:
        try:
            get_config = ctypes.CDLL(path).openblas_get_config
            get_config.restype = ctypes.c_char_p
            blas_text += f" ({get_config().decode()})"
            break
        except (OSError, AttributeError):
            pass
    allocator = next((os.path.basename(l) for l in libs if "tcmalloc" in l or "jemalloc" in l),
                     "glibc malloc")
    return (f"loaded: torch {torch.__version__}, ATen kernels {capability}, {onednn} "
            f"(bf16 products under autocast), BLAS {blas_text} (fp32 products), "
            f"allocator {allocator}, {torch.get_num_threads()} intra-op threads "
            f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
            f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}), "
            f"attention as matmul + masked softmax (torch 1.13 has no "
            f"scaled_dot_product_attention), AdamW foreach={bool(args.foreach)}")


def run(rank, args):
    die_with_parent()
    torch.set_num_threads(args.threads)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=args.nproc)
    torch.manual_seed(42)
    model = Gpt(args.layers, args.d_model, args.heads, args.vocab, args.seq_len)
    ddp = nn.parallel.DistributedDataParallel(model) if args.nproc > 1 else model
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-4, weight_decay=0.0, foreach=bool(args.foreach))
    if rank == 0:
        print(loaded_line(args), flush=True)
    gen = torch.Generator().manual_seed(rank)
    timed, tokens = 0.0, 0
    for step in range(args.steps):
        x = torch.randint(args.vocab, (args.micro_batch, args.seq_len), generator=gen)
        y = torch.randint(args.vocab, (args.micro_batch, args.seq_len), generator=gen)
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            logits = ddp(x)
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
        opt.step()
        elapsed = time.perf_counter() - start
        if step > 0:
            timed += elapsed
            tokens += args.micro_batch * args.seq_len * args.nproc
        if rank == 0:
            print(f"step {step + 1}/{args.steps} loss {loss.item():.4f} {elapsed * 1e3:.0f} ms",
                  flush=True)
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    rates = [None] * args.nproc
    dist.all_gather_object(rates, (tokens / timed, rss_gib))
    if rank == 0:
        params = sum(p.numel() for p in model.parameters())
        layout = (f"DDP gloo, {args.nproc} ranks" if args.nproc > 1 else "1 process") + \
            f" x {args.threads} thread{'s' if args.threads > 1 else ''}"
        print(f"pytorch {torch.__version__} {'bf16 autocast' if args.bf16 else 'fp32'}, "
              f"{layout}, {params} parameters: "
              f"{rates[0][0]:.0f} tok/s; peak RSS per rank "
              + ", ".join(f"{r[1]:.2f}" for r in rates) + " GiB", flush=True)
    # Every rank is done with the group before any leaves; then leave at once.
    # Not destroy_process_group(): with torch 1.13's gloo it left one rank
    # waiting at exit, after the results were printed, until the caller's
    # timeout (two of four full-size runs on 2026-12-05, 9 minutes each).
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d_model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--seq_len", type=int, default=256)
    p.add_argument("--micro_batch", type=int, default=4)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--foreach", type=int, default=0, help="AdamW's foreach form (1) or not (0, torch 1.13's default)")
    p.add_argument("--untuned", action="store_true",
                   help="run in the environment as it is (no tcmalloc, AVX-512 or thread counts)")
    p.add_argument("--port", type=int, default=29533)
    args = p.parse_args()
    mp.spawn(run, args=(args,), nprocs=args.nproc)


if __name__ == "__main__":
    main()
