#!/usr/bin/python3
"""Task benchmarks (issue 15): run by bench/tasks.sh against a fresh daemon.

1. Round trip: POST /v1/tasks with one 1 MiB input and one 1 MiB output,
   wait, download the output; against the same steps by hand through the
   sandbox API (create, upload, exec, download, destroy), interleaved in one
   run. Target: task p50 / by-hand p50 <= 1.2.
2. Snapshot: a task that leaves 100 MiB in its writable layer with
   snapshot "always"; the snapshot stage's time from the daemon's
   corral_task_duration_seconds{stage="snapshot"} histogram. Target 200 MB/s;
   baseline: `tar | zstd -1` of the same bytes on the host, in this run.
3. Output collection: a task with one 256 MiB output; the collect stage's
   time from the same histogram. Target 500 MB/s on the local back-end;
   baseline: `sha256sum` + `cp` of the same bytes on the host.
Prints a table and one JSON line ("bench":"tasks").
"""

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sdk", "python"))
import corral  # noqa: E402

MIB = 1 << 20


def stage_sum(client, stage):
    text = client._open("GET", "/metrics", headers={"Accept": "text/plain"}).read_all().decode()
    total = count = 0.0
    for line in text.splitlines():
        if not line.startswith("corral_task_duration_seconds_"):
            continue
        if f'stage="{stage}"' not in line:
            continue
        value = float(line.rsplit(" ", 1)[1])
        if line.startswith("corral_task_duration_seconds_sum"):
            total += value
        elif line.startswith("corral_task_duration_seconds_count"):
            count += value
    return total, count


def by_hand(client, data):
    t0 = time.monotonic()
    sb = client.create(max_lifetime=120)
    sb.put_file("/workspace/in.bin", data)
    r = sb.exec(["sh", "-c", "cp /workspace/in.bin /workspace/out.bin"])
    assert r.exit_code == 0, r
    out = sb.get_file("/workspace/out.bin")
    sb.destroy()
    assert out == data
    return time.monotonic() - t0


def as_task(client, data):
    t0 = time.monotonic()
    task_id = "bench-" + uuid.uuid4().hex[:16]
    task = client.run_task(task_id, ["sh", "-c", "cp /workspace/in.bin /workspace/out.bin"],
                           inputs={"/workspace/in.bin": data}, outputs=["/workspace/out.bin"],
                           snapshot="never", wait_timeout=120)
    assert task.ok, task
    out = client.task_output(task_id, 0)
    assert out == data
    return time.monotonic() - t0


def host_seconds(cmd):
    t0 = time.monotonic()
    subprocess.run(cmd, shell=True, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--snapshot-mib", type=int, default=100)
    ap.add_argument("--output-mib", type=int, default=256)
    args = ap.parse_args()
    client = corral.Client(args.url, timeout=300)
    data = os.urandom(MIB)
    result = {"bench": "tasks"}

    hand, task = [], []
    for i in range(2):  # warm-up
        by_hand(client, data)
        as_task(client, data)
    stages = ("create", "initialize", "execute", "collect", "destroy")
    before = {s: stage_sum(client, s) for s in stages}
    for i in range(args.rounds):
        pair = [(hand, by_hand), (task, as_task)]
        if i % 2:
            pair.reverse()
        for into, fn in pair:
            into.append(fn(client, data))
    h, t = statistics.median(hand), statistics.median(task)
    result.update(roundtrip_hand_p50_ms=round(h * 1000, 2), roundtrip_task_p50_ms=round(t * 1000, 2),
                  roundtrip_ratio=round(t / h, 3))
    print(f"round trip (1 MiB in, 1 MiB out), {args.rounds} rounds: by hand p50 {h*1000:.1f} ms, "
          f"task p50 {t*1000:.1f} ms, ratio {t/h:.2f} (target <= 1.2)")
    # Where a task's time goes: the mean of each stage over the rounds, from
    # the daemon's histogram; the rest of the task's time is its submit, its
    # end and the wait's answer, and the download.
    means = {}
    for s in stages:
        total, count = stage_sum(client, s)
        if count > before[s][1]:
            means[s] = round((total - before[s][0]) / (count - before[s][1]) * 1000, 2)
    result.update(roundtrip_task_stage_mean_ms=means)
    print("  task stages, mean ms: " + ", ".join(f"{k} {v}" for k, v in means.items()))

    with tempfile.TemporaryDirectory() as tmp:
        # Snapshot of N MiB of incompressible bytes.
        n = args.snapshot_mib
        before = stage_sum(client, "snapshot")
        sid = "bench-snap-" + uuid.uuid4().hex[:12]
        disk = f"{n * 2 + 64}Mi"
        snap = client.run_task(sid, ["sh", "-c", f"head -c {n}M /dev/urandom > /workspace/big"],
                               sandbox={"limits": {"disk": disk}}, snapshot="always",
                               wait_timeout=600)
        after = stage_sum(client, "snapshot")
        secs = after[0] - before[0]
        with open(os.path.join(tmp, "big"), "wb") as f:
            f.write(os.urandom(n * MIB))
        base = host_seconds(f"tar -C {tmp} -cf - big | zstd -1 -q -T1 > {tmp}/big.tar.zst")
        os.unlink(os.path.join(tmp, "big.tar.zst"))
        rate = n * MIB / secs / 1e6 if secs > 0 else float("nan")
        base_rate = n * MIB / base / 1e6
        result.update(snapshot_mib=n, snapshot_s=round(secs, 3), snapshot_mb_s=round(rate, 1),
                      snapshot_host_tar_zstd_mb_s=round(base_rate, 1), snapshot_id=snap.snapshot_id)
        print(f"snapshot of {n} MiB: {secs:.2f} s = {rate:.0f} MB/s (target >= 200); "
              f"host tar|zstd -1: {base_rate:.0f} MB/s; ratio {rate / base_rate:.2f}")

        # Output collection of M MiB.
        m = args.output_mib
        before = stage_sum(client, "collect")
        oid = "bench-out-" + uuid.uuid4().hex[:12]
        out = client.run_task(oid, ["sh", "-c", f"head -c {m}M /dev/urandom > /workspace/big"],
                              sandbox={"limits": {"disk": f"{m + 64}Mi"}},
                              outputs=[{"path": "/workspace/big", "max_size": f"{m}Mi"}],
                              snapshot="never", wait_timeout=600)
        after = stage_sum(client, "collect")
        assert out.ok, out
        secs = after[0] - before[0]
        with open(os.path.join(tmp, "out"), "wb") as f:
            f.write(os.urandom(m * MIB))
        base = host_seconds(f"sha256sum {tmp}/out && cp {tmp}/out {tmp}/out.copy && sync -f {tmp}/out.copy")
        rate = m * MIB / secs / 1e6 if secs > 0 else float("nan")
        base_rate = m * MIB / base / 1e6
        result.update(collect_mib=m, collect_s=round(secs, 3), collect_mb_s=round(rate, 1),
                      collect_host_sha256_cp_mb_s=round(base_rate, 1))
        print(f"output collection of {m} MiB: {secs:.2f} s = {rate:.0f} MB/s (target >= 500); "
              f"host sha256sum+cp: {base_rate:.0f} MB/s; ratio {rate / base_rate:.2f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
