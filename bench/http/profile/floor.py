# floor.py PERF_DATA PIDS REQUESTS [NAME CONNS]: the server's cpu-clock samples (perf_floor.sh,
# -F 2999) per request in µs: user and kernel, the kernel split by the path its call chain
# passes through (first match below wins), and the 12 hottest kernel functions (self).
import collections, subprocess, sys

data, pids, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
name = ' '.join(sys.argv[4:6])
out = subprocess.run(['perf', 'script', '-i', data, '-F', 'comm,pid,ip,sym', '--pid', pids],
                     capture_output=True, text=True).stdout
per = 1e6 / 2999 / n  # µs per request of one sample
PATHS = [('send: tcp_sendmsg, with the loopback receive it runs', ('tcp_sendmsg',)),
         ('receive: tcp_recvmsg', ('tcp_recvmsg',)),
         ('close, accept', ('tcp_close', '__sys_accept', 'do_accept')),
         ('eventfd write (a wake-up)', ('eventfd_write',)),
         ('futex', ('futex',)),
         ('epoll_ctl', ('epoll_ctl',)),
         ('epoll_wait', ('ep_poll', 'epoll_wait')),
         ('sleep and wake (schedule)', ('schedule', 'try_to_wake_up')),
         ('io_uring, other', ('io_uring', 'io_submit', 'io_cqring', 'tctx_task_work', 'io_')),
         ('softirq, other', ('softirq',))]


def path_of(frames):
    for label, keys in PATHS:
        if any(k in f for f in frames for k in keys):
            return label
    return 'other kernel'


user = kern = 0
paths = collections.Counter()
syms = collections.Counter()
frames = []


def close_sample():
    global user, kern
    if not frames:
        return
    ip, sym = frames[0]
    if ip >= 0xffff800000000000:
        kern += 1
        syms[sym.split('+')[0]] += 1
        paths[path_of([s for _, s in frames])] += 1
    else:
        user += 1


header = True
for line in out.splitlines():
    if not line.strip():
        close_sample()
        frames, header = [], True
        continue
    if header:  # "comm pid"
        header = False
        continue
    parts = line.split(None, 1)
    frames.append((int(parts[0], 16), parts[1] if len(parts) > 1 else '?'))
close_sample()
print(f'{name} requests={n} µs per request: total {(user + kern) * per:.2f}, user {user * per:.2f}, '
      f'kernel {kern * per:.2f}')
for label, c in paths.most_common():
    print(f'  {c * per:.3f} {label}')
print('  hottest kernel functions (self):')
for s, c in syms.most_common(12):
    print(f'    {c * per:.3f} {s}')
