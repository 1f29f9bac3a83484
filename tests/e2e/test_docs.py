"""The repository's documents link only to files a clone has."""

import os
import re

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_relative_links_in_the_docs_resolve_inside_the_repository():
    docs = ["README.md", "ARCHITECTURE.md", "SECURITY.md", "BENCHMARKS.md"]
    docs += [os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md")]
    broken = []
    for doc in docs:
        with open(os.path.join(ROOT, doc)) as f:
            text = f.read()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = os.path.normpath(os.path.join(ROOT, os.path.dirname(doc), target.split("#")[0]))
            if not path.startswith(ROOT + os.sep) or not os.path.exists(path):
                broken.append(f"{doc}: {target}")
    assert not broken, broken
