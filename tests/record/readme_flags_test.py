#!/usr/bin/env python3
"""Checks that README.md's "Recording options" section lists every flag of
interpose/flags.inc, by its `tdbg record` option and its TDBG_* variable.
Usage: readme_flags_test.py FLAGS_INC README_MD"""
import re
import sys

flags_inc, readme = sys.argv[1], sys.argv[2]
flags = re.findall(r"^FLAG\(\s*\w+\s*,\s*(\w+)\s*,", open(flags_inc).read(), re.M)
text = open(readme).read()
match = re.search(r"^## Recording options\n(.*?)(?=^## |\Z)", text, re.M | re.S)
if not match:
    print("FAIL: README.md has no '## Recording options' section")
    sys.exit(1)
section = match.group(1)
missing = [f for f in flags
           if "--" + f.replace("_", "-") not in section or "TDBG_" + f.upper() not in section]
if not flags or missing:
    print("FAIL: README's Recording options lack: " + ", ".join(missing or ["(no flags parsed)"]))
    sys.exit(1)
print(f"ok: {len(flags)} flags documented")
