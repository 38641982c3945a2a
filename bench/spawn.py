"""Start one command; write its wall time, peak memory and exit code to a file.

The suite runs this with ``python -S -I`` between itself and every measured
command. Linux counts a child's memory from the moment it is forked, when it
still shares its parent's pages, so a command started straight from the
suite would be charged the suite's own memory; started from this small
launcher it is charged at most the launcher's (about 8 MiB, less than any
Python process it measures).

    python -S -I bench/spawn.py REPORT CWD COMMAND [ARG...]
"""

import os
import sys
import time


def main() -> None:
    """Run the command and write ``seconds maxrss_kib exit_code`` to REPORT."""
    report, cwd, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.chdir(cwd)
    started = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ)
    _, status, usage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - started
    line = f"{elapsed!r} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}\n"
    fd = os.open(report, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, line.encode())
    os.close(fd)


main()
