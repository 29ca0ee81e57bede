#!/usr/bin/env python3
"""torchvision's side of bench/peers/imagefolder.sh: the ImageNet training input pipeline
(ImageFolder + PIL decode, RandomResizedCrop 224, RandomHorizontalFlip, ToTensor, Normalize,
DataLoader batch 32 with N worker processes, shuffled) over whole passes of a folder of JPEGs.
Prints one JSON line: {"images_per_s": [one per pass], "cpu_ms_per_image": [...], ...}. Each pass builds a fresh iterator, so
worker start-up is included (DataLoader's default, persistent_workers=False), as on Spore's side.
Run with Debian's /usr/bin/python3 (python3-torch, python3-torchvision, python3-pil)."""
import argparse
import json
import resource
import sys
import time

try:
    import torch
    import torchvision
    from torchvision import datasets, transforms
except ImportError as e:  # a clear message instead of a traceback
    sys.exit(f"imagefolder_torch.py: {e}; install python3-torchvision (scripts/setup.sh --bench)")


def cpu_seconds():
    """User + system CPU of this process and its reaped children (the DataLoader workers)."""
    t = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        t += r.ru_utime + r.ru_stime
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, help="ImageFolder root (one folder per class)")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args()
    torch.manual_seed(1)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    ds = datasets.ImageFolder(a.dir, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True,
                                         num_workers=a.workers)
    ips, cpu = [], []
    for _ in range(a.passes):
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        n = 0
        it = iter(loader)
        for x, _y in it:
            assert x.shape[1:] == (3, 224, 224) and x.dtype == torch.float32, x.shape
            n += x.shape[0]
        del it  # the exhausted iterator has joined its workers; their CPU is in RUSAGE_CHILDREN
        ips.append(n / (time.perf_counter() - t0))
        cpu.append(1e3 * (cpu_seconds() - c0) / n)
    print(json.dumps({"images_per_s": ips, "cpu_ms_per_image": cpu, "images": len(ds), "workers": a.workers,
                      "torch": torch.__version__, "torchvision": torchvision.__version__}))


if __name__ == "__main__":
    main()
