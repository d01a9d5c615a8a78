"""clients/http-load: reading ab's, wrk's and h2load's reports, and what makes a run invalid."""
import importlib.machinery
import importlib.util
import unittest
from pathlib import Path

PATH = Path(__file__).resolve().parent.parent / "clients" / "http-load"
loader = importlib.machinery.SourceFileLoader("http_load", str(PATH))
spec = importlib.util.spec_from_loader("http_load", loader)
http_load = importlib.util.module_from_spec(spec)
loader.exec_module(http_load)

WRK = """Running 1s test @ http://127.0.0.1:8080/
  2 threads and 100 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   712.34us  401.00us  12.50ms   90.12%
    Req/Sec    70.12k     5.01k   80.00k    70.00%
  Latency Distribution
     50%  650.00us
     75%  800.00us
     90%    1.00ms
     99%    2.35ms
  139536 requests in 1.00s, 17.57MB read
Requests/sec: 139412.55
Transfer/sec:     17.55MB
"""

WRK_ERRORS = WRK.replace("Requests/sec", "  Socket errors: connect 0, read 3, write 0, timeout 12\n"
                         "  Non-2xx or 3xx responses: 5\nRequests/sec")

AB = """Server Software:        
Server Hostname:        127.0.0.1
Server Port:            8080

Document Path:          /
Document Length:        13 bytes

Concurrency Level:      100
Time taken for tests:   0.182 seconds
Complete requests:      2000
Failed requests:        0
Total transferred:      250000 bytes
HTML transferred:       26000 bytes
Requests per second:    10989.01 [#/sec] (mean)
Time per request:       9.100 [ms] (mean)
Time per request:       0.091 [ms] (mean, across all concurrent requests)
Transfer rate:          1341.43 [Kbytes/sec] received

Percentage of the requests served within a certain time (ms)
  50%      8
  66%      9
  95%     14
  99%     21
 100%     30 (longest request)
"""


class WrkTest(unittest.TestCase):
    def test_durations(self):
        self.assertAlmostEqual(http_load.duration_ms("712.34us"), 0.71234)
        self.assertAlmostEqual(http_load.duration_ms("2.35ms"), 2.35)
        self.assertAlmostEqual(http_load.duration_ms("1.50s"), 1500)
        with self.assertRaises(ValueError):
            http_load.duration_ms("fast")

    def test_clean_run(self):
        f = http_load.parse_wrk(WRK)
        self.assertEqual(f["requests"], 139536)
        self.assertAlmostEqual(f["requests_per_s"], 139412.55)
        self.assertAlmostEqual(f["mean_latency_ms"], 0.71234)
        self.assertAlmostEqual(f["p99_ms"], 2.35)
        self.assertEqual(sum(f["errors"].values()), 0)

    def test_a_zero_percentile_reads_as_zero(self):
        # wrk sometimes prints it under pipelining; the client then leaves p99 out of the run
        self.assertEqual(http_load.parse_wrk(WRK.replace("2.35ms", "0.00us"))["p99_ms"], 0)

    def test_errors_are_counted(self):
        f = http_load.parse_wrk(WRK_ERRORS)
        self.assertEqual(f["errors"], {"connect": 0, "read": 3, "write": 0, "timeout": 12,
                                       "non2xx": 5})

    def test_truncated_output_is_an_error(self):
        with self.assertRaises(ValueError):
            http_load.parse_wrk(WRK.split("Requests/sec")[0])


class AbTest(unittest.TestCase):
    def test_clean_run(self):
        f = http_load.parse_ab(AB)
        self.assertEqual(f["requests"], 2000)
        self.assertEqual(f["document_length"], 13)
        self.assertAlmostEqual(f["requests_per_s"], 10989.01)
        self.assertAlmostEqual(f["mean_latency_ms"], 9.1)  # the per-client mean, not 0.091
        self.assertEqual(f["p99_ms"], 21)
        self.assertEqual(f["errors"], {"failed": 0, "non2xx": 0})

    def test_failed_and_non2xx(self):
        out = AB.replace("Failed requests:        0",
                         "Failed requests:        4\n   (Connect: 0, Receive: 0, Length: 4, "
                         "Exceptions: 0)\nNon-2xx responses:      9")
        self.assertEqual(http_load.parse_ab(out)["errors"], {"failed": 4, "non2xx": 9})


# h2load 1.52's summaries, captured: Go's net/http over h2c (-t1 -c2 -m4 -D1), an HTTP/1.1-only
# server (asio-http; -n 20 -c 2: every request errored), and a path Go answers 404.
H2LOAD = """starting benchmark...
spawning thread #0: 2 total client(s). Timing-based test with 0s of warm-up time and 1s of main duration for measurements.
Warm-up started for thread #0.
progress: 50% of clients started
progress: 100% of clients started
Warm-up phase is over for thread #0.
Main benchmark duration is started for thread #0.
Application protocol: h2c
Main benchmark duration is over for thread #0. Stopping all clients.
Stopped all clients for thread #0

finished in 1.14s, 56.00 req/s, 2.17KB/s
requests: 56 total, 64 started, 56 done, 56 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 56 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 2.17KB (2218) total, 360B (360) headers (space savings 93.30%), 728B (728) data
                     min         max         mean         sd        +/- sd
time for request:    24.90ms    254.91ms    138.17ms     80.08ms    42.86%
time for connect:      113us       156us       135us        30us   100.00%
time to 1st byte:    44.49ms     44.52ms     44.51ms        19us   100.00%
req/s           :      27.55       27.55       27.55        0.00   100.00%
"""

H2LOAD_NOT_H2 = """starting benchmark...
spawning thread #0: 2 total client(s). 20 total requests
Application protocol: h2c

finished in 235.19ms, 0.00 req/s, 1.29KB/s
requests: 20 total, 2 started, 0 done, 0 succeeded, 20 failed, 20 errored, 0 timeout
status codes: 0 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 310B (310) total, 0B (0) headers (space savings 0.00%), 0B (0) data
                     min         max         mean         sd        +/- sd
time for request:        0us         0us         0us         0us     0.00%
time for connect:      179us       361us       270us       129us   100.00%
time to 1st byte:        0us         0us         0us         0us     0.00%
req/s           :       0.00        0.00        0.00        0.00   100.00%
"""

H2LOAD_404 = """finished in 32.06ms, 623.83 req/s, 34.85KB/s
requests: 20 total, 20 started, 20 done, 0 succeeded, 20 failed, 0 errored, 0 timeout
status codes: 0 2xx, 0 3xx, 20 4xx, 0 5xx
traffic: 1.12KB (1144) total, 282B (282) headers (space savings 88.72%), 380B (380) data
                     min         max         mean         sd        +/- sd
time for request:      434us     12.19ms      5.62ms      4.21ms    55.00%
"""


class H2loadTest(unittest.TestCase):
    def test_clean_run(self):
        f = http_load.parse_h2load(H2LOAD)
        self.assertEqual(f["requests"], 56)  # 2xx responses, not the 64 started
        self.assertAlmostEqual(f["requests_per_s"], 56.0)
        self.assertAlmostEqual(f["mean_latency_ms"], 138.17)
        self.assertEqual(f["errors"], {"failed": 0, "3xx": 0})

    def test_a_server_without_http2_is_all_errors(self):
        f = http_load.parse_h2load(H2LOAD_NOT_H2)
        self.assertEqual(f["requests"], 0)
        self.assertEqual(sum(f["errors"].values()), 20)
        self.assertEqual(f["mean_latency_ms"], 0)

    def test_4xx_is_counted_once(self):
        # h2load counts a 4xx response as failed: it is one error, not two
        f = http_load.parse_h2load(H2LOAD_404)
        self.assertEqual(f["errors"], {"failed": 20, "3xx": 0})
        self.assertAlmostEqual(f["mean_latency_ms"], 5.62)

    def test_truncated_output_is_an_error(self):
        with self.assertRaises(ValueError):
            http_load.parse_h2load(H2LOAD.split("status codes")[0])


STRACE = """% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ------------------
 31.40    0.134703           5     23574     23574 readlink
 15.95    0.068436           8      7852         1 sendfile
  9.38    0.040254          12      3353           io_uring_enter
  0.00    0.000004           4         1           write
------ ----------- ----------- --------- --------- ------------------
100.00    0.243397           6     34780     23575 total
"""


class WriteCountTest(unittest.TestCase):
    def test_strace_summary_counts_calls_with_and_without_errors(self):
        calls = http_load.strace_calls(STRACE)
        self.assertEqual(calls, {"readlink": 23574, "sendfile": 7852, "io_uring_enter": 3353,
                                 "write": 1})

    def test_static_file_body_is_the_byte_pattern(self):
        body = http_load.expected_body(600)
        self.assertEqual(len(body), 600)
        self.assertEqual(body[255], 255)
        self.assertEqual(body[256], 0)
        self.assertEqual(http_load.expected_body(None), b"Hello, World!")


class ServerProcessesTest(unittest.TestCase):
    """http-idle reads the memory of the processes the harness counts for the server."""

    def test_the_harness_cgroup_then_session_then_none(self):
        import os
        import tempfile
        server_procs = http_load.server_procs
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "cgroup.procs").write_text("42\n7\n")
            self.assertEqual(server_procs.harness_server_pids(
                {"WEFT_BENCH_SERVER_CGROUP": d, "WEFT_BENCH_SERVER_SESSION": "1"}), [7, 42])
            (Path(d) / "cgroup.procs").write_text("")  # the group emptied: the session
            sid = os.getsid(0)
            pids = server_procs.harness_server_pids({"WEFT_BENCH_SERVER_CGROUP": d,
                                                     "WEFT_BENCH_SERVER_SESSION": str(sid)})
            self.assertIn(os.getpid(), pids)
        self.assertIsNone(server_procs.harness_server_pids({}))


if __name__ == "__main__":
    unittest.main()
