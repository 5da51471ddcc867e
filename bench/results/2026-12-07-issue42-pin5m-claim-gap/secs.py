import json,sys
# Per-second samples of the idle-in-tx phase: the worst seconds by p99, and how many seconds had p99 > 200 ms.
for d in sys.argv[1:]:
    rows=[json.loads(l) for l in open(d+'/samples.jsonl')]
    pin=[r for r in rows if r['phase']=='idle-in-tx']
    bad=[r for r in pin if r['p99_ms']>200]
    worst=sorted(pin,key=lambda r:-r['p99_ms'])[:6]
    p50s=sorted(r['p50_ms'] for r in pin)
    print(d, 'secs',len(pin),'p99>200:',len(bad),'median p50 %.1f'%p50s[len(p50s)//2], 'worst:', ', '.join('t=%d p99=%d p50=%d'%(r['t']-pin[0]['t'],r['p99_ms'],r['p50_ms']) for r in worst))
