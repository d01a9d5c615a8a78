import sys,re,collections
names={}; self_=collections.Counter(); fn=None; skip=False
def nm(tok, table):
    m=re.match(r'\((\d+)\)(?: (.*))?',tok)
    if not m: return tok
    if m.group(2): table[m.group(1)]=m.group(2)
    return table.get(m.group(1),'?'+m.group(1))
fnt={}; cfnt=fnt
for line in open(sys.argv[1]):
    line=line.rstrip('\n')
    if line.startswith('fn='): fn=nm(line[3:],fnt); continue
    if line.startswith('cfn='): nm(line[4:],fnt); continue
    if line.startswith('calls='): skip=True; continue
    if line and (line[0].isdigit() or line[0] in '+-*'):
        parts=line.split()
        if skip: skip=False; continue
        if len(parts)>1 and fn: self_[fn]+=int(parts[1])
        continue
n=int(sys.argv[2]); tot=sum(self_.values())
print('total', tot, 'per req', tot//n)
for f,c in self_.most_common(int(sys.argv[3]) if len(sys.argv)>3 else 40):
    print(f'{c/n:8.1f}  {f[:150]}')
