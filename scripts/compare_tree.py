#!/usr/bin/env python3
"""Compares a folder with an ExampleStorage manifest: folders, file sizes and sha256. Exit 1 on any difference."""
import json,hashlib,os,sys
root,man=sys.argv[1],json.load(open(sys.argv[2]))
folders=set();files={}
for d,ds,fs in os.walk(root):
    for x in ds: folders.add(os.path.relpath(os.path.join(d,x),root))
    for x in fs:
        p=os.path.join(d,x);b=open(p,'rb').read();files[os.path.relpath(p,root)]=(len(b),hashlib.sha256(b).hexdigest())
ef=set(man['folders']);efi={k:(v['size'],v['sha256']) for k,v in man['files'].items()}
ok=folders==ef and files==efi
print("identical: every folder and file matches" if ok else "DIFFERENT:", "folders-missing",sorted(ef-folders),"folders-extra",sorted(folders-ef),"files-missing",sorted(set(efi)-set(files)),"files-extra",sorted(set(files)-set(efi)),"content-diff",sorted(k for k in efi if k in files and files[k]!=efi[k]))
sys.exit(0 if ok else 1)
