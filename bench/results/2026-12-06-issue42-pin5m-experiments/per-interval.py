import sys
# Per-interval deltas of the sampler's pg_stat_statements snapshots: calls, mean exec µs and shared buffers per call.
blocks=open(sys.argv[1]).read().split('=== ')[1:]
prev=None
names=['ClaimFrom','Claim','CompleteOne','Complete','EnqueueQuiet','INSERT']
print('time (UTC) | load | ' + ' | '.join(f'{n}: calls, µs/call, buffers/call' for n in names))
for b in blocks:
    lines=b.strip().split('\n')
    hdr=lines[0]
    st={}
    for l in lines[1:]:
        p=l.split('|')
        if len(p)==4 and p[0].isdigit():
            q=p[3]
            key=q.split(':')[1].split()[0] if q.startswith('-- name:') else q.split()[0]
            st[key]=(int(p[0]),int(p[1]),int(p[2]))
    if prev:
        cells=[]
        for n in names:
            if n in st and n in prev and st[n][0]>prev[n][0]:
                dc=st[n][0]-prev[n][0]; dt=st[n][1]-prev[n][1]; db=st[n][2]-prev[n][2]
                cells.append(f'{dc}, {dt*1000//dc}, {db//dc}')
            else: cells.append('–')
        print(hdr[:8]+' | '+hdr.split('load ')[1].strip()+' | '+' | '.join(cells))
    prev=st
