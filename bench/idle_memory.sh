#!/usr/bin/env bash
# Idle memory per open sandbox: start N sandboxes that each run `sleep`,
# wait until every one is up, measure, stop them all; first with corral,
# then with bwrap as the baseline. See bench/README.md.
#
# Measurements per tool, all in KiB per sandbox:
#  - PSS: the sum of Pss (/proc/PID/smaps_rollup) of every process of the
#    sandboxes (launcher, the sandbox's init, sleep), divided by N. User
#    memory only, shared pages split fairly between their users.
#  - meminfo: the system-wide change of MemTotal - MemAvailable, divided by
#    N, once when the sandboxes start (rise) and once when they have stopped
#    (drop). Includes kernel memory (namespaces, mounts, page tables,
#    cgroups, tmpfs), but also whatever else the machine did meanwhile: when
#    rise and drop disagree much, the machine was busy and the figure is
#    noise.
#  - kernel: the same rise, of SUnreclaim + KernelStack + PageTables +
#    Percpu only: the kernel objects a sandbox pins (slab for namespaces,
#    mounts, cgroups, tasks; stacks; page tables; per-cpu counters). Much
#    less disturbed by other activity (compilers, page cache) than the
#    MemAvailable figure.
#  - PSS + kernel: the best single estimate of what one more idle sandbox
#    costs.
#
# Usage: bench/idle_memory.sh   (as root)
# Environment: BUILD (default: build, relative to the repository), CORRAL
# (default: $BUILD/corral), N (default 100), SLEEP_SECS (default 60),
# TOOLS (default "corral bwrap").
# The last line of stdout is one JSON object with every figure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$repo/$BUILD"
CORRAL=${CORRAL:-$BUILD/corral}
N=${N:-100}
SLEEP_SECS=${SLEEP_SECS:-60}
TOOLS=${TOOLS:-corral bwrap}
UP_TIMEOUT=$((SLEEP_SECS * 3 / 4))  # all up well before the first sleep ends
SLEEP_BIN=$(command -v sleep)

roots=()  # launcher pids of the current set

# "PID COMM" of the given pids and all their descendants, from one snapshot.
tree() {
  (($# > 0)) || return 0
  ps -e -o pid=,ppid=,comm= | awk -v roots="$*" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { pid[NR] = $1; ppid[NR] = $2; comm[NR] = $3 }
    END {
      do {
        changed = 0
        for (i = 1; i <= NR; i++)
          if (!(pid[i] in keep) && (ppid[i] in keep)) { keep[pid[i]] = 1; changed = 1 }
      } while (changed)
      for (i = 1; i <= NR; i++) if (pid[i] in keep) print pid[i], comm[i]
    }'
}

# Stops the current set: SIGTERM to the launchers (they kill their
# sandboxes and clean up), then SIGKILL to whatever is left after 20 s.
stop_set() {
  ((${#roots[@]} > 0)) || return 0
  kill -TERM "${roots[@]}" 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  while ((SECONDS < deadline)) && [[ -n $(tree "${roots[@]}") ]]; do sleep 0.1; done
  local left
  left=$(tree "${roots[@]}" | awk '{print $1}')
  if [[ -n $left ]]; then
    echo "warning: $(wc -w <<<"$left") process(es) still there 20 s after SIGTERM; SIGKILL" >&2
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null || true
  fi
  wait "${roots[@]}" 2>/dev/null || true
  roots=()
}

cleanup() {
  trap - EXIT INT TERM
  stop_set
}
trap cleanup EXIT
trap 'echo "interrupted; stopping the sandboxes" >&2; exit 130' INT TERM

# "USED KERNEL" in KiB: MemTotal - MemAvailable, and the pinned kernel memory.
mem_kib() {
  awk '/^MemTotal:/ {t = $2} /^MemAvailable:/ {a = $2}
       /^(SUnreclaim|KernelStack|PageTables|Percpu):/ {k += $2}
       END {print t - a, k}' /proc/meminfo
}

# The median of three samples 0.3 s apart: less sensitive to a passing spike.
mem_kib_settled() {
  local a b c
  a=$(mem_kib); sleep 0.3; b=$(mem_kib); sleep 0.3; c=$(mem_kib)
  paste -d' ' <(printf '%s\n' "${a% *}" "${b% *}" "${c% *}" | sort -n | sed -n 2p) \
    <(printf '%s\n' "${a#* }" "${b#* }" "${c#* }" | sort -n | sed -n 2p)
}

# Network namespaces in the kernel, dead ones not yet freed included.
netns_count() {
  awk '$1 == "net_namespace" {n = $2} END {print n + 0}' /proc/slabinfo 2>/dev/null || echo 0
}

pss_kib() {  # "PID PSS" for each of the given pids still alive
  local p
  for p in "$@"; do
    awk -v p="$p" '/^Pss:/ {print p, $2}' "/proc/$p/smaps_rollup" 2>/dev/null || true
  done
}

bwrap_cmd() {
  local cmd=(bwrap --unshare-all --die-with-parent --ro-bind /usr /usr)
  local d t
  for d in /bin /sbin /lib /lib32 /lib64 /libx32; do
    if [[ -L $d ]]; then
      t=$(readlink "$d")
      cmd+=(--symlink "$t" "$d")
    elif [[ -d $d ]]; then
      cmd+=(--ro-bind "$d" "$d")
    fi
  done
  cmd+=(--proc /proc --dev /dev --tmpfs /tmp)
  printf '%s\n' "${cmd[@]}"
}

declare -A result

measure() {
  local tool=$1
  local -a cmd
  case $tool in
    corral)
      if [[ ! -x $CORRAL ]]; then
        echo "skipping corral: $CORRAL is not executable (ninja -C build corral)"
        return 0
      fi
      cmd=("$CORRAL" run --)
      ;;
    bwrap)
      if ! command -v bwrap >/dev/null; then
        echo "skipping bwrap: not installed (scripts/install-deps installs it)"
        return 0
      fi
      mapfile -t cmd < <(bwrap_cmd)
      ;;
    *) echo "unknown tool $tool" >&2; return 1 ;;
  esac
  cmd+=("$SLEEP_BIN" "$SLEEP_SECS")

  # One first, alone: does it work here at all?
  if ! "${cmd[@]:0:${#cmd[@]}-2}" /bin/true </dev/null >/dev/null 2>&1; then
    echo "skipping $tool: \`${cmd[*]:0:${#cmd[@]}-2} /bin/true\` fails here"
    return 0
  fi

  local before after stopped t0 up_s netns_before
  netns_before=$(netns_count)
  before=$(mem_kib_settled)
  t0=$(date +%s.%N)
  local i
  for ((i = 0; i < N; i++)); do
    "${cmd[@]}" </dev/null >/dev/null 2>&1 &
    roots+=($!)
  done
  # Up when every launcher has a `sleep` below it.
  local sleeping=0
  local deadline=$((SECONDS + UP_TIMEOUT))
  while :; do
    sleeping=$(tree "${roots[@]}" | awk '$2 == "sleep"' | wc -l)
    ((sleeping >= N)) && break
    if ((SECONDS >= deadline)); then
      echo "$tool: only $sleeping of $N sandboxes up after ${UP_TIMEOUT}s; giving up" >&2
      stop_set
      return 1
    fi
    sleep 0.1
  done
  up_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
  sleep 1  # let the launchers finish their set-up work
  after=$(mem_kib_settled)
  local snapshot pids procs pss_by_pid pss roles
  snapshot=$(tree "${roots[@]}")
  mapfile -t pids < <(awk '{print $1}' <<<"$snapshot")
  procs=${#pids[@]}
  pss_by_pid=$(pss_kib "${pids[@]}")
  pss=$(awk '{s += $2} END {print s + 0}' <<<"$pss_by_pid")
  # PSS by role: the launcher (what we started), the command (sleep), and
  # whatever is between them (the sandbox's init).
  roles=$(awk -v roots="${roots[*]}" -v snap="$snapshot" -v n="$N" '
      BEGIN {
        k = split(roots, r, " "); for (i = 1; i <= k; i++) root[r[i]] = 1
        m = split(snap, lines, "\n")
        for (i = 1; i <= m; i++) { split(lines[i], f, " "); comm[f[1]] = f[2] }
      }
      { role = ($1 in root) ? "launcher" : (comm[$1] == "sleep" ? "command" : "init")
        sum[role] += $2 }
      END { printf "launcher %d, init %d, command %d", sum["launcher"] / n, sum["init"] / n,
            sum["command"] / n }' <<<"$pss_by_pid")
  local per_comm
  per_comm=$(awk '{c[$2]++} END {for (k in c) printf "%s%s x%d", (n++ ? ", " : ""), k, c[k]}' \
    <<<"$snapshot")

  stop_set
  # The kernel frees namespaces asynchronously (cleanup_net): wait until
  # the network namespaces are back to where they were, at most 15 s.
  local settle_deadline=$((SECONDS + 15))
  while (($(netns_count) > netns_before)) && ((SECONDS < settle_deadline)); do sleep 0.2; done
  stopped=$(mem_kib_settled)

  result[$tool.up_s]=$up_s
  result[$tool.procs]=$procs
  result[$tool.pss]=$((pss / N))
  result[$tool.rise]=$(((${after% *} - ${before% *}) / N))
  result[$tool.drop]=$(((${after% *} - ${stopped% *}) / N))
  result[$tool.kernel]=$(((${after#* } - ${before#* }) / N))
  result[$tool.kernel_drop]=$(((${after#* } - ${stopped#* }) / N))
  result[$tool.total]=$((result[$tool.pss] + result[$tool.kernel]))
  echo "$tool: $N up in ${up_s}s; processes: $per_comm; PSS KiB per sandbox: $roles"
}

ran=()
echo "idle memory: $N sandboxes each running \`sleep $SLEEP_SECS\`, per tool in turn"
for tool in $TOOLS; do
  measure "$tool"
  [[ -n ${result[$tool.pss]:-} ]] && ran+=("$tool")
done

echo
printf '%-8s %6s %7s | %8s %12s %14s | %13s %13s | %12s\n' tool procs up_s PSS \
  "kernel rise" "PSS + kernel" "meminfo rise" "meminfo drop" "kernel drop"
for tool in "${ran[@]}"; do
  printf '%-8s %6s %7s | %8s %12s %14s | %13s %13s | %12s\n' "$tool" "${result[$tool.procs]}" \
    "${result[$tool.up_s]}" "${result[$tool.pss]}" "${result[$tool.kernel]}" \
    "${result[$tool.total]}" "${result[$tool.rise]}" "${result[$tool.drop]}" \
    "${result[$tool.kernel_drop]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else print "n/a" }'; }
if [[ -n ${result[corral.pss]:-} && -n ${result[bwrap.pss]:-} ]]; then
  echo
  echo "corral / bwrap: PSS + kernel $(ratio "${result[corral.total]}" "${result[bwrap.total]}"),"  \
    "PSS $(ratio "${result[corral.pss]}" "${result[bwrap.pss]}")," \
    "meminfo rise $(ratio "${result[corral.rise]}" "${result[bwrap.rise]}")," \
    "meminfo drop $(ratio "${result[corral.drop]}" "${result[bwrap.drop]}")," \
    "kernel rise $(ratio "${result[corral.kernel]}" "${result[bwrap.kernel]}")"
fi
echo "KiB per sandbox; procs = all processes of the $N sandboxes; load average now:" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
echo

json="{\"bench\":\"idle_memory\",\"sandboxes\":$N,\"tools\":{"
sep=""
for tool in "${ran[@]}"; do
  json+="$sep\"$tool\":{\"up_s\":${result[$tool.up_s]},\"processes\":${result[$tool.procs]},"
  json+="\"pss_kib_per_sandbox\":${result[$tool.pss]},"
  json+="\"pss_plus_kernel_kib_per_sandbox\":${result[$tool.total]},"
  json+="\"meminfo_rise_kib_per_sandbox\":${result[$tool.rise]},"
  json+="\"meminfo_drop_kib_per_sandbox\":${result[$tool.drop]},"
  json+="\"kernel_rise_kib_per_sandbox\":${result[$tool.kernel]},"
  json+="\"kernel_drop_kib_per_sandbox\":${result[$tool.kernel_drop]}}"
  sep=","
done
json+="}}"
echo "$json"
