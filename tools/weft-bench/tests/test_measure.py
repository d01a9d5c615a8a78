import unittest

from weftbench import measure


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


if __name__ == "__main__":
    unittest.main()
