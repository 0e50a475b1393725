#!/usr/bin/env python3
"""Copies each query file into its block of docs/sql.md (the blocks marked
`<!-- query: DIALECT/NAME.sql -->`), so the page shows exactly what runs, and into the
QUERIES copies of the Python client (clients/python/src/backlog_client/_queries.py), and runs the
TypeScript and Ruby clients' copiers (clients/typescript/scripts/queries.mjs,
clients/ruby/script/queries.rb).
crates/backlog-sql/tests/docs.rs fails when a block and its file differ; run this, then read the
prose around the blocks that changed."""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
doc = root / "docs" / "sql.md"
queries = root / "crates" / "backlog-sql" / "queries"
lines = doc.read_text().split("\n")
out, i, changed = [], 0, []
while i < len(lines):
    line = lines[i]
    out.append(line)
    m = re.match(r"\s*<!-- query: (\S+) -->\s*$", line)
    if m:
        j = i + 1
        while lines[j].strip() != "```sql":
            out.append(lines[j])
            j += 1
        out.append(lines[j])
        k = j + 1
        while lines[k].strip() != "```":
            k += 1
        text = (queries / m.group(1)).read_text().rstrip("\n").split("\n")
        if lines[j + 1:k] != text:
            changed.append(m.group(1))
        out.extend(text)
        i = k
        continue
    i += 1
doc.write_text("\n".join(out))
print("updated:", ", ".join(changed) or "nothing")

# The Python client: QUERIES["DIALECT/NAME.sql"] = """\ … """ blocks.
client = root / "clients" / "python" / "src" / "backlog_client" / "_queries.py"
py = client.read_text()
copied = []


def copy(m):
    key = m.group(1)
    text = (queries / key).read_text()
    if '"""' in text or "\\" in text:
        raise SystemExit(f"{key}: cannot be copied into a triple-quoted string as it is")
    if m.group(2) != text:
        copied.append(key)
    return f'QUERIES["{key}"] = """\\\n{text}"""'


py = re.sub(r'QUERIES\["([^"]+)"\] = """\\\n(.*?)"""', copy, py, flags=re.S)
client.write_text(py)
print("python copies updated:", ", ".join(copied) or "nothing")

# The TypeScript and Ruby clients carry their copies in their own form; each has its copier.
import shutil
import subprocess

for tool, script in (("node", "clients/typescript/scripts/queries.mjs"),
                     ("ruby", "clients/ruby/script/queries.rb")):
    if shutil.which(tool) is None:
        raise SystemExit(f"{tool} is needed to update {script}'s copies (scripts/services.sh installs it)")
    done = subprocess.run([tool, str(root / script)], capture_output=True, text=True, check=True)
    print(f"{tool} copies:", done.stdout.strip().replace("\n", ", ") or "nothing")
