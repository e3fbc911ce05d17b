"""Two "machines" on one Linux host: two network namespaces joined by a veth pair, each end's
egress shaped by a tbf qdisc (bench/machines.py; needs root, `ip` and `tc` from iproute2).

    with TwoMachines() as pair:          # namespaces and the veth pair exist from here
        pair.shape("1gbit")              # both ends limited to 1 Gbit/s
        argv = pair.exec_argv(0, ["python3", "-c", "..."])   # runs in machine 0

Everything is removed again on leaving the `with` block, on exit (atexit), and on SIGINT,
SIGTERM and SIGHUP once install_signal_handlers() was called (they raise SystemExit, so
`finally` blocks run). Only SIGKILL can leave a pair behind; the names carry the creating
process's id, and remove_stale() (run by every new pair) removes pairs whose creator is gone.

Shaping: `tc qdisc replace dev <veth> root tbf rate R burst B latency L` on both ends, so each
direction carries at most R. The burst B is what an idle link may send at once at veth speed
(the token bucket fills while the link is idle, e.g. during a forward/backward pass), so it is
a bias in favour of bursty traffic and is kept small: one millisecond of the rate, at least
64 KiB (larger than one GSO packet's 64 KB, which tbf would otherwise have to split):
125 kB at 1 Gbit/s, 1.25 MB at 10 Gbit/s. The old rule "burst >= rate/HZ" is for tbf on
jiffy timers; tbf's watchdog runs on high-resolution timers (CONFIG_HIGH_RES_TIMERS). The
latency L (default 10 ms) bounds the queue: tbf drops what would wait longer than L.
"""
import atexit
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time

PREFIX = "accelbm"  # namespace names: accelbm<pid>x<n>-0 / -1; veth names: abm<pid>x<n>a / b
_LIVE = []  # pairs not yet torn down, for atexit and the signal handlers
_COUNTER = itertools.count()
_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12,
          "kibit": 2**10, "mibit": 2**20, "gibit": 2**30, "tibit": 2**40}


def parse_rate(text):
    """'1gbit' -> 1e9 (bits per second). tc's bit units only: tc's 'bps' means bytes/s."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"bandwidth {text!r}: expected a number and one of "
                         f"{', '.join(_UNITS)} (e.g. 1gbit)")
    bits = int(round(float(m.group(1)) * _UNITS[m.group(2)]))
    if bits < 8000:
        raise ValueError(f"bandwidth {text!r} is below 8 kbit/s")
    return bits


def format_rate(bits):
    for unit, scale in (("Gbit/s", 10**9), ("Mbit/s", 10**6), ("kbit/s", 10**3)):
        if bits >= scale:
            return f"{bits / scale:g} {unit}"
    return f"{bits} bit/s"


def default_burst(bits):
    """Bytes: one millisecond of the rate, at least 64 KiB (see the module's docstring)."""
    return max(64 * 1024, bits // 8 // 1000)


def _run(argv, check=True):
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()}")
    return done


def namespaces():
    """Names of the network namespaces that `ip netns` knows."""
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_processes_in(ns):
    """Kills what still runs in namespace `ns` (only ever one of ours: the names are ours),
    by process id: SIGTERM, a grace period, then SIGKILL."""
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 1.0)):
        pids = [int(p) for p in _run(["ip", "netns", "pids", ns], check=False).stdout.split()]
        pids = [p for p in pids if p != os.getpid()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + grace
        while time.time() < deadline:
            if not _run(["ip", "netns", "pids", ns], check=False).stdout.split():
                return
            time.sleep(0.1)


def remove_stale():
    """Removes pairs left by a creator that no longer runs (it was SIGKILLed)."""
    removed = []
    for ns in namespaces():
        m = re.fullmatch(PREFIX + r"(\d+)x\d+-[01]", ns)
        if not m:
            continue
        pid = int(m.group(1))
        try:
            os.kill(pid, 0)
            continue  # its creator still runs: not ours to remove
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        _kill_processes_in(ns)
        _run(["ip", "netns", "del", ns], check=False)
        removed.append(ns)
    return removed


class TwoMachines:
    """Two network namespaces ("machines" 0 and 1) joined by a veth pair: addresses[0] on
    machine 0's end, addresses[1] on machine 1's, both in one /prefixlen subnet."""

    def __init__(self, addresses=("10.232.0.1", "10.232.0.2"), prefixlen=24):
        tag = f"{os.getpid()}x{next(_COUNTER)}"
        self.ns = (f"{PREFIX}{tag}-0", f"{PREFIX}{tag}-1")
        self.veth = (f"abm{tag}a", f"abm{tag}b")
        if max(len(v) for v in self.veth) > 15:  # IFNAMSIZ - 1
            raise RuntimeError(f"interface names too long: {self.veth}")
        self.addresses, self.prefixlen = tuple(addresses), prefixlen
        self.created = False
        self.shaping = None  # (rate bits/s, burst bytes, latency) once shaped

    # -- set-up and teardown ------------------------------------------------------------------
    def up(self):
        remove_stale()
        _LIVE.append(self)
        self.created = True  # from here on, down() has something to remove
        for ns in self.ns:
            _run(["ip", "netns", "add", ns])
        # Created in place, inside both namespaces at once: no veth is ever left in the host's
        # namespace, and deleting either namespace deletes the pair.
        _run(["ip", "link", "add", "name", self.veth[0], "netns", self.ns[0], "type", "veth",
              "peer", "name", self.veth[1], "netns", self.ns[1]])
        for i in (0, 1):
            _run(["ip", "-n", self.ns[i], "addr", "add",
                  f"{self.addresses[i]}/{self.prefixlen}", "dev", self.veth[i]])
            _run(["ip", "-n", self.ns[i], "link", "set", "lo", "up"])
            _run(["ip", "-n", self.ns[i], "link", "set", self.veth[i], "up"])
        return self

    def down(self):
        """Removes both namespaces (and with them the veth pair and the qdiscs), after ending
        what still runs in them. Safe to call twice."""
        if not self.created:
            return
        errors = []
        for ns in self.ns:
            try:
                if ns in namespaces():
                    _kill_processes_in(ns)
                    _run(["ip", "netns", "del", ns])
            except Exception as error:  # go on with the other one
                errors.append(str(error))
        self.created = False
        if self in _LIVE:
            _LIVE.remove(self)
        if errors:
            raise RuntimeError("teardown: " + "; ".join(errors))

    def __enter__(self):
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc):
        self.down()
        return False

    def leftovers(self):
        """What of this pair still exists anywhere (empty after down())."""
        left = [f"namespace {ns}" for ns in self.ns if ns in namespaces()]
        left += [f"/run/netns/{ns}" for ns in self.ns if os.path.exists(f"/run/netns/{ns}")]
        links = _run(["ip", "-o", "link", "show"]).stdout
        left += [f"interface {v} in the host's namespace" for v in self.veth
                 if re.search(rf"\b{re.escape(v)}[@:]", links)]
        return left

    # -- shaping ------------------------------------------------------------------------------
    def shape(self, rate, burst=None, latency="10ms"):
        """Limits both ends' egress to `rate` ('1gbit' or bits per second)."""
        bits = parse_rate(rate) if isinstance(rate, str) else int(rate)
        burst = default_burst(bits) if burst is None else int(burst)
        for i in (0, 1):
            _run(["tc", "-n", self.ns[i], "qdisc", "replace", "dev", self.veth[i], "root", "tbf",
                  "rate", f"{bits}bit", "burst", str(burst), "latency", latency])
        self.shaping = (bits, burst, latency)
        return self.shaping

    def qdisc(self, i):
        """The root qdisc of machine i's veth end as `tc -j -s qdisc show` reports it (rate and
        burst in bytes, statistics included), and the plain-text line."""
        entries = json.loads(_run(["tc", "-n", self.ns[i], "-j", "-s", "qdisc", "show", "dev",
                                   self.veth[i]]).stdout or "[]")
        roots = [e for e in entries if e.get("root")]
        text = _run(["tc", "-n", self.ns[i], "-s", "qdisc", "show", "dev",
                     self.veth[i]]).stdout.strip()
        return (roots[0] if roots else None), text

    def link_bytes(self, i):
        """(bytes sent, bytes received) by machine i's veth end so far."""
        out = _run(["ip", "-n", self.ns[i], "-s", "-j", "link", "show", self.veth[i]]).stdout
        stats = json.loads(out)[0]["stats64"]
        return stats["tx"]["bytes"], stats["rx"]["bytes"]

    # -- running things inside -----------------------------------------------------------------
    def exec_argv(self, i, argv, env=None):
        """argv that runs `argv` inside machine i, with `env` (a dict) added through env(1)."""
        extra = [f"{k}={v}" for k, v in (env or {}).items()]
        return ["ip", "netns", "exec", self.ns[i], "env", *extra, *argv]


def teardown_all():
    """Tears down every pair this process still has (atexit and the signal handlers)."""
    for pair in list(_LIVE):
        try:
            pair.down()
        except Exception as error:
            print(f"netns: {error}", flush=True)


def _on_signal(signum, frame):
    # Raising lets every `finally` and `with` block run; the pairs are removed there (and by
    # atexit as a backstop). A second signal during teardown is ignored.
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    if _LIVE:
        print(f"netns: stopped by signal {signum}: removing "
              + ", ".join(ns for pair in _LIVE for ns in pair.ns), file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


def install_signal_handlers():
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _on_signal)


atexit.register(teardown_all)


# A listener that takes one connection: an 8-byte length, that many bytes, then it answers with
# the 8-byte count it received. Printed "ready" once listening.
_LISTENER = r"""
import socket, struct, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
print("ready", flush=True)
s.settimeout(float(sys.argv[3]))
c, _ = s.accept()
c.settimeout(float(sys.argv[3]))
def exactly(n):
    data = bytearray()
    while len(data) < n:
        chunk = c.recv(min(1 << 20, n - len(data)))
        if not chunk:
            break
        data += chunk
    return bytes(data)
want = struct.unpack("!Q", exactly(8))[0]
got = 0
buf = bytearray(1 << 20)
while got < want:
    n = c.recv_into(buf, min(len(buf), want - got))
    if not n:
        break
    got += n
c.sendall(struct.pack("!Q", got))
c.close()
"""

_SENDER = r"""
import socket, struct, sys, time
n = int(sys.argv[3])
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[4]))
chunk = memoryview(bytearray(1 << 20))
start = time.perf_counter()
s.sendall(struct.pack("!Q", n))
left = n
while left:
    left -= s.send(chunk[:min(left, len(chunk))])
got = struct.unpack("!Q", s.recv(8))[0]
print(got, time.perf_counter() - start, flush=True)
"""


def transfer(pair, sender, nbytes, port=47811, timeout=30.0, python="python3"):
    """Connects over TCP from machine `sender` to a listener on the other machine's address and
    sends `nbytes`; returns (bytes the listener received, seconds). Raises on any failure."""
    receiver = 1 - sender
    listener = subprocess.Popen(
        pair.exec_argv(receiver, [python, "-c", _LISTENER, pair.addresses[receiver], str(port),
                                  str(timeout)]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = listener.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"listener in {pair.ns[receiver]} did not start: "
                               f"{line} {listener.stderr.read()}")
        done = subprocess.run(
            pair.exec_argv(sender, [python, "-c", _SENDER, pair.addresses[receiver], str(port),
                                    str(nbytes), str(timeout)]),
            capture_output=True, text=True, timeout=timeout + 5)
        if done.returncode != 0:
            raise RuntimeError(f"TCP from {pair.ns[sender]} to {pair.addresses[receiver]}:{port} "
                               f"failed: {done.stderr.strip()}")
        got, seconds = done.stdout.split()
        listener.wait(timeout=timeout)
        return int(got), float(seconds)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.wait()
