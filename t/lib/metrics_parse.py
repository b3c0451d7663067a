"""Parses a metrics scrape read from stdin with prometheus_client's own
parsers and prints its samples as JSON, [[name, {labels}, value], ...].

    metrics_parse.py openmetrics   the strict OpenMetrics 1.0 parser
    metrics_parse.py prometheus    the Prometheus text format parser

Exits non-zero, with the parser's message, on text the parser refuses.
Run with Debian's /usr/bin/python3 (python3-prometheus-client).
"""

import json
import sys

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families)
from prometheus_client.parser import (
    text_string_to_metric_families as prometheus_families)


def main():
    parse = {"openmetrics": openmetrics_families,
             "prometheus": prometheus_families}[sys.argv[1]]
    samples = []
    try:
        for family in parse(sys.stdin.read()):
            for s in family.samples:
                samples.append([s.name, s.labels, s.value])
    except Exception as e:  # the parsers raise ValueError and others
        print("parser refused the scrape: %s" % e, file=sys.stderr)
        return 1
    json.dump(samples, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
