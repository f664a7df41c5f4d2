"""Earlier versions of riskgate's own code, kept as baselines for the benchmarks."""
