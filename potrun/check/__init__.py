"""The check library: read records, extract, run, compare, score, and write a resumable `--out`."""
