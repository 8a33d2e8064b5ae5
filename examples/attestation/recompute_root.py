"""Recompute an s3ingest attestation's roots from its leaves file, with nothing but the standard
library (docs/attestation.md): ``python recompute_root.py DOCUMENT.json LEAVES.jsonl``."""

import hashlib
import json
import sys


def leaf(bucket, key, side):
    fields = ["s3ingest-attestation-leaf/1", bucket, key]
    fields += [side["version_id"], side["etag"], side["state"]]
    for name in sorted(side["processors"]):
        fields += [name, side["processors"][name]]
    raw = len(fields).to_bytes(4, "big")
    for f in fields:
        b = f.encode("utf-8", "surrogatepass")
        raw += len(b).to_bytes(4, "big") + b
    return hashlib.sha256(b"\x00" + raw).digest()


def root(hashes, fanout=16):
    if not hashes:
        return hashlib.sha256(b"").digest()
    while len(hashes) > 1:
        groups = [hashes[i : i + fanout] for i in range(0, len(hashes), fanout)]
        hashes = [hashlib.sha256(b"\x01" + b"".join(g)).digest() for g in groups]
    return hashes[0]


def roots(bucket, lines):
    entries = [json.loads(line) for line in lines if line.strip()]
    entries = [e for e in entries if not e.get("skipped")]
    entries.sort(key=lambda e: e["key"].encode("utf-8", "surrogatepass"))
    return {
        side: root([leaf(bucket, e["key"], e[side]) for e in entries]).hex()
        for side in ("bucket", "ledger")
    }


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        document = json.load(f)
    document = document.get("document", document)
    with open(sys.argv[2], encoding="utf-8") as f:
        found = roots(document["bucket"], f.read().splitlines())
    print(json.dumps({"recomputed": found, "match": found == document["roots"]}))
    sys.exit(0 if found == document["roots"] else 1)
