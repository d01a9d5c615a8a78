import os
import shlex
import signal
import subprocess
import sys
import time
import unittest
from pathlib import Path
from unittest import mock

from weftbench import measure, report, runner


class OtherCpuTest(unittest.TestCase):
    def test_busy_ticks_excludes_idle_and_iowait(self):
        # user nice system idle iowait irq softirq steal guest guest_nice
        self.assertEqual(measure.busy_ticks("cpu  100 2 30 5000 70 4 5 6 0 0"), 147)

    def test_other_cpu_arithmetic(self):
        # 2 CPUs for 1 s = 2 CPU-s; 150 busy ticks at 100 Hz = 1.5 s; the child used 1.0 s
        self.assertAlmostEqual(measure.other_cpu_percent(150, 1.0, 1.0, 2, hz=100), 25.0)
        self.assertAlmostEqual(measure.other_cpu_percent(100, 1.0, 1.0, 2, hz=100), 0.0)

    def test_other_cpu_never_negative(self):
        self.assertEqual(measure.other_cpu_percent(90, 1.0, 1.0, 2, hz=100), 0.0)
        self.assertEqual(measure.other_cpu_percent(10, 0.0, 0.0, 2, hz=100), 0.0)

    def test_niced_ticks_are_the_second_field(self):
        self.assertEqual(measure.nice_ticks("cpu  100 2 30 5000 70 4 5 6 0 0"), 2)

    def test_niced_cpu_is_a_part_of_the_other_cpu(self):
        # 2 CPUs for 1 s; 60 niced ticks at 100 Hz = 0.6 s = 30 % of the machine
        self.assertAlmostEqual(measure.niced_cpu_percent(60, 0.0, 40.0, 1.0, 2, hz=100), 30.0)
        # never more than all of the other CPU
        self.assertAlmostEqual(measure.niced_cpu_percent(60, 0.0, 20.0, 1.0, 2, hz=100), 20.0)
        # a niced harness: its own processes' CPU is in the nice column and comes off
        self.assertAlmostEqual(measure.niced_cpu_percent(160, 1.0, 40.0, 1.0, 2, hz=100), 30.0)
        self.assertEqual(measure.niced_cpu_percent(50, 1.0, 40.0, 1.0, 2, hz=100), 0.0)

    def test_a_run_is_repeated_for_normal_priority_cpu_only(self):
        busy = measure.Run("ok", other_cpu_percent=60.0, niced_cpu_percent=55.0)
        self.assertAlmostEqual(measure.competing_percent(busy), 5.0)

    def test_noise_allows_one_tick_per_cpu(self):
        # 1 s at 100 Hz: allowance 1 %
        self.assertTrue(measure.is_noisy(11.5, 1.0, 10, hz=100))
        self.assertFalse(measure.is_noisy(10.5, 1.0, 10, hz=100))
        # 20 ms: one tick is 50 %, a short run cannot be judged noisy on a small excess
        self.assertFalse(measure.is_noisy(55, 0.02, 10, hz=100))


class ProtocolTest(unittest.TestCase):
    def test_parse_metrics(self):
        out = ('warming up\n{"metric": "ns_per_fork", "unit": "ns", "value": 7.5}\n'
               '{"metric": "allocs_per_fork", "unit": "allocs", "value": 0}\n'
               '{"metric": "bad", "value": "x"}\n{not json\n')
        self.assertEqual(measure.parse_metrics(out), [
            {"metric": "ns_per_fork", "unit": "ns", "value": 7.5},
            {"metric": "allocs_per_fork", "unit": "allocs", "value": 0.0}])

    def run_sh(self, script, timeout=5.0):
        return measure.run_once(["sh", "-c", script], timeout, threshold=10)

    def test_ok(self):
        run = self.run_sh('echo \'{"metric": "m", "unit": "ns", "value": 3}\'')
        self.assertEqual(run.status, "ok")
        self.assertEqual(run.metrics, [{"metric": "m", "unit": "ns", "value": 3.0}])
        self.assertGreater(run.wall_s, 0)
        self.assertGreaterEqual(run.other_cpu_percent, 0)

    def test_exit_2_is_unsupported(self):
        self.assertEqual(self.run_sh("exit 2").status, "unsupported")

    def test_failure_keeps_stderr_tail(self):
        run = self.run_sh("echo boom >&2; exit 4")
        self.assertEqual(run.status, "failed")
        self.assertEqual(run.error, "exit 4\nboom")

    def test_exit_3_is_invalid_and_keeps_its_figures(self):
        run = self.run_sh('echo \'{"metric": "errors", "unit": "count", "value": 7}\'; '
                          'echo "7 errors" >&2; exit 3')
        self.assertEqual(run.status, "invalid")
        self.assertEqual(run.error, "7 errors")
        self.assertEqual(run.metrics, [{"metric": "errors", "unit": "count", "value": 7.0}])

    def test_no_metric_is_a_failure(self):
        self.assertEqual(self.run_sh("true").status, "failed")

    def test_timeout(self):
        run = self.run_sh("sleep 5", timeout=0.2)
        self.assertEqual(run.status, "failed")
        self.assertIn("timed out", run.error)


# A server that, for each connection, burns 3 ms of CPU on a thread of its own which then
# exits, answers one line and closes: its CPU is all in threads gone before it is read.
SERVER = """
import socket, sys, threading, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
def burn():
    t = time.thread_time()
    while time.thread_time() - t < 0.003:
        pass
while True:
    c, _ = s.accept()
    if c.recv(1) == b"w":
        w = threading.Thread(target=burn); w.start(); w.join()
    c.sendall(b"done\\n"); c.close()
"""
CLIENT = """
import json, socket, sys
for _ in range(int(sys.argv[2])):
    with socket.create_connection(("127.0.0.1", int(sys.argv[1]))) as c:
        c.sendall(b"w"); assert c.makefile().readline() == "done\\n"
print(json.dumps({"metric": "ops", "unit": "", "value": int(sys.argv[2])}))
"""


def cgroup_writable() -> bool:
    group = measure.CpuGroup.make("probe")
    if group is None:
        return False
    group.close(kill=True)
    return True


def metric(run: measure.Run, name: str) -> dict:
    return next(m for m in run.metrics if m["metric"] == name)


class ServerCpuTest(unittest.TestCase):
    """A server's CPU per op: from a cgroup of its own in microseconds, threads that exited
    included; in /proc ticks where no cgroup v2 directory can be made."""

    def run_pair(self, ops: int) -> measure.Run:
        port = measure.free_port()
        return measure.run_once([sys.executable, "-c", CLIENT, str(port), str(ops)], 30, 10,
                                server_argv=[sys.executable, "-c", SERVER, str(port)],
                                port=port)

    @unittest.skipUnless(cgroup_writable(), "no writable cgroup v2 directory (not root?)")
    def test_cgroup_counts_exited_threads_below_a_tick(self):
        run = self.run_pair(2)
        self.assertEqual(run.status, "ok", run.error)
        cpu = metric(run, "server_cpu_ns_per_op")
        self.assertEqual(cpu["method"], "cgroup")
        # each op ran 3 ms on a thread that exited; ticks would read 0 or 10 ms steps
        self.assertGreaterEqual(cpu["value"], 3e6)
        self.assertNotEqual(cpu["value"] * 2 % 10e6, 0)
        leftover = [d for d in measure.cgroup2_home().iterdir()
                    if d.name.startswith(f"weft-bench-{os.getpid()}-")]
        self.assertEqual(leftover, [])

    def test_ticks_without_cgroup(self):
        with mock.patch.object(measure, "cgroup2_home", return_value=None):
            run = self.run_pair(1)
        self.assertEqual(run.status, "ok", run.error)
        cpu = metric(run, "server_cpu_ns_per_op")
        self.assertEqual(cpu["method"], "ticks")
        ticks = cpu["value"] / (1e9 / measure.HZ)  # whole ticks (one op)
        self.assertAlmostEqual(ticks, round(ticks), places=6)

    @unittest.skipUnless(cgroup_writable(), "no writable cgroup v2 directory (not root?)")
    def test_a_server_that_cannot_enter_its_group_is_read_in_ticks(self):
        with mock.patch.object(measure.CpuGroup, "enter_self", lambda self: None):
            run = self.run_pair(1)
        self.assertEqual(run.status, "ok", run.error)
        self.assertEqual(metric(run, "server_cpu_ns_per_op")["method"], "ticks")

    @unittest.skipUnless(cgroup_writable(), "no writable cgroup v2 directory (not root?)")
    def test_background_process_is_moved_in_and_back(self):
        proc = subprocess.Popen([sys.executable, "-c",
                                 "import time\nt = time.process_time()\n"
                                 "while time.process_time() - t < 0.05: pass\n"
                                 "time.sleep(30)"], start_new_session=True)
        try:
            before = (Path(f"/proc/{proc.pid}/cgroup").read_text())
            with measure.background_groups({"nats": proc.pid}) as groups:
                group = groups[proc.pid]
                self.assertEqual(group.pids(), [proc.pid])
                os.kill(proc.pid, signal.SIGSTOP)  # no CPU while stopped
                while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] \
                        != "T":
                    time.sleep(0.01)
                reader = measure.CpuReader(group, lambda: 0)
                self.assertEqual(reader.method, "cgroup")
                time.sleep(0.05)
                self.assertEqual(reader.elapsed(), 0)
                os.kill(proc.pid, signal.SIGCONT)
            self.assertIsNone(proc.poll())  # moved back, not killed
            self.assertEqual(Path(f"/proc/{proc.pid}/cgroup").read_text(), before)
            self.assertFalse(group.path.exists())
        finally:
            proc.kill()
            proc.wait()


class PairMetricsTest(unittest.TestCase):
    """A server pair's CPU rows: the server's, the client's and their total, per op."""

    def test_total_is_server_plus_client_per_op(self):
        printed = [{"metric": "ops", "unit": "", "value": 1000.0},
                   {"metric": "client_cpu_s", "unit": "s", "value": 0.002}]
        out = {m["metric"]: m for m in measure.pair_metrics(printed, 0.003, 0.5, "cgroup", 77)}
        self.assertAlmostEqual(out["server_cpu_ns_per_op"]["value"], 3000.0)
        # the load tool's own CPU, not the whole client process's 0.5 s
        self.assertAlmostEqual(out["client_cpu_ns_per_op"]["value"], 2000.0)
        self.assertAlmostEqual(out["total_cpu_ns_per_op"]["value"], 5000.0)
        self.assertEqual(out["total_cpu_ns_per_op"]["method"], "cgroup")
        self.assertEqual(out["server_rss_kib"]["value"], 77.0)
        self.assertNotIn("client_cpu_s", out)  # consumed, not a row of its own

    def test_the_client_process_when_it_names_no_load_tool(self):
        printed = [{"metric": "ops", "unit": "", "value": 10.0}]
        out = {m["metric"]: m for m in measure.pair_metrics(printed, 0.0, 0.001, "ticks", 0)}
        self.assertAlmostEqual(out["client_cpu_ns_per_op"]["value"], 100_000.0)
        self.assertAlmostEqual(out["total_cpu_ns_per_op"]["value"], 100_000.0)

    def test_no_ops_no_per_op_rows(self):
        out = measure.pair_metrics([{"metric": "writes", "unit": "", "value": 3.0}], 1.0, 1.0,
                                   "cgroup", 5)
        self.assertEqual([m["metric"] for m in out], ["writes", "server_rss_kib"])


# A server behind a launcher, as nginx-hello: a shell that starts the real server (which makes
# 64 MiB resident) and waits for it. The launcher alone holds about 1 MiB.
WRAPPED = """
import socket, sys
ballast = b"x" * (64 << 20)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
while True:
    c, _ = s.accept(); c.recv(1); c.sendall(b"done\\n"); c.close()
"""
BURNING_CLIENT = """
import json, socket, sys, time
t = time.process_time()
while time.process_time() - t < 0.03:
    pass
with socket.create_connection(("127.0.0.1", int(sys.argv[1]))) as c:
    c.sendall(b"w"); assert c.makefile().readline() == "done\\n"
print(json.dumps({"metric": "ops", "unit": "", "value": 1}))
"""


class WrappedServerTest(unittest.TestCase):
    """The server's memory is every process of its cgroup (or session), not the launcher's."""

    def run_wrapped(self) -> measure.Run:
        port = measure.free_port()
        launcher = f"{shlex.quote(sys.executable)} -c {shlex.quote(WRAPPED)} {port}; exit $?"
        return measure.run_once([sys.executable, "-c", BURNING_CLIENT, str(port)], 30, 10,
                                server_argv=["sh", "-c", launcher], port=port)

    def check(self, run: measure.Run) -> None:
        self.assertEqual(run.status, "ok", run.error)
        self.assertGreaterEqual(metric(run, "server_rss_kib")["value"], 64 * 1024)
        # the client burned 30 ms for its one op
        self.assertGreaterEqual(metric(run, "client_cpu_ns_per_op")["value"], 30e6)
        self.assertAlmostEqual(metric(run, "total_cpu_ns_per_op")["value"],
                               metric(run, "client_cpu_ns_per_op")["value"]
                               + metric(run, "server_cpu_ns_per_op")["value"])

    @unittest.skipUnless(cgroup_writable(), "no writable cgroup v2 directory (not root?)")
    def test_cgroup_sum(self):
        self.check(self.run_wrapped())

    def test_session_sum_without_cgroup(self):
        with mock.patch.object(measure, "cgroup2_home", return_value=None):
            self.check(self.run_wrapped())

    def test_tree_rss_adds_processes_and_skips_the_gone(self):
        me = measure.rss_kib(os.getpid())
        self.assertGreater(me, 0)
        self.assertEqual(measure.tree_rss_kib([os.getpid(), os.getpid(), 2 ** 22 + 1]), 2 * me)


class CpuMethodRowTest(unittest.TestCase):
    def test_rows_and_cells_say_how_cpu_was_read(self):
        self.assertEqual(runner.cpu_method(set()), {})
        self.assertEqual(runner.cpu_method({"cgroup"}), {"cpu_method": "cgroup"})
        self.assertEqual(runner.cpu_method({"ticks", "cgroup"}),
                         {"cpu_method": "cgroup + ticks"})
        self.assertIn("CPU: cgroup µs", report.cpu_method_note("cgroup"))
        self.assertIn('class="warn"', report.cpu_method_note("ticks"))
        cell = report.figure_cell({"value": 1500.0, "min": 1400.0, "max": 1600.0, "runs": 3,
                                   "cpu_method": "cgroup"})
        self.assertIn("CPU: cgroup µs", cell)


if __name__ == "__main__":
    unittest.main()
