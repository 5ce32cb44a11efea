#!/usr/bin/env python3
"""The layer check (ctest unit.layers; tests/README.md).

Fails when
  1. an `#include "X/..."` in src/ goes from layer A to a layer B that A may
     not use: B must be A itself or reachable from A along the edges of the
     layer table in docs/adr/0001-layout-and-process-model.md (read from
     there, so the ADR is the one table);
  2. CMakeLists.txt links a layer's library to other layers than the table
     lists for it (what holds for includes holds at link time too);
  3. a privileged call (raw syscall, mount, setns, unshare, pivot_root,
     fork, clone, exec) appears in a file of src/ that PRIVILEGED below does
     not list. Comments and string literals are not code: they are skipped.

No build needed: it reads the sources. Run it by hand with
`tests/layers/check_layers.py [SOURCE_DIR]`.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
ADR = ROOT / "docs/adr/0001-layout-and-process-model.md"

# Includes the table does not allow, allowed for now; each says who removes it.
KNOWN_EXCEPTIONS = {
    # None today. An entry is (file, included header): "why, and when it goes".
}

# Privileged calls, and the files allowed to make them: one reason each.
PRIVILEGED_CALLS = ("syscall", "mount", "umount", "umount2", "setns", "unshare", "pivot_root",
                    "fork", "vfork", "clone", "clone3", "execve", "execv", "execvp", "execvpe",
                    "fexecve")
PRIVILEGED = {
    "src/sys/syscalls.cc": "the raw syscall(2) wrappers glibc 2.36 lacks (clone3, pidfd_*, landlock_*, ...)",
    "src/sys/syscalls.h": "declares those wrappers (sys::pivot_root, sys::clone3)",
    "src/jail/init_clone.cc": "clone3 of the sandbox's init into its new namespaces",
    "src/jail/init_process.cc": "init unshares the cgroup namespace once it is in its cgroup",
    "src/jail/rootfs_setup.cc": "init builds the sandbox's root file system: mounts, pivot_root",
    "src/jail/workload.cc": "the workload joins the commands' user namespace and execs the command",
    "src/jail/zygote.cc": "the zygote clones and execs each command of a long-lived sandbox",
    "src/jail/running_mounts.cc": "a forked helper enters a running sandbox's mount namespace to "
                                  "attach a warm pool claim's mounts",
    "src/jail/command_userns.cc": "the zygote's helper that makes the commands' user namespace, and "
                                  "a probe that seccomp refuses setns",
    "src/jail/idmap_userns.cc": "a forked child unshares the user namespace of an idmapped mount",
    "src/jail/host_check.cc": "corral doctor: a forked child tries each namespace corral uses",
    "src/netns/netlink.cc": "setns into a sandbox's network namespace, on a short thread of its own",
    "src/daemon/claim_hostname.cc": "a thread made for it joins a running sandbox's UTS namespace "
                                    "to set a warm pool claim's host name, and ends",
    "src/base/subprocess.cc": "the one fork/exec runner for host tools: nft (no static "
                              "libnftables, ADR 0005), mmdebstrap, umoci",
    "src/image/staging_dir.cc": "detaches what a killed image tool left mounted in corral's own "
                                "partial tree",
    "src/runtime/sandbox_factory.cc": "forks the daemon's factory process before any thread exists",
    "src/secrets/secret_mount.cc": "mounts a sandbox's secrets tmpfs on the host and unmounts it",
    "src/volume/loop_mount.cc": "mounts a volume's loop-attached ext4 image on the host, binds a "
                                "checked sub-path by its fd for a create, and unmounts them",
}


def read_table():
    """{layer: set of layers it may use directly}, from the ADR's table."""
    edges = {}
    in_table = False
    for line in ADR.read_text().splitlines():
        if line.startswith("| layer |"):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        if not in_table or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`src/([a-z0-9_]+)`", cells[0])
        if not m:
            sys.exit(f"{ADR}: cannot read the layer cell {cells[0]!r}")
        edges[m.group(1)] = set(re.findall(r"`([a-z0-9_]+)`", cells[-1]))
    for layer, deps in edges.items():
        for d in deps - set(edges):
            sys.exit(f"{ADR}: layer {layer} depends on `{d}`, which is not a layer of the table")
    return edges


def closure(edges):
    reach = {}
    for layer in edges:
        seen, todo = {layer}, [layer]
        while todo:
            for d in edges[todo.pop()]:
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        reach[layer] = seen
    return reach


def strip_comments_and_strings(text):
    """The code only: comments and string/char literals become spaces
    (newlines kept, so line numbers hold)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            delim = text[i + 2:text.find("(", i)]
            j = text.find(")" + delim + '"', i)
            j = n if j < 0 else j + len(delim) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            # (a ' after a digit or letter is a digit separator: 1'000)
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n) if j < n and text[j] == c else j
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_includes(reach, failures):
    include = re.compile(r'^\s*#\s*include\s+"([a-z0-9_]+)/([^"]+)"', re.M)
    for (rel, header), who in sorted(KNOWN_EXCEPTIONS.items()):
        path = ROOT / rel
        if not path.exists() or f'#include "{header}"' not in path.read_text(errors="replace"):
            failures.append(f"{rel}: no longer includes \"{header}\" ({who}): take it off "
                            f"KNOWN_EXCEPTIONS")
    for path in sorted((ROOT / "src").rglob("*")):
        if path.suffix not in (".cc", ".h"):
            continue
        rel = path.relative_to(ROOT).as_posix()
        layer = path.relative_to(ROOT / "src").parts[0]
        if layer not in reach:
            failures.append(f"{rel}: directory src/{layer} is not a layer of the ADR 0001 table")
            continue
        text = path.read_text(errors="replace")
        for m in include.finditer(text):
            target = m.group(1)
            if target in reach[layer] or (rel, f"{target}/{m.group(2)}") in KNOWN_EXCEPTIONS:
                continue
            line = text.count("\n", 0, m.start()) + 1
            failures.append(f"{rel}:{line}: layer {layer} includes \"{target}/{m.group(2)}\", but "
                            f"{layer} may use only {', '.join(sorted(reach[layer]))}")


def check_links(edges, failures):
    cmake = (ROOT / "CMakeLists.txt").read_text()
    cmake = re.sub(r"#[^\n]*", "", cmake)
    seen = set()
    for m in re.finditer(r"corral_(?:optional_)?layer\(\s*([a-z0-9_]+)([^)]*)\)", cmake):
        layer = m.group(1)
        if layer == "name":
            continue  # the function definitions
        seen.add(layer)
        linked = set(re.findall(r"\bcorral_([a-z0-9_]+)\b", m.group(2)))
        if layer not in edges:
            failures.append(f"CMakeLists.txt: layer {layer} is not in the ADR 0001 table")
        elif linked != edges[layer]:
            failures.append(f"CMakeLists.txt: corral_{layer} links {sorted(linked)}, the ADR 0001 "
                            f"table says {sorted(edges[layer])}")
    for layer in sorted(set(edges) - seen - {"cli"}):
        failures.append(f"CMakeLists.txt: no library for layer {layer} of the ADR 0001 table")


def check_privileged(failures):
    call = re.compile(r"(?<![\w.>])(?:::)?(" + "|".join(PRIVILEGED_CALLS) + r")\s*\(")
    for path in sorted((ROOT / "src").rglob("*")):
        if path.suffix not in (".cc", ".h"):
            continue
        rel = path.relative_to(ROOT).as_posix()
        code = strip_comments_and_strings(path.read_text(errors="replace"))
        if rel in PRIVILEGED:
            if not call.search(code):
                failures.append(f"{rel}: in the privileged allow-list, but makes no privileged "
                                f"call: take it off the list")
            continue
        for m in call.finditer(code):
            line = code.count("\n", 0, m.start()) + 1
            failures.append(f"{rel}:{line}: privileged call {m.group(1)}() outside the allow-list "
                            f"(tests/layers/check_layers.py, PRIVILEGED)")
    for rel in sorted(PRIVILEGED):
        if not (ROOT / rel).exists():
            failures.append(f"{rel}: in the privileged allow-list, but there is no such file")


def main():
    edges = read_table()
    failures = []
    check_includes(closure(edges), failures)
    check_links(edges, failures)
    check_privileged(failures)
    for f in failures:
        print(f)
    if failures:
        print(f"layer check: {len(failures)} problem(s)")
        return 1
    print(f"layer check: {len(edges)} layers; includes, links and privileged calls as the table says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
