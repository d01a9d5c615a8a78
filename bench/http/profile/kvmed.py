# Medians (min-max) of the key=value fields of static_run.sh or ab_run.sh lines, per system,
# path and connections; a line marked INVALID or with errors is left out.
import sys, re, collections, statistics
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sys.argv[1:]:
    for line in open(f):
        p = line.split()
        if len(p) < 4 or 'rps=' not in line or 'INVALID' in line or 'errors' in line: continue
        key = ' '.join(p[:3])
        for kv in p[3:]:
            if '=' in kv:
                k, v = kv.split('=', 1)
                try: rows[key][k].append(float(v.rstrip('%')))
                except ValueError: pass
for key, d in rows.items():
    print(key, ' '.join(f"{k}={statistics.median(v):.4g}({min(v):.4g}-{max(v):.4g})" for k, v in d.items() if k != 'n'), f"runs={len(d['rps'])}")
