#!/usr/bin/env python3
"""known_choices.py - the choices a device class ships (src/gemm/choice_known.h)
from measured first steps.

On a device of the class, with an empty cache and nothing shipped:
    d=$(mktemp -d)
    for m in mlp cnn vgg resnet mobilenet lstm gpt; do
        NNCL_KNOWN_CHOICES=0 NNCL_CACHE_DIR=$d POCL_CACHE_DIR=$d BENCH_FIRST_LOG=1 \\
            build/bench/bench --first-step $m 2>$d/$m.log
    done
    python3 bench/known_choices.py $d/gemm-*.choice $d/*.log

Each product's line of the debug log lists every candidate's time. A first
run compiles every kernel variant its products use, so per model (per log)
of the variants within SLACK of a product's fastest the ones kept are as
few as cover every product of the model (greedy set cover, most products
first); each product then takes the fastest kept variant within SLACK of
its fastest. The conv2d paths are
taken from the choice file as measured. Prints the lines for the header."""
import re
import sys

SLACK = 1.10  # a product may run up to 10% slower than its fastest variant

LINE = re.compile(r"GEMM (\w)(\w) (\d+)x(\d+)x(\d+) epi (\d+): \S+ \(own best \S+; ms per run:(.*?)\), chosen")


def cover(products):
    """Each product's variant: the fewest variants within SLACK of every
    product's fastest (greedy), then the fastest of them per product."""
    ok = {k: {v for v, ms in t.items() if ms <= SLACK * min(t.values())} for k, t in products.items()}
    kept, left = [], set(ok)
    while left:
        count = {}
        for k in left:
            for v in ok[k]:
                count[v] = count.get(v, 0) + 1
        best = max(sorted(count), key=lambda v: count[v])
        kept.append(best)
        left = {k for k in left if best not in ok[k]}
    return {k: min((v for v in ok[k] if v in kept), key=lambda v: products[k][v]) for k in products}, kept


def main(paths):
    chosen, convs = {}, []
    for p in paths:
        products = {}  # key -> {variant: ms}, one model's (one log)
        with open(p, errors="replace") as f:
            for line in f:
                if line.startswith("conv "):
                    convs.append(line.strip())
                m = LINE.search(line)
                if not m:
                    continue
                ta, tb, mm, nn, kk, epi, times = m.groups()
                key = (int(ta == "T"), int(tb == "T"), int(mm), int(nn), int(kk), int(epi))
                pairs = times.split()
                t = {pairs[i]: float(pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)
                     if pairs[i + 1] != "-" and pairs[i] != "clblast"}
                if t:
                    products[key] = t
        if products:
            pick, kept = cover(products)
            chosen.update(pick)
            sys.stderr.write("%s: %d products over %d variants (%s)\n" % (p, len(products), len(kept), " ".join(kept)))
    for k in sorted(chosen):
        print('    "choice %d %d %d %d %d %d %s %s",' % (k + (chosen[k], chosen[k])))
    for c in dict.fromkeys(convs):
        print('    "%s",' % c)


if __name__ == "__main__":
    main(sys.argv[1:])
