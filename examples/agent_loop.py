#!/usr/bin/env python3
"""An agent-style loop on corral: tool calls run in a throwaway sandbox.

The "agent" here is a fixed plan (a real one would ask a model for the next
step): push an input file and a script, run the script, read what it wrote,
and stream a longer command's output live. Each tool call's observation is
printed, and the loop stops at the first failure. The sandbox is destroyed
at the end, whatever happens.

    /usr/bin/python3 examples/agent_loop.py                 # default socket
    /usr/bin/python3 examples/agent_loop.py --url http://127.0.0.1:7070 --api-key KEY
    CORRAL_URL=unix:/tmp/x/corral.sock /usr/bin/python3 examples/agent_loop.py
"""

import argparse
import json
import os
import sys

try:
    import corral
except ImportError:  # run from a checkout: use the SDK next door
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sdk", "python"))
    import corral

WORK = "/workspace/agent"

# The input the "agent" was given: one measurement per line.
INPUT = "\n".join(str((i * 37) % 101) for i in range(1, 201)) + "\n"

# The program the "agent" wrote to analyse it.
SCRIPT = '''\
import json, statistics, sys

values = [int(line) for line in open(sys.argv[1]) if line.strip()]
result = {
    "count": len(values),
    "sum": sum(values),
    "mean": statistics.mean(values),
    "median": statistics.median(values),
    "stdev": round(statistics.pstdev(values), 3),
    "max": max(values),
}
with open(sys.argv[2], "w") as f:
    json.dump(result, f, indent=2)
print(f"analysed {len(values)} values")
'''

# A longer task whose output should be seen as it happens.
LONG_TASK = 'for i in 1 2 3 4 5; do echo "step $i/5: working"; sleep 0.5; done; echo "all done" >&2'


def plan():
    """The tool calls, in order: (tool name, arguments)."""
    return [
        ("mkdir", {"path": WORK}),
        ("write_file", {"path": f"{WORK}/input.txt", "data": INPUT}),
        ("write_file", {"path": f"{WORK}/analyse.py", "data": SCRIPT}),
        ("run", {"cmd": ["python3", f"{WORK}/analyse.py", f"{WORK}/input.txt", f"{WORK}/result.json"]}),
        ("list", {"path": WORK}),
        ("read_file", {"path": f"{WORK}/result.json"}),
        ("stream", {"cmd": LONG_TASK}),
    ]


def call_tool(sb, tool, args):
    """Runs one tool call; returns (ok, observation)."""
    if tool == "mkdir":
        sb.mkdir(args["path"], parents=True)
        return True, f"created {args['path']}"
    if tool == "write_file":
        r = sb.put_file(args["path"], args["data"])
        return True, f"wrote {r['bytes']} bytes to {r['path']}"
    if tool == "run":
        r = sb.exec(args["cmd"], timeout=60)
        text = (r.stdout + r.stderr).decode("utf-8", "replace").strip()
        return r.ok, f"exit {r.exit_code}: {text}"
    if tool == "list":
        entries = sb.list_files(args["path"])
        return True, ", ".join(f"{e.name} ({e.size} B)" for e in entries)
    if tool == "read_file":
        data = sb.get_file(args["path"])
        return True, data.decode("utf-8")
    if tool == "stream":
        result = None
        for kind, data in sb.exec_stream(args["cmd"], timeout=60):
            if kind == "exit":
                result = data
                continue
            out = sys.stdout if kind == "stdout" else sys.stderr
            for line in data.decode("utf-8", "replace").splitlines(keepends=True):
                out.write("    | " + line)
            out.flush()
        return result is not None and result.ok, f"exit {result.exit_code if result else '?'}"
    raise ValueError(f"unknown tool {tool}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="daemon URL (default: $CORRAL_URL or the default socket)")
    parser.add_argument("--api-key", help="API key for http:// URLs (default: $CORRAL_API_KEY)")
    args = parser.parse_args()

    client = corral.Client(args.url, api_key=args.api_key)
    result = None
    try:
        with client.create(memory="256Mi", max_lifetime=300) as sb:
            print(f"sandbox {sb.id} is up")
            for step, (tool, tool_args) in enumerate(plan(), 1):
                print(f"[{step}] {tool} {json.dumps({k: v for k, v in tool_args.items() if k != 'data'})}")
                sys.stdout.flush()
                ok, observation = call_tool(sb, tool, tool_args)
                print(f"    -> {observation}")
                if tool == "read_file":
                    result = json.loads(observation)
                if not ok:
                    print("step failed; stopping", file=sys.stderr)
                    return 1
        print(f"sandbox {sb.id} destroyed")
    except corral.CorralError as e:
        print(f"corral: {e}", file=sys.stderr)
        return 2
    print("result: " + ", ".join(f"{k}={v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
