"""Diagnose the torch.mv baseline hang: instrument the harness, time torch_mv_bf16."""
import faulthandler, os, sys, time
faulthandler.dump_traceback_later(170, exit=True)
t00 = time.monotonic()
def log(*a):
    print(f"[{time.monotonic()-t00:7.2f}]", *a, flush=True)
import torch
log("torch", torch.__version__, torch.version.cuda, "MODULE_LOADING", os.environ.get("CUDA_MODULE_LOADING"))
from hqval.backends import get
from hqval.timing import harness, baselines
from hqval.timing.gemv import Shape
b = get("cuda", "sm_90")
log("backend", b.device_name())
filler = harness.filler_for(b)
orig_start, orig_busy = filler.start, filler.still_busy
def start(us):
    log("  filler.start", us, "us"); return orig_start(us)
def busy(tok):
    r = orig_busy(tok); log("  still_busy", r); return r
filler.start, filler.still_busy = start, busy
orig_br = harness._bracketed
n = [0]; slow = [0]
def br(backend, arm, copy, prime=0):
    t = time.perf_counter(); r = orig_br(backend, arm, copy, prime); d = time.perf_counter() - t
    n[0] += 1
    if d > 0.05 and slow[0] < 20:
        slow[0] += 1; log(f"  _bracketed #{n[0]} {arm.name} took {d*1e3:.1f} ms")
    return r
harness._bracketed = br
orig_pc = harness.time.perf_counter
cfg = harness.TimingConfig(iterations=100, runs=3, prime=1, copy_per_run=True)
c = baselines.copy_bandwidth(b, harness.TimingConfig(), filler)
log("copy", c.gbps)
x = torch.zeros(4, device="cuda"); torch.cuda.synchronize()
log("torch stream", torch.cuda.current_stream(), torch.cuda.current_stream().cuda_stream)
err, cur = b.cu.cuCtxGetCurrent(); log("ctx ours", b.ctx, "current", cur)
for it in range(2):
    t = time.monotonic()
    tb = baselines.torch_mv_bf16(b, Shape(4096, 5120), "hot", b.l2_bytes(), cfg, filler)
    log(f"torch_mv hot #{it} done in {time.monotonic()-t:.1f}s: {tb.median_us:.2f} us")
# how many kernels one torch.mv enqueues
from torch.profiler import profile, ProfilerActivity
w = torch.randn(4096, 5120, device="cuda", dtype=torch.bfloat16); v = torch.randn(5120, device="cuda", dtype=torch.bfloat16); y = torch.empty(4096, device="cuda", dtype=torch.bfloat16)
with profile(activities=[ProfilerActivity.CUDA]) as p:
    for _ in range(3): torch.mv(w, v, out=y)
    torch.cuda.synchronize()
log([ (e.key, e.count) for e in p.key_averages()][:10])
log("diag done")
