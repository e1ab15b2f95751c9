"""Concluded experiments, kept runnable: each was measured and not adopted (or adopted in
part); docs/benchmarks.md records what each found and the command that ran it."""
