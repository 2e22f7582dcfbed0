#!/usr/bin/env python3
"""Patching throughput of runtimes side by side (#18, BENCHMARKS.md "The
runtime's records"): each runtime preloaded into the 100,000-function
program of bench/run.sh, which times fntrace_ops_register / _unregister on
every site itself (`prog patch 10`); the runtimes take turns, ROUNDS
processes each, the first round of each process dropped.

  bench/records/patch.py NAME=libfntrace_runtime.so ... [--rounds N]
"""
import os, statistics, subprocess, sys

PROG = os.path.join(os.path.dirname(__file__), '..', 'out', 'run', '100k', 'gcc-pfe', 'prog')
args = [a for a in sys.argv[1:] if '=' in a]
rounds = int(sys.argv[sys.argv.index('--rounds') + 1]) if '--rounds' in sys.argv else 4
if not args or not os.path.exists(PROG):
    sys.exit(f"usage: {sys.argv[0]} NAME=RUNTIME.so ... (needs {PROG}: run bench/run.sh first)")
res = {name: ([], []) for name, _ in (a.split('=', 1) for a in args)}
libs = dict(a.split('=', 1) for a in args)
for _ in range(rounds):
    for name, lib in libs.items():
        env = dict(os.environ, LD_PRELOAD=lib)
        out = subprocess.run([PROG, 'patch', '10'], env=env, capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if f and f[0] == 'run' and f[1] != '0':
                res[name][0].append(float(f[2]))
                res[name][1].append(float(f[3]))
for name, (reg, unreg) in res.items():
    print(f"{name}: register ms median {statistics.median(reg):.2f} min {min(reg):.2f} | "
          f"unregister median {statistics.median(unreg):.2f} min {min(unreg):.2f} (n={len(reg)})")
