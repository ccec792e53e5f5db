"""Resource use of a process and all its descendants, from /proc (Linux).

usage: proctree.py cpu PID            prints the tree's CPU seconds (user + system, live processes
                                      plus the children they have reaped)
       proctree.py run OUT CMD...     runs CMD, then writes "cpu_s wall_s exit_code" of it and
                                      its children to OUT (for load generators)
       proctree.py rss PID OUT [S]    samples the tree's summed RSS every S seconds (default 0.5)
                                      until PID exits or this is killed; OUT gets "peak_mib last_mib
                                      samples", rewritten after every sample
"""
import os
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def children_map():
    kids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            kids.setdefault(int(fields[1]), []).append(int(entry))
        except OSError:
            pass
    return kids


def tree(pid):
    kids, out, todo = children_map(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _sum_over_tree(pid, read_one):
    """Sum of read_one(p) over the process tree of pid; a process that exits meanwhile counts 0."""
    total = 0
    for p in tree(pid):
        try:
            total += read_one(p)
        except OSError:
            pass
    return total


def _cpu_seconds_of(p):
    with open(f"/proc/{p}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime stime cutime cstime are fields 14-17 of stat (11-14 after the command)
    return sum(int(x) for x in fields[11:15]) / TICKS


def _rss_bytes_of(p):
    with open(f"/proc/{p}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def cpu_seconds(pid):
    return _sum_over_tree(pid, _cpu_seconds_of)


def rss_mib(pid):
    return _sum_over_tree(pid, _rss_bytes_of) / (1 << 20)


def main():
    if sys.argv[1] == "run":
        import resource
        import subprocess
        t0 = time.monotonic()
        code = subprocess.call(sys.argv[3:])
        wall = time.monotonic() - t0
        u = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(sys.argv[2], "w") as f:
            f.write(f"{u.ru_utime + u.ru_stime:.2f} {wall:.2f} {code}\n")
        return code
    mode, pid = sys.argv[1], int(sys.argv[2])
    if mode == "cpu":
        print(f"{cpu_seconds(pid):.2f}")
        return 0
    out, interval = sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 0.5
    peak, n = 0.0, 0
    while os.path.exists(f"/proc/{pid}"):
        last = rss_mib(pid)
        peak, n = max(peak, last), n + 1
        with open(out + ".tmp", "w") as f:
            f.write(f"{peak:.1f} {last:.1f} {n}\n")
        os.replace(out + ".tmp", out)
        time.sleep(interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
