"""Every line log_sample writes is one JSON object (json.loads), with the values it logged.

usage: test_log_json.py <log_sample binary>
"""
import json
import subprocess
import sys


def main():
    out = subprocess.run([sys.argv[1]], check=True, capture_output=True).stdout.decode("utf-8")
    lines = out.splitlines()
    assert len(lines) == 4, lines
    recs = [json.loads(l) for l in lines]
    assert recs[0]["msg"] == "plain" and recs[0]["n"] == 1 and recs[0]["level"] == "info"
    assert recs[1]["msg"] == 'quote " backslash \\ newline \n tab \t', repr(recs[1]["msg"])
    assert recs[1]["ctl"] == "\x01\x1f\x7f", repr(recs[1]["ctl"])
    assert recs[1]["utf8"] == "caf\u00e9 \u2713"
    assert recs[2]["i64"] == -(2**63) and recs[2]["u64"] == 2**64 - 1
    assert recs[2]["tiny"] == 5e-324 and recs[2]["nan"] == "NaN" and recs[2]["flag"] is False
    assert recs[3]["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert recs[3]["span_id"] == "00f067aa0ba902b7" and recs[3]["_level"] == "user"
    assert recs[3]["level"] == "debug"
    for r in recs:
        assert r["ts"].endswith("Z") and len(r["ts"]) == 27, r["ts"]
    print("4 JSON lines parsed")


if __name__ == "__main__":
    main()
