import unittest

from weftbench.runner import rotated


class RotationTest(unittest.TestCase):
    def test_each_system_leads_one_round_in_turn(self):
        systems = ["weft", "go", "tokio"]
        orders = [rotated(systems, k) for k in range(4)]
        self.assertEqual(orders[0], ["weft", "go", "tokio"])
        self.assertEqual(orders[1], ["go", "tokio", "weft"])
        self.assertEqual(orders[2], ["tokio", "weft", "go"])
        self.assertEqual(orders[3], orders[0])
        self.assertEqual([o[0] for o in orders[:3]], systems)

    def test_every_round_runs_every_system_once(self):
        systems = ["a", "b"]
        for k in range(5):
            self.assertEqual(sorted(rotated(systems, k)), systems)
        self.assertEqual(rotated([], 3), [])


if __name__ == "__main__":
    unittest.main()


class BuildFlagsTest(unittest.TestCase):
    def test_read_from_the_peers_dir_or_said_unknown(self):
        import json
        import tempfile
        from pathlib import Path
        from weftbench import runner
        with tempfile.TemporaryDirectory() as d:
            self.assertIn("unknown", runner.build_flags(Path(d))["peers"])
            (Path(d) / "BUILD-FLAGS.json").write_text(json.dumps({"go": "go1.26"}))
            self.assertEqual(runner.build_flags(Path(d)), {"go": "go1.26"})
