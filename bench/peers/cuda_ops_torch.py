"""PyTorch eager on the same ops and shapes as bench/peers/cuda_ops.cpp, timed the same way (a
warm-up, groups of calls closed by torch.cuda.synchronize(), the median per call), one JSON object
per line. TF32 stays off for float32 matmul (PyTorch's default, and what Spore's cuBLASLt call
does), so both sides do the same arithmetic. scripts/gpu_check.sh prints both side by side.
    python3 bench/peers/cuda_ops_torch.py [--quick] [--filter substring]
"""
import argparse
import json
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no GPU visible to PyTorch"}))
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    big = (1 << 22) if args.quick else (1 << 24)
    cases = []
    for dt, dn in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
        e = torch.finfo(dt).bits // 8

        def g(*shape, dt=dt):
            return torch.randn(*shape, device=dev).to(dt)

        x, y = g(big), g(big)
        m, row = g(4096, big // 4096), g(big // 4096)
        n1, n2 = str(big), f"4096x{big // 4096}"
        cases += [
            ("add", dn, n1, lambda x=x, y=y: x + y, 3 * e * big, 0),
            ("mul_broadcast_row", dn, n2, lambda m=m, row=row: m * row, 2 * e * big, 0),
            ("exp", dn, n1, lambda x=x: torch.exp(x), 2 * e * big, 0),
            ("relu", dn, n1, lambda x=x: torch.relu(x), 2 * e * big, 0),
            ("gelu", dn, n1, lambda x=x: torch.nn.functional.gelu(x), 2 * e * big, 0),
            ("cast_to_f32", dn, n1, lambda x=x: x.to(torch.float32), (e + 4) * big, 0),
            ("transpose_copy", dn, n2, lambda m=m: m.t().contiguous(), 2 * e * big, 0),
            ("sum_last_axis", dn, n2, lambda m=m: m.sum(1), e * big, 0),
            ("sum_first_axis", dn, n2, lambda m=m: m.sum(0), e * big, 0),
            ("softmax_last_axis", dn, n2, lambda m=m: torch.softmax(m, -1), 2 * e * big, 0),
            ("log_softmax_last_axis", dn, n2, lambda m=m: torch.log_softmax(m, -1), 2 * e * big, 0),
        ]
        n = 2048 if args.quick else 4096
        a, b = g(n, n), g(n, n)
        ba, bb = g(32, 512, 512), g(32, 512, 512)
        sa, sb = g(64, 120), g(120, 84)
        cases += [
            ("matmul", dn, f"{n}^3", lambda a=a, b=b: a @ b, 0, 2.0 * n * n * n),
            ("bmm", dn, "32x512^3", lambda a=ba, b=bb: torch.bmm(a, b), 0, 2.0 * 32 * 512**3),
            ("matmul_small", dn, "64x120x84", lambda a=sa, b=sb: a @ b, 0, 2.0 * 64 * 120 * 84),
        ]
    reps = 5 if args.quick else 11
    for op, dn, shape, fn, nbytes, flops in cases:
        if args.filter and args.filter not in f"{op}/{dn}":
            continue
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        one = time.perf_counter() - t0
        iters = int(min(max(1e-3 / max(one, 1e-7), 10), 1000))
        per_call = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            torch.cuda.synchronize()
            per_call.append((time.perf_counter() - t0) / iters)
        s = statistics.median(per_call)
        rec = {"op": op, "dtype": dn, "shape": shape, "us": round(s * 1e6, 2)}
        if nbytes:
            rec["gbps"] = round(nbytes / s / 1e9, 1)
        if flops:
            rec["tflops"] = round(flops / s / 1e12, 2)
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
