import os,sys,re,subprocess,collections
for name in sys.argv[1:]:
    out=subprocess.run(['perf','report','-i',os.path.join(os.environ.get('WORK','/tmp/weft-http-profile'), f'perf.{name}.{os.environ.get("SUFFIX","c100")}.data'),'--no-children','--sort','sym','--stdio'],capture_output=True,text=True).stdout
    cat=collections.Counter()
    for line in out.splitlines():
        m=re.match(r'\s+([\d.]+)%\s+\[(.)\]\s+(\S+)',line)
        if not m: continue
        p=float(m.group(1)); k=m.group(2); s=m.group(3)
        if k!='k': cat['user']+=p; continue
        if re.match(r'(tcp|ip_|ipv4|__ip|skb|__skb|kfree_skb|net_|__net|__dev|dev_|inet|__inet|sock|__sock|sk_|__sk|process_backlog|bbr|_copy_|copy_|__check_object|raw_v4|loopback|__netif|netif|validate_xmit|eth_|__napi|napi|__tcp|___slab|slab|kmem|__kmalloc|kmalloc|__alloc_skb|__build_skb|lock_sock|release_sock|__release_sock|page_frag|skb_page|__copy|simple_copy|__x64_sys_recv|__x64_sys_send|__sys_recv|__sys_send|security_sock|apparmor|tcp)',s) or 'tcp' in s: cat['tcp/ip+skb+copy']+=p
        elif re.match(r'(io_|__io_|tctx|io_uring)',s): cat['io_uring']+=p
        elif re.match(r'(_raw_spin_unlock_irqrestore|finish_task_switch|__schedule|schedule|try_to_wake|ttwu|enqueue|dequeue|update_curr|pick_next|psi_|select_task|__wake|wake_|_raw_spin_unlock_irq$|set_next|put_prev|update_load|reweight|__update|sched_|switch_mm|__switch_to|prepare_task)',s): cat['scheduler/wakeups']+=p
        elif re.match(r'(ep_|__ep|do_epoll|__x64_sys_epoll|epoll)',s): cat['epoll']+=p
        elif re.match(r'(entry_SYSCALL|do_syscall|syscall_|__x64_sys|fdget|fget|__fget|exit_to_user|syscall_exit)',s): cat['syscall entry/fd']+=p
        else: cat['other kernel']+=p
    print(name, ' '.join(f'{k}={v:.1f}%' for k,v in cat.most_common()))
