#!/usr/bin/env python3
"""Where does one `corral run -- /bin/true` spend its wall time?

Runs it N times under `perf trace` (only a dozen syscalls are traced, so the
overhead stays small), finds the landmarks of each phase in the trace (the
cgroup mkdirs, clone3, init's writes to its cgroup's tasks files, the
"joined" and "go" messages, the user
namespace clone, pivot_root, umount2, landlock_restrict_self, the execve of
/bin/true, the exits, the rmdirs) and prints the median,
p10 and p90 of every phase. Not part of `make bench`; needs root, perf
(Debian: linux-perf) and python3. The landmarks follow the launcher's
current syscall sequence: when that changes, adjust `phases()` below.

Usage: bench/phases.py [--runs N] [--corral PATH] [--keep DIR]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

TRACED = ("clone3,clone,execve,write,sendto,sendmsg,recvfrom,pivot_root,umount2,"
          "landlock_restrict_self,exit_group,rmdir,mkdir")

LINE = re.compile(r"\s*([\d.]+|\?) \(\s*([\d.]*)\s*(?:ms)?\): (\S+)/(\d+)\s+(.*)$")


def parse(path):
    """Events of one `perf trace` output: dicts with t (ms), d (ms or None),
    pid, name, ret, cont (a '[continued]' line), raw."""
    events = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            rest = m.group(5)
            name = re.search(r"(?:\[continued\]: )?(\w+)\(", rest)
            ret = None
            if "=" in rest and not rest.rstrip().endswith("..."):
                ret = rest.rsplit("=", 1)[1].strip()
            events.append(dict(
                t=None if m.group(1) == "?" else float(m.group(1)),
                d=float(m.group(2)) if m.group(2) else None,
                pid=int(m.group(4)), name=name.group(1) if name else "?",
                ret=ret, cont="[continued]" in rest, raw=rest))
    return events


def phases(ev):
    """(name, ms) for every phase of one traced run."""
    calls = [e for e in ev if e["t"] is not None and not e["cont"]]

    def end(e):  # an interrupted call ends where its '[continued]' line says
        if e["d"] is not None:
            return e["t"] + e["d"]
        for x in ev:
            if x["pid"] == e["pid"] and x["cont"] and x["t"] == e["t"] and x["d"] is not None:
                return x["t"] + x["d"]
        return e["t"]

    def first(pid, pred, after=-1.0):
        return next(e for e in calls if e["pid"] == pid and e["t"] >= after and pred(e))

    def last(pid, pred):
        return [e for e in calls if e["pid"] == pid and pred(e)][-1]

    launcher = next(e["pid"] for e in ev if e["t"] is not None)
    mk1 = first(launcher, lambda e: e["name"] == "mkdir")
    etc = last(launcher, lambda e: e["name"] == "write" and "count: 79" in e["raw"])  # /etc/hosts
    cg = first(launcher, lambda e: e["name"] == "mkdir" and e["ret"] == "0")
    c3 = first(launcher, lambda e: e["name"] == "clone3")
    init = int(next(re.search(r"= (\d+)", x["raw"]).group(1) for x in ev
                    if x["pid"] == launcher and x["name"] == "clone3" and x["ret"]))
    join = first(init, lambda e: e["name"] == "write")  # "0" to the first tasks file
    joined = first(init, lambda e: e["name"] == "sendto")  # kJoined
    go = first(launcher, lambda e: e["name"] == "sendmsg")
    userns = first(init, lambda e: e["name"] == "clone")
    pivot = first(init, lambda e: e["name"] == "pivot_root")
    umount = first(init, lambda e: e["name"] == "umount2")
    workload = next(x["pid"] for x in ev if x["pid"] not in (launcher, init))
    ll = first(workload, lambda e: e["name"] == "landlock_restrict_self")
    exe = first(workload, lambda e: e["name"] == "execve")
    texit = first(workload, lambda e: e["name"] == "exit_group")
    iexit = first(init, lambda e: e["name"] == "exit_group")
    # The freezer is written only if processes are left (none normally).
    rm1 = first(launcher, lambda e: e["name"] == "rmdir", iexit["t"])
    rmdir = last(launcher, lambda e: e["name"] == "rmdir")
    lexit = first(launcher, lambda e: e["name"] == "exit_group")
    return [
        ("launcher start: exec, ld.so, C++ init (to first mkdir)", mk1["t"]),
        ("plan: uid slot, host base, writable layer tmpfs + /etc files", etc["t"] - mk1["t"]),
        ("plan: seccomp program (cached), stage dir, lock, stale-cgroup scan, cgroup detect",
         cg["t"] - etc["t"]),
        ("cgroups: mkdir x5 + limits", c3["t"] - cg["t"]),
        ("clone3: new mnt, pid, net, ipc, uts namespaces", end(c3) - c3["t"]),
        ("init: first steps after clone3, up to its cgroup join", join["t"] - end(c3)),
        ("init: joins its cgroup (v1: \"0\" to 5 tasks files), says so", end(joined) - join["t"]),
        ("launcher: hears the join, sends go", go["t"] - end(joined)),
        ("init: go -> clone(user ns) (cgroup ns, stage mount, /proc)", userns["t"] - go["t"]),
        ("init: id maps, overlay root, /dev, /proc masks -> pivot_root",
         pivot["t"] - userns["t"]),
        ("init: umount2(old root, MNT_DETACH)", end(umount) - umount["t"]),
        ("workload: release, setsid, caps, rlimits, landlock rules", ll["t"] - end(umount)),
        ("workload: landlock + seccomp load -> execve", exe["t"] - ll["t"]),
        ("/bin/true: execve -> exit_group", texit["t"] - exe["t"]),
        ("init: reap workload, report -> exit_group", iexit["t"] - texit["t"]),
        ("init exit (pid/mnt ns teardown) + launcher wakeup, stats", rm1["t"] - iexit["t"]),
        ("teardown: cgroup rmdir x5", end(rmdir) - rm1["t"]),
        ("teardown: layer wipe, usage, mountinfo check, unlock", lexit["t"] - end(rmdir)),
        ("TOTAL (launcher exec -> launcher exit_group)", lexit["t"]),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--corral", default=os.path.join(os.path.dirname(here), "build", "corral"))
    ap.add_argument("--keep", help="keep the perf trace outputs in this directory")
    args = ap.parse_args()

    out_dir = args.keep or tempfile.mkdtemp(prefix="corral-phases-")
    os.makedirs(out_dir, exist_ok=True)
    results, order, bad = {}, [], 0
    for i in range(args.runs):
        path = os.path.join(out_dir, "run%03d.txt" % i)
        subprocess.run(["perf", "trace", "-f", "-e", TRACED, "-o", path, "--",
                        args.corral, "run", "--", "/bin/true"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        time.sleep(0.05)  # sporadic runs, as in real use
        try:
            for name, ms in phases(parse(path)):
                if name not in results:
                    results[name] = []
                    order.append(name)
                results[name].append(ms)
        except (StopIteration, IndexError, AttributeError, KeyError, OSError):
            bad += 1
        if not args.keep:
            os.unlink(path)
    if not args.keep:
        os.rmdir(out_dir)
    if not order:
        sys.exit("no run could be parsed (is perf installed? are we root?)")

    print("%d runs of `corral run -- /bin/true` under perf trace (%d unparsable); ms"
          % (len(results[order[0]]), bad))
    print("%8s %8s %8s  %s" % ("median", "p10", "p90", "phase"))
    for name in order:
        v = sorted(results[name])
        print("%8.3f %8.3f %8.3f  %s" % (statistics.median(v), v[len(v) // 10],
                                          v[min(len(v) - 1, len(v) * 9 // 10)], name))


if __name__ == "__main__":
    main()
