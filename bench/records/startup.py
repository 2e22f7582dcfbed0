#!/usr/bin/env python3
"""Start-up CPU time of runtimes side by side (#18, BENCHMARKS.md "The
runtime's records"): the 100,000-function program of bench/run.sh doing
nothing, with each runtime preloaded and with the first one disabled
(FNTRACE_DISABLE=1, the baseline); user + sys of the child from wait4,
the configurations taking turns.

  bench/records/startup.py NAME=libfntrace_runtime.so ... [--runs N]
"""
import os, statistics, sys

PROG = os.path.join(os.path.dirname(__file__), '..', 'out', 'run', '100k', 'gcc-pfe', 'prog')
args = [a for a in sys.argv[1:] if '=' in a]
runs = int(sys.argv[sys.argv.index('--runs') + 1]) if '--runs' in sys.argv else 21
if not args or not os.path.exists(PROG):
    sys.exit(f"usage: {sys.argv[0]} NAME=RUNTIME.so ... (needs {PROG}: run bench/run.sh first)")
libs = dict(a.split('=', 1) for a in args)
configs = [(name, lib, False) for name, lib in libs.items()] + [('disabled', args[0].split('=', 1)[1], True)]
res = {name: [] for name, _, _ in configs}
for _ in range(runs):
    for name, lib, disabled in configs:
        env = dict(os.environ, LD_PRELOAD=lib)
        if disabled:
            env['FNTRACE_DISABLE'] = '1'
        pid = os.fork()
        if pid == 0:
            fd = os.open('/dev/null', os.O_WRONLY)
            os.dup2(fd, 1)
            os.execve(PROG, [PROG], env)
        _, _, ru = os.wait4(pid, 0)
        res[name].append((ru.ru_utime + ru.ru_stime) * 1000)
base = statistics.median(res['disabled'])
for name, times in res.items():
    m = statistics.median(times)
    print(f"{name}: CPU ms median {m:.1f} (min {min(times):.1f}, max {max(times):.1f})"
          + ("" if name == 'disabled' else f", minus disabled {m - base:.1f}"))
