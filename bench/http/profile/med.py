import sys,re,statistics as st,collections
rows=collections.defaultdict(list)
for f in sys.argv[1:]:
  for line in open(f):
    m=re.match(r'(\S+) (\S+) (c\d+) rps=(\S+) n=(\d+) user_us=(\S+) sys_us=(\S+) tot_us=(\S+) other=(-?\d+)%(.*)',line)
    if not m: continue
    name,path,c,rps,n,u,s,t,o,rest=m.groups()
    p=re.match(r' p99_ms=(\S+)(.*)',rest)
    p99,err=(float(p.group(1)),p.group(2)) if p else (None,rest)
    if float(t)==0 or err.strip(): continue   # invalid (server not measured, or errors)
    rows[(path,c,name)].append((float(rps),float(u),float(s),float(t),int(o),p99))
for k,v in sorted(rows.items()):
    med=lambda i: st.median([x[i] for x in v])
    print(f'{k[0]:8} {k[1]:6} {k[2]:12} n={len(v)} rps={med(0):9.0f} ({min(x[0] for x in v):.0f}-{max(x[0] for x in v):.0f}) user={med(1):.2f} sys={med(2):.2f} cpu/req={med(3):.2f} ({min(x[3] for x in v):.2f}-{max(x[3] for x in v):.2f}) other={med(4)}%'+(f' p99={med(5):.2f}ms ({min(x[5] for x in v):.2f}-{max(x[5] for x in v):.2f})' if all(x[5] is not None for x in v) else ''))
